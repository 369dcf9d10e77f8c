// The cluster master's logic, apart from gRPC: the index (master/index/),
// the nodes (master/nodes/), routing (master/routing/) and the leadership
// seam, driven by requests (already range-checked) and node messages. The
// gRPC service (master_service.h) and the fuzz target feed it; each request
// answers through a callback, which may run on another thread once the nodes
// it asked have answered.
//
// What it promises (docs/ARCHITECTURE.md, "The cluster master"):
//   - plans are made by the node that owns the bytes, at the master's order;
//     the preferred segment first, else weighted rendezvous (router.h);
//   - operations on one key are serialised (master_index.h);
//   - a node that dies takes its copies out of the index at once, and gets
//     no new order;
//   - while it does not lead, or in the rebuild window after it began to,
//     object calls answer kUnavailable (naming the leader, when known).
#ifndef NANOKV_MASTER_SERVICE_CLUSTER_MASTER_H_
#define NANOKV_MASTER_SERVICE_CLUSTER_MASTER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ipc/proto/master.pb.h"
#include "master/election/node_roster.h"
#include "master/index/master_index.h"
#include "master/nodes/node_registry.h"
#include "master/service/leadership.h"
#include "nanokv/status.h"

namespace nanokv::master {

struct ClusterMasterOptions {
  std::string id;       // this master's
  std::string address;  // where its service is reached (advertised)
  std::chrono::milliseconds lease_ttl{3000};
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds instruction_timeout{5000};
  std::chrono::milliseconds rebuild_window{3000};
  uint32_t expected_nodes = 0;
  // The copies one node may have in the index: events past it are not
  // indexed, and no plan is routed there (master_config.h).
  uint64_t max_objects_per_node = 1u << 22;
};

class ClusterMaster {
 public:
  // `leadership` must outlive the master; the caller starts it with
  // OnLeadership as its callback.
  ClusterMaster(ClusterMasterOptions options, Leadership& leadership);
  ClusterMaster(const ClusterMaster&) = delete;
  ClusterMaster& operator=(const ClusterMaster&) = delete;

  // Whether a call may be served now: OK, or kUnavailable naming why (not
  // the leader, and who is; rebuilding the index, for object calls).
  Status Admit(bool object_call) const;
  std::optional<LeaderRecord> Leader() const { return leadership_.Leader(); }
  uint64_t term() const { return leadership_.term(); }

  // Requests (checked as a whole by the caller: batch sizes; items here).
  void Open(const v1::OpenRequest& request, std::function<void(v1::OpenReply)> done);
  void Finish(const v1::FinishRequest& request, bool commit, std::function<void(v1::AckReply)> done);
  void Remove(const v1::KeysRequest& request, std::function<void(v1::AckReply)> done);
  v1::LocateReply Locate(const v1::KeysRequest& request) const;
  v1::ClusterReply Cluster() const;
  v1::PingReply Ping() const;
  // Up to `max` rows from *cursor on (0 to begin); false once all are listed.
  bool List(uint64_t* cursor, size_t max, v1::ListChunk* out) const;

  // Node sessions. OpenSession registers and sends the Welcome;
  // OnNodeMessage takes everything after it (non-OK: a protocol fault, the
  // caller ends the session with it), moving a reply out of `message` to
  // whoever waits for it, not copying its plans; CloseSession ends one (the
  // node dies).
  Result<SessionRef> OpenSession(const v1::RegisterNode& message, std::shared_ptr<NodeLink> link,
                                 const std::string& peer);
  Status OnNodeMessage(SessionRef session, v1::NodeMessage& message);
  void CloseSession(SessionRef session, const Status& why);

  // Leases and instruction deadlines, the end of the rebuild; called every
  // few tens of ms.
  void Tick(Clock::time_point now);
  // The leadership's callback: a change of leader empties the index (a new
  // leader rebuilds it from the nodes' registrations). `awaited`: the nodes
  // the roster lists, for which the rebuild waits (up to rebuild_window);
  // nullopt: no roster, the rebuild waits for expected_nodes or the window.
  void OnLeadership(bool is_leader, const LeaderRecord& leader,
                    std::optional<std::vector<std::string>> awaited = std::nullopt);
  // Where the leader records its nodes (node_roster.h); nullptr: nowhere.
  // REQUIRES: before the leadership starts; `roster` outlives the master.
  void set_roster(NodeRoster* roster) { roster_ = roster; }

  MasterIndex& index() { return index_; }
  NodeRegistry& nodes() { return nodes_; }

 private:
  class OpenJob;
  bool Rebuilding(Clock::time_point now) const;
  // Whether every awaited node reported (and expected_nodes did).
  bool RebuildDone() const;
  void RemoveCopiesOf(uint16_t node) { index_.RemoveNode(node); }
  // Fills a Replica of (node, device, epoch) with the node's names; true
  // when a reader may be sent there (Locate answers only those).
  bool Describe(const CopyRef& copy, v1::Replica* out) const;

  const ClusterMasterOptions options_;
  Leadership& leadership_;
  MasterIndex index_;
  NodeRegistry nodes_;
  const Clock::time_point started_;
  std::atomic<int64_t> lead_since_ns_{0};  // steady clock; when it began to lead
  // The term OnLeadership(true) last took up: a leadership whose callback
  // has not run yet (its index not yet emptied) serves nothing.
  std::atomic<uint64_t> led_term_{0};
  mutable std::atomic<uint64_t> rebuilt_term_{0};  // the led term whose rebuild ended (early or by the window)
  NodeRoster* roster_ = nullptr;
  mutable std::mutex awaited_mu_;
  std::optional<std::vector<std::string>> awaited_;  // guarded by awaited_mu_
  bool pruned_ = true;                                // guarded by awaited_mu_
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_CLUSTER_MASTER_H_
