// kvd's tier worker: the thread that moves objects between each device's
// store and the host tier under it (ObjectIndex::RunTierWork), so no copy
// of a move ever runs on the request loop. Its copies go on each device's
// tier stream, non-blocking (ObjectIndex::CopyMove), so they never queue
// behind kvd's other device work nor hold it up. It wakes when a write takes a
// store past low_watermark or a get finds an object in the host tier (the
// index's tier kick), and every 100 ms besides.
#ifndef NANOKV_DAEMON_OBJECTS_TIER_WORKER_H_
#define NANOKV_DAEMON_OBJECTS_TIER_WORKER_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

class TierWorker {
 public:
  // Starts the thread and installs its kick in `index`, which must outlive it.
  static std::unique_ptr<TierWorker> Start(ObjectIndex& index);
  // Removes the kick, stops the thread after its round and joins it.
  ~TierWorker();
  TierWorker(const TierWorker&) = delete;
  TierWorker& operator=(const TierWorker&) = delete;

 private:
  explicit TierWorker(ObjectIndex& index) : index_(index) {}
  void Kick();
  void Run();

  ObjectIndex& index_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool kicked_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_TIER_WORKER_H_
