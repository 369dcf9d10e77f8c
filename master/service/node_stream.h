// One kvd's session on the master's side: the server end of the
// NodeSession stream, and the NodeLink the registry sends instructions
// through. The first message must register the node; every message is
// checked (CheckNodeMessage) before the master sees it, and a fault ends the
// session (the node dies; it reconnects and registers again). The stream's
// end, for whatever reason, is the node's death.
#ifndef NANOKV_MASTER_SERVICE_NODE_STREAM_H_
#define NANOKV_MASTER_SERVICE_NODE_STREAM_H_

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "ipc/proto/master.pb.h"
#include "master/service/cluster_master.h"

namespace nanokv::master {

class NodeStream : public grpc::ServerBidiReactor<v1::NodeMessage, v1::MasterMessage> {
 public:
  // `admitted` not OK: the stream is refused with it at once. `master` must
  // outlive the stream (the server is shut down before the master goes).
  NodeStream(ClusterMaster& master, grpc::CallbackServerContext* context, const Status& admitted);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  class Link;
  friend class Link;

  // From the registry, through the Link: queue a message; end the stream.
  void Enqueue(v1::MasterMessage message);
  void CloseWith(const Status& why);
  // The node's session is over (master side): the node dies.
  void EndSession(const Status& why);

  // The session, once registered (0 before). gRPC may run each reaction on
  // another thread; it orders them, but through its own locks, which
  // ThreadSanitizer does not see: mu_ says the same in a way it does.
  SessionRef Session();

  ClusterMaster& master_;
  const std::string peer_;
  std::shared_ptr<Link> link_;
  v1::NodeMessage in_;

  std::mutex mu_;  // guards what follows: the session, writes and the finish
  SessionRef session_;
  std::deque<v1::MasterMessage> out_;
  bool writing_ = false;
  bool finishing_ = false;  // Finish once the write in flight is done
  bool finished_ = false;
  grpc::Status finish_status_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_NODE_STREAM_H_
