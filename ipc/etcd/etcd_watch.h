// A watch: etcd's events on a key or a range, in revision order, on one
// stream to one endpoint (EtcdClient::Watch makes it). A watch that ends
// (its member died or lost its raft leader, the stream broke, the start
// revision was compacted) stays ended: make a new one, from the revision
// after the last one seen, to miss nothing.
#ifndef NANOKV_IPC_ETCD_ETCD_WATCH_H_
#define NANOKV_IPC_ETCD_ETCD_WATCH_H_

#include <memory>
#include <optional>
#include <string>

#include "ipc/etcd/etcd_types.h"
#include "nanokv/status.h"

namespace nanokv::etcd {

struct Endpoint;
class WatchStream;

class EtcdWatch {
 public:
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Starts a watch on `endpoint` and waits for etcd to confirm it. Used by
  // EtcdClient::Watch, which picks the endpoint. `endpoint` must remain live
  // while the watch is in use.
  static Result<std::unique_ptr<EtcdWatch>> Start(Endpoint& endpoint, size_t endpoint_index,
                                                  const WatchSpec& spec, Deadline deadline);

  // The next batch of events (none: a progress notice), or nullopt when the
  // deadline passed first: the watch goes on, call again. An error means the
  // watch has ended: kFailedPrecondition when its start revision was
  // compacted (the message names the oldest one left), kUnavailable when the
  // stream broke or Cancel was called.
  Result<std::optional<WatchBatch>> Next(Deadline deadline);

  // Any thread: ends the watch; a Next in progress returns at once.
  void Cancel();

  // Which of the client's endpoints it watches through.
  size_t endpoint_index() const { return endpoint_index_; }
  const std::string& endpoint() const;

 private:
  EtcdWatch(Endpoint& endpoint, size_t endpoint_index);
  Status Ended(const std::string& why);

  Endpoint& endpoint_;
  size_t endpoint_index_;
  std::unique_ptr<WatchStream> stream_;
  int64_t watch_id_ = 0;
  std::optional<Status> ended_;
};

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_ETCD_WATCH_H_
