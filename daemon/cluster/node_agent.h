// kvd's side of the cluster: with `master:` in its config, kvd registers its
// node with a master and keeps a session with it (ipc/proto/master.proto,
// NodeSession). kvd only dials out: the session is a stream kvd opens, on
// which the master sends its orders, so a node needs no port for the master.
//
//   register (node id, data address, per device: uuid, store capacity, used,
//   watermarks) -> Welcome (term, lease, heartbeat) -> every READY object as
//   events (the snapshot) -> then heartbeats, object events in batches, and
//   answers to orders (open: a plan made by this node's ObjectIndex, as an
//   engine's open would be; commit, revoke, remove).
//
// The term rule: the agent remembers the highest term it has followed and
// refuses a master, or an order, of an older one: a deposed master that
// still runs cannot route a plan here. A master that goes away costs the
// node nothing: kvd keeps serving its engines, and the agent tries the
// masters in turn every retry_interval, registering with its whole object
// list when one answers.
//
// Threads: one reads the session (and answers orders on it), one sends
// heartbeats and events; the ObjectIndex tells the agent of its events under
// its own lock, which only queues them.
#ifndef NANOKV_DAEMON_CLUSTER_NODE_AGENT_H_
#define NANOKV_DAEMON_CLUSTER_NODE_AGENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/config/master_link_config.h"
#include "daemon/objects/object_index.h"
#include "ipc/proto/master.grpc.pb.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct NodeAgentOptions {
  MasterLinkConfig link;
  std::vector<std::string> device_uuids;  // by kvd's ordinal ("" unknown)
  std::string data_mode;                  // the transfer agent's ("" without one)
  std::string kvd_socket;                 // this kvd's socket: the route of clients on this host
};

class NodeAgent {
 public:
  // Reads the token and TLS files (errors name them) and starts the
  // threads. `store` must outlive the agent; the agent sets its event
  // listener and clears it when it stops.
  static Result<std::unique_ptr<NodeAgent>> Start(ObjectIndex& store, NodeAgentOptions options);
  ~NodeAgent();  // Stop()
  NodeAgent(const NodeAgent&) = delete;
  NodeAgent& operator=(const NodeAgent&) = delete;

  void Stop();
  const std::string& node_id() const { return node_id_; }
  uint64_t highest_term() const { return highest_term_.load(); }

  // Whether an order of `term` may be followed: refuses one older than the
  // highest followed (kFailedPrecondition naming both), else raises it.
  static Status AdmitTerm(std::atomic<uint64_t>& highest, uint64_t term);

 private:
  NodeAgent(ObjectIndex& store, NodeAgentOptions options, std::string token,
            std::shared_ptr<grpc::ChannelCredentials> credentials);
  using Stream = grpc::ClientReaderWriter<master::v1::NodeMessage, master::v1::MasterMessage>;

  void RunSessions();
  // One session with the master at `address`: returns when it ends, with
  // why, and a leader's address to try next when the master named one.
  Status Session(const std::string& address, std::string* leader_hint);
  // Registration: register, the Welcome, the snapshot. REQUIRES: write_mu_.
  Status Register(Stream& stream, const std::string& address);
  void RunBeats();
  master::v1::RegisterNode RegisterMessage() const;
  void FillDevices(google::protobuf::RepeatedPtrField<master::v1::DeviceReport>* out) const;
  // The answer to one instruction (node_orders.cc).
  master::v1::InstructionReply Execute(const master::v1::Instruction& instruction);
  void OnEvent(const ObjectEvent& event);
  // Waits up to `delay` unless stopping. False once stopping.
  bool Pause(std::chrono::milliseconds delay);
  bool Write(const master::v1::NodeMessage& message);  // REQUIRES: write_mu_ held

  ObjectIndex& store_;
  const NodeAgentOptions options_;
  const std::string node_id_;
  const std::string token_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::atomic<uint64_t> highest_term_{0};

  std::mutex mu_;  // stopping_, context_, the intervals
  std::condition_variable wake_;
  bool stopping_ = false;
  grpc::ClientContext* context_ = nullptr;  // the session's, to cancel it
  std::chrono::milliseconds heartbeat_{1000};

  std::mutex write_mu_;      // one writer on the stream at a time
  Stream* stream_ = nullptr;  // while registered; guarded by write_mu_

  std::mutex events_mu_;
  bool collecting_ = false;  // from the snapshot on: events are queued
  std::vector<master::v1::ObjectEvent> events_;

  std::thread sessions_;
  std::thread beats_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CLUSTER_NODE_AGENT_H_
