// The master's sessions with nodes, its reads (locate, cluster, list), time
// and leadership. Writes and removals: cluster_master_writes.cc.
#include "master/service/cluster_master.h"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"

namespace nanokv::master {
namespace {

int64_t SteadyNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

uint64_t Ms(Clock::duration d) {
  return d.count() <= 0 ? 0 : static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

ClusterMaster::ClusterMaster(ClusterMasterOptions options, Leadership& leadership)
    : options_(std::move(options)),
      leadership_(leadership),
      nodes_(options_.lease_ttl, options_.instruction_timeout),
      started_(Clock::now()) {}

bool ClusterMaster::RebuildDone() const {
  const size_t alive = nodes_.alive_nodes();
  std::lock_guard lock(awaited_mu_);
  if (!awaited_) return options_.expected_nodes != 0 && alive >= options_.expected_nodes;
  for (const std::string& id : *awaited_) {
    if (!nodes_.IsAlive(id)) return false;
  }
  return alive >= options_.expected_nodes;
}

bool ClusterMaster::Rebuilding(Clock::time_point now) const {
  // The term first: a call that began under an earlier leadership marks
  // that one's rebuild over, never this one's.
  const uint64_t term = led_term_.load(std::memory_order_acquire);
  if (rebuilt_term_.load(std::memory_order_acquire) == term) return false;
  const int64_t since = lead_since_ns_.load(std::memory_order_acquire);
  const bool window_over =
      SteadyNs(now) - since >= std::chrono::duration_cast<std::chrono::nanoseconds>(options_.rebuild_window).count();
  if (!window_over && !RebuildDone()) return true;
  rebuilt_term_.store(term, std::memory_order_release);
  return false;
}

Status ClusterMaster::Admit(bool object_call) const {
  if (!leadership_.IsLeader()) {
    std::string why = "master " + options_.id + " does not lead";
    if (auto leader = leadership_.Leader()) {
      why += "; the leader is " + leader->id + " at " + leader->address + " (term " + std::to_string(leader->term) + ")";
    } else {
      why += " and knows no leader yet";
    }
    return Status::Unavailable(why);
  }
  if (led_term_.load(std::memory_order_acquire) != leadership_.term()) {
    return Status::Unavailable("master " + options_.id + " begins to lead; ask again shortly");
  }
  if (object_call && Rebuilding(Clock::now())) {
    return Status::Unavailable("master " + options_.id + " is rebuilding its index from the nodes' registrations (" +
                               std::to_string(nodes_.alive_nodes()) + " node(s) so far" +
                               (options_.expected_nodes != 0 ? " of " + std::to_string(options_.expected_nodes) : "") +
                               "); ask again shortly");
  }
  return Status::OK();
}

bool ClusterMaster::Describe(const CopyRef& copy, v1::Replica* out) const {
  NodeRegistry::Place place = nodes_.PlaceOf(copy.node, copy.device);
  out->set_node_id(place.node_id);
  out->set_data_address(place.data_address);
  out->set_device(copy.device);
  out->set_device_uuid(place.device_uuid);
  out->set_epoch(copy.epoch);
  out->set_tier(copy.tier == kCopyInHostTier ? v1::HOST_TIER : v1::GPU_STORE);
  return place.reachable;
}

v1::LocateReply ClusterMaster::Locate(const v1::KeysRequest& request) const {
  v1::LocateReply reply;
  reply.set_term(term());
  std::map<uint16_t, NodeRegistry::Place> routes;
  for (const std::string& key : request.keys()) {
    v1::Location* location = reply.add_results();
    Status checked = CheckKey(key, "locate");
    auto found = checked.ok() ? index_.Find(key) : Result<MasterIndex::Found>(checked);
    if (!found.ok()) {
      ToItem(found.status(), location->mutable_status());
      continue;
    }
    location->set_bytes_total(found->bytes_total);
    // Only copies a reader can reach: a node declared dead keeps its copies
    // in the index for the moment it takes to drop them.
    std::vector<std::string> gone;
    for (const CopyRef& copy : found->copies) {
      if (!Describe(copy, location->add_replicas())) {
        gone.push_back(location->replicas(location->replicas_size() - 1).node_id());
        location->mutable_replicas()->RemoveLast();
      }
    }
    if (location->replicas_size() == 0) {
      std::string nodes;
      for (const std::string& node : gone) nodes += (nodes.empty() ? "" : ", ") + node;
      ToItem(Status::Unavailable("every copy of '" + key + "' is on a node that is not alive (" + nodes + ")"),
             location->mutable_status());
      location->clear_bytes_total();
      continue;
    }
    // Copies in a GPU store before those in a host tier (a get of one
    // waits while its kvd moves it up), then nearest first: the caller's
    // device, then its node, then the others.
    auto distance = [&](const v1::Replica& r) {
      const int tier = r.tier() == v1::HOST_TIER ? 3 : 0;
      if (r.node_id() != request.client_node()) return tier + 2;
      return tier + (!request.client_device_uuid().empty() && r.device_uuid() == request.client_device_uuid() ? 0 : 1);
    };
    std::stable_sort(location->mutable_replicas()->begin(), location->mutable_replicas()->end(),
                     [&](const v1::Replica& a, const v1::Replica& b) { return distance(a) < distance(b); });
    location->mutable_status()->set_code(0);
    for (const CopyRef& copy : found->copies) {
      if (!routes.contains(copy.node)) routes.emplace(copy.node, nodes_.PlaceOf(copy.node, copy.device));
    }
  }
  // One route per node the copies are on.
  for (auto& [node, place] : routes) {
    if (!place.reachable) continue;
    v1::NodeRouteEntry* entry = reply.add_routes();
    entry->set_node_id(std::move(place.node_id));
    *entry->mutable_route() = std::move(place.route);
  }
  return reply;
}

v1::ClusterReply ClusterMaster::Cluster() const {
  const Clock::time_point now = Clock::now();
  v1::ClusterReply reply;
  reply.set_term(term());
  reply.set_master_id(options_.id);
  if (auto leader = leadership_.Leader()) {
    reply.set_leader_id(leader->id);
    reply.set_leader_address(leader->address);
  }
  nodes_.Describe(index_, now, &reply);
  reply.set_objects(index_.objects());
  reply.set_writes_in_progress(index_.writes_in_progress());
  reply.set_index_bytes(index_.MemoryBytes());
  reply.set_uptime_ms(Ms(now - started_));
  reply.set_rebuilding(leadership_.IsLeader() && Rebuilding(now));
  return reply;
}

v1::PingReply ClusterMaster::Ping() const {
  v1::PingReply reply;
  reply.set_term(term());
  reply.set_master_id(options_.id);
  reply.set_leader(leadership_.IsLeader());
  return reply;
}

bool ClusterMaster::List(uint64_t* cursor, size_t max, v1::ListChunk* out) const {
  out->set_term(term());
  size_t shard = static_cast<size_t>(*cursor >> 48);
  size_t slot = static_cast<size_t>(*cursor & ((1ull << 48) - 1));
  while (shard < MasterIndex::kShards && static_cast<size_t>(out->objects_size()) < max) {
    bool more = index_.ListFrom(shard, &slot, max - static_cast<size_t>(out->objects_size()),
                                [&](std::string_view key, uint64_t bytes, const std::vector<CopyRef>& copies) {
                                  v1::ObjectRow* row = out->add_objects();
                                  row->set_key(std::string(key));
                                  row->set_bytes_total(bytes);
                                  for (const CopyRef& c : copies) Describe(c, row->add_replicas());
                                });
    if (!more) {
      ++shard;
      slot = 0;
    }
  }
  *cursor = (static_cast<uint64_t>(shard) << 48) | slot;
  return shard < MasterIndex::kShards;
}

Result<SessionRef> ClusterMaster::OpenSession(const v1::RegisterNode& message, std::shared_ptr<NodeLink> link,
                                              const std::string& peer) {
  NANOKV_RETURN_IF_ERROR(Admit(false));
  const uint64_t my_term = term();
  if (message.highest_term() > my_term) {
    // The node will refuse this master (the term rule is the node's to
    // keep); say here why no node stays.
    spdlog::warn("master {}: node {} has followed term {}, newer than this master's {}: it will not stay",
                 options_.id, message.node_id(), message.highest_term(), my_term);
  }
  auto session = nodes_.Register(message, link, peer, Clock::now());
  if (!session.ok()) return session.status();
  v1::MasterMessage welcome;
  welcome.set_term(my_term);
  welcome.mutable_welcome()->set_master_id(options_.id);
  welcome.mutable_welcome()->set_lease_ttl_ms(static_cast<uint64_t>(options_.lease_ttl.count()));
  welcome.mutable_welcome()->set_heartbeat_ms(static_cast<uint64_t>(options_.heartbeat_interval.count()));
  link->Send(std::move(welcome));
  spdlog::info("master: node {} registers from {} with {} device(s)", message.node_id(), peer,
               message.devices_size());
  return *session;
}

Status ClusterMaster::OnNodeMessage(SessionRef session, v1::NodeMessage& message) {
  nodes_.Touch(session, Clock::now());
  switch (message.body_case()) {
    case v1::NodeMessage::kEvents: {
      const v1::EventBatch& batch = message.events();
      size_t refused = 0;
      const std::string* first_refused = nullptr;
      nodes_.WithLiveSession(session, [&] {
        for (const v1::ObjectEvent& e : batch.events()) {
          // A READY event of a copy the index has refreshes it: a move
          // between the node's tiers says where it is now.
          CopyRef copy{session.node, static_cast<uint8_t>(e.device()), static_cast<uint8_t>(e.tier()), e.epoch()};
          if (e.kind() != v1::ObjectEvent::READY) {
            index_.RemoveCopy(e.key(), session.node, e.epoch());
          } else if (!index_.AddCopy(e.key(), e.bytes_total(), copy, options_.max_objects_per_node)) {
            if (refused++ == 0) first_refused = &e.key();
          }
        }
      });
      if (refused != 0 && nodes_.FirstOverLimit(session)) {
        spdlog::warn("master: node {} holds max_objects_per_node ({}) objects in the index: '{}' and {} more of "
                     "its objects are not indexed (readers are not sent there), nor is any it adds until some "
                     "leave; raise max_objects_per_node in the master's config if the node is meant to hold more",
                     nodes_.PlaceOf(session.node, 0).node_id, options_.max_objects_per_node, *first_refused,
                     refused - 1);
      }
      if (batch.snapshot_done()) {
        // Its id while the session is surely its own (a dead node's slot may
        // go to another id).
        const std::string id = nodes_.PlaceOf(session.node, 0).node_id;
        if (nodes_.MarkSnapshotDone(session) && roster_ != nullptr && leadership_.IsLeader()) roster_->Add(id);
      }
      return Status::OK();
    }
    case v1::NodeMessage::kHeartbeat:
      nodes_.UpdateDevices(session, message.heartbeat());
      return Status::OK();
    case v1::NodeMessage::kReply:
      return nodes_.OnReply(session, std::move(*message.mutable_reply()));
    case v1::NodeMessage::kRegister:
      return Status::ProtocolError("a node registers once per session");
    case v1::NodeMessage::BODY_NOT_SET:
      break;
  }
  return Status::ProtocolError("node message without a body");
}

void ClusterMaster::CloseSession(SessionRef session, const Status& why) {
  // Its id now: once dead, its slot may go to another node.
  const std::string id = nodes_.PlaceOf(session.node, 0).node_id;
  const bool ended = nodes_.EndSession(session, why, [this](uint16_t node) { RemoveCopiesOf(node); });
  // A node dead under a leader: the next leader need not wait for it.
  if (ended && roster_ != nullptr && leadership_.IsLeader()) roster_->Remove(id);
}

void ClusterMaster::Tick(Clock::time_point now) {
  for (SessionRef lapsed : nodes_.Expire(now)) {
    CloseSession(lapsed, Status::Unavailable("lease lapsed: no message for " +
                                             std::to_string(options_.lease_ttl.count()) + "ms"));
  }
  if (roster_ != nullptr && leadership_.IsLeader() && !Rebuilding(now)) {
    // The rebuild is over: nodes listed that never reported are gone.
    std::vector<std::string> absent;
    {
      std::lock_guard lock(awaited_mu_);
      if (pruned_) return;
      pruned_ = true;
      for (const std::string& id : awaited_.value_or(std::vector<std::string>{})) {
        if (!nodes_.IsAlive(id)) absent.push_back(id);
      }
    }
    for (const std::string& id : absent) {
      spdlog::warn("master {}: node {} did not register within the rebuild window: taken off the roster", options_.id,
                   id);
      roster_->Remove(id);
    }
  }
}

void ClusterMaster::OnLeadership(bool is_leader, const LeaderRecord& leader,
                                 std::optional<std::vector<std::string>> awaited) {
  led_term_.store(0, std::memory_order_release);
  // Either way what the index knew is not to be trusted: a new leader
  // rebuilds it from registrations, one that stops leading forgets it.
  nodes_.EndAll(Status::Unavailable(is_leader ? "master " + options_.id + " begins to lead (term " +
                                                    std::to_string(leader.term) + "): register again"
                                              : "master " + options_.id + " stopped leading"),
                [this](uint16_t node) { RemoveCopiesOf(node); });
  index_.Clear();
  if (is_leader) {
    const size_t awaiting = awaited ? awaited->size() : 0;
    {
      std::lock_guard lock(awaited_mu_);
      awaited_ = std::move(awaited);
      pruned_ = false;
    }
    rebuilt_term_.store(0, std::memory_order_release);
    lead_since_ns_.store(SteadyNs(Clock::now()), std::memory_order_release);
    led_term_.store(leader.term, std::memory_order_release);
    spdlog::info("master {}: leads (term {}); rebuilding the index, awaiting {} node(s) of the roster", options_.id,
                 leader.term, awaiting);
  } else {
    spdlog::info("master {}: does not lead (term {})", options_.id, leader.term);
  }
}

}  // namespace nanokv::master
