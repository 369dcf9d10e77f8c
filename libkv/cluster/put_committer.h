// The thread that finishes ClusterClient's stream-ordered puts
// (PutFromDeviceAsync): it waits for each batch's device work, moves what
// goes to other hosts and commits, in the order the batches came, so the
// caller's thread makes no round trip for them.
#ifndef NANOKV_LIBKV_CLUSTER_PUT_COMMITTER_H_
#define NANOKV_LIBKV_CLUSTER_PUT_COMMITTER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace nanokv::cluster {

class PutCommitter {
 public:
  PutCommitter();
  // Runs every job already posted, then ends the thread.
  ~PutCommitter();
  PutCommitter(const PutCommitter&) = delete;
  PutCommitter& operator=(const PutCommitter&) = delete;

  void Post(std::function<void()> job);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;  // GUARDED_BY(mu_)
  bool stopping_ = false;                   // GUARDED_BY(mu_)
  std::thread thread_;                      // last: started once the rest is made
};

}  // namespace nanokv::cluster

#endif  // NANOKV_LIBKV_CLUSTER_PUT_COMMITTER_H_
