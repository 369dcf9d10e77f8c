// The master's nodes: who registered, their devices and object stores, their
// sessions and leases, and the instructions sent to them awaiting an answer.
//
// A node is a kvd with `master:` in its config. It opens a session (a gRPC
// stream, master/service/node_stream.h, or any NodeLink), registers, sends
// its objects, then heartbeats and events; the session is its lease. The
// node is dead when the session ends or no message came for lease_ttl: its
// copies leave the index at once (the caller's remove_copies) and no new
// instruction goes to it.
//
// A node id belongs to one live session at a time: a second registration of
// an id whose session lives is refused (kAlreadyExists) until that session
// ends or its lease lapses. Every peer holds the same cluster token, so a
// newcomer cannot prove the live one gone; the lease is that proof
// (docs/ARCHITECTURE.md, "The cluster master"). The table has kMaxNodes
// slots; once all were used, a new id takes the slot of the node dead
// longest (its copies left the index at its death), so ids of dead
// sessions never fill it for good.
//
// Whatever a session adds to the index goes through WithLiveSession, under
// the node's apply lock, and a dying session's copies are removed under the
// same lock after it stopped being live: nothing a dead session said can
// land in the index after its copies left.
//
// Thread-safe. Callbacks (an instruction's done) run without the registry's
// locks held.
#ifndef NANOKV_MASTER_NODES_NODE_REGISTRY_H_
#define NANOKV_MASTER_NODES_NODE_REGISTRY_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ipc/proto/master.pb.h"
#include "master/index/master_index.h"
#include "nanokv/status.h"

namespace nanokv::master {

using Clock = std::chrono::steady_clock;

// The session to one node as the registry uses it.
class NodeLink {
 public:
  virtual ~NodeLink() = default;
  // Queues `message` for the node; never blocks. Dropped once closed.
  virtual void Send(v1::MasterMessage message) = 0;
  // Ends the session, telling the node `why`; it reconnects when it can.
  virtual void Close(const Status& why) = 0;
};

// One device of a live node as routing sees it.
struct StoreView {
  uint16_t node = 0;
  std::string node_id;
  std::string data_address;
  v1::NodeRoute route;            // its host and kvd socket
  int device = 0;
  std::string uuid;
  uint64_t capacity = 0;          // payload bytes
  uint64_t used = 0;              // as last reported
  const std::atomic<uint64_t>* routed = nullptr;  // bytes planned there since that report
  double high_watermark = 1;
  uint64_t host_capacity = 0;     // the host tier under the store (0: none)
  uint64_t host_used = 0;         // as last reported
  uint64_t id_hash = 0;           // of node id and device: the rendezvous seed
};

// A handle on one session of one node.
struct SessionRef {
  uint16_t node = 0;
  uint64_t id = 0;
};

// An instruction's outcome and the session that answered (0 when none did).
using ReplyDone = std::function<void(Result<v1::InstructionReply>, SessionRef)>;

class NodeRegistry {
 public:
  NodeRegistry(std::chrono::milliseconds lease_ttl, std::chrono::milliseconds instruction_timeout);
  ~NodeRegistry();
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // A session begins (`message` checked by CheckNodeMessage). kUnavailable
  // while the node's previous session is being cleaned up; kAlreadyExists
  // while a session of the same id lives; kResourceExhausted while all
  // kMaxNodes slots hold live (or dying) nodes.
  Result<SessionRef> Register(const v1::RegisterNode& message, std::shared_ptr<NodeLink> link,
                              const std::string& peer, Clock::time_point now);
  // The node's object list is in: it is alive and takes plans. True if
  // `session` was registering (live) and is alive now.
  bool MarkSnapshotDone(SessionRef session);
  // Any message from the node renews its lease; a heartbeat brings figures.
  void Touch(SessionRef session, Clock::time_point now);
  void UpdateDevices(SessionRef session, const v1::Heartbeat& heartbeat);

  // Runs `fn` only while `session` is its node's live session, holding the
  // node's apply lock. False if it did not run.
  bool WithLiveSession(SessionRef session, const std::function<void()>& fn);

  // True the first time in `session` it is asked: a session's first copy
  // over its node's object limit is logged, not every one.
  bool FirstOverLimit(SessionRef session);

  // Sends `instruction` (request id filled in here) to the node's live
  // session with `term`. `done` runs once: with the reply (checked by
  // CheckInstructionReply against `orders` and `plans`), or kUnavailable
  // when the node is not live, its session ends, or it does not answer
  // within instruction_timeout.
  void Send(uint16_t node, v1::Instruction instruction, size_t orders, bool plans, uint64_t term,
            ReplyDone done);
  // A reply from `session`, moved to its waiter (a batch's reply holds a
  // plan per object, which a copy would allocate again): kProtocolError if
  // it answers nothing sent (the caller ends the session).
  Status OnReply(SessionRef session, v1::InstructionReply&& reply);

  // Ends `session` if it is its node's live one: the link is closed with
  // `why`, `remove_copies(node)` runs under the node's apply lock, and
  // instructions awaiting it fail. True if it was live.
  bool EndSession(SessionRef session, const Status& why, const std::function<void(uint16_t)>& remove_copies);
  // Sessions whose lease lapsed at `now` (the caller ends each), and
  // instructions past their deadline (failed here).
  std::vector<SessionRef> Expire(Clock::time_point now);
  // Ends every session (a master that stops leading).
  void EndAll(const Status& why, const std::function<void(uint16_t)>& remove_copies);

  // Routing's view: every device of every live node, rebuilt when nodes
  // come, go or report. Its `routed` counters stay valid for the
  // registry's life.
  std::shared_ptr<const std::vector<StoreView>> Stores() const;
  // A plan of `bytes` went to (node, device): counted until its next report.
  void NoteRouted(uint16_t node, int device, uint64_t bytes);
  // A copy's place in words: its node's id and data address, the device's
  // uuid (empty where unknown), and whether a reader may be sent there: its
  // session is registering or alive (a dead or dying node's copies go from
  // the index just after, under its apply lock).
  struct Place {
    std::string node_id;
    std::string data_address;
    std::string device_uuid;
    v1::NodeRoute route;
    bool reachable = false;
  };
  Place PlaceOf(uint16_t node, int device) const;
  // Whether slot `node` is the node `id` (no Place built: asked per plan).
  bool HasId(uint16_t node, std::string_view id) const;
  // The index of node id `id`, if the master knows it (dead ones too).
  std::optional<uint16_t> FindNode(const std::string& id) const;
  // kvctl cluster: every node the master knows, alive or dead (a dead
  // one until its slot goes to a new id).
  void Describe(const MasterIndex& index, Clock::time_point now, v1::ClusterReply* out) const;
  size_t alive_nodes() const;
  // Whether node `id` has a live session whose object list is in.
  bool IsAlive(const std::string& id) const;

 private:
  enum class State { kNew, kRegistering, kAlive, kDying, kDead };
  struct Pending {
    ReplyDone done;
    size_t orders = 0;
    bool plans = false;
    Clock::time_point deadline;
    uint64_t session = 0;
  };
  struct Node {
    uint16_t index = 0;
    std::string id;
    std::string data_address;
    std::string data_mode;  // the transfer agent's, as registered
    v1::NodeRoute route;    // its host and kvd socket, as registered
    std::string peer;
    State state = State::kNew;
    uint64_t session = 0;  // the live session's id, 0 none
    std::shared_ptr<NodeLink> link;
    std::vector<v1::DeviceReport> devices;
    std::array<std::atomic<uint64_t>, kMaxNodeDevices> routed{};  // bytes since the last report
    Clock::time_point last_message{};
    Clock::time_point since{};  // registered (alive) or died (dead)
    std::mutex apply_mu;        // held while a session's news enters the index
    bool over_limit_told = false;  // this session went over the object limit (logged once)
  };

  Node* LiveNode(SessionRef session);  // REQUIRES: mu_ held
  // The slot for a new id: a fresh one, else the node dead longest's
  // (forgotten here); nullptr when every slot holds a node not yet dead.
  Node* FreeSlot();  // REQUIRES: mu_ held
  void RebuildStores();                // REQUIRES: mu_ held
  // Takes the pending instructions of `session` out (to be failed).
  std::vector<Pending> TakePending(uint64_t session);  // REQUIRES: mu_ held
  static void Fail(std::vector<Pending> pending, const Status& why);

  const std::chrono::milliseconds lease_ttl_;
  const std::chrono::milliseconds instruction_timeout_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<std::string, uint16_t> by_id_;
  uint64_t next_session_ = 1;
  uint64_t next_request_ = 1;
  std::map<uint64_t, Pending> pending_;  // by request id
  std::shared_ptr<const std::vector<StoreView>> stores_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_NODES_NODE_REGISTRY_H_
