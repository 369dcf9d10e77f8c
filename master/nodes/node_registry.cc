#include "master/nodes/node_registry.h"

#include <xxhash.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "ipc/master/master_checks.h"

namespace nanokv::master {
namespace {

uint64_t Ms(Clock::duration d) {
  return d.count() <= 0 ? 0 : static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

NodeRegistry::NodeRegistry(std::chrono::milliseconds lease_ttl, std::chrono::milliseconds instruction_timeout)
    : lease_ttl_(lease_ttl),
      instruction_timeout_(instruction_timeout),
      stores_(std::make_shared<const std::vector<StoreView>>()) {}

// gRPC's threads run the node streams' handlers, which read the nodes under
// mu_; the server's shutdown orders them before this, inside libgrpc, where
// TSan cannot see it (tests/tsan.supp). Taking mu_ once more makes that order
// one TSan sees too (a race it reported on a node's devices, ClusterSessionsTest).
NodeRegistry::~NodeRegistry() { std::lock_guard lock(mu_); }

Result<SessionRef> NodeRegistry::Register(const v1::RegisterNode& message, std::shared_ptr<NodeLink> link,
                                          const std::string& peer, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(message.node_id());
  Node* node = nullptr;
  if (it != by_id_.end()) {
    node = nodes_[it->second].get();
  } else {
    node = FreeSlot();
    if (node == nullptr) {
      return Status::ResourceExhausted("the master holds " + std::to_string(kMaxNodes) +
                                       " nodes, none of them dead: node " + message.node_id() +
                                       " is refused until one of them dies");
    }
    node->id = message.node_id();
    by_id_[node->id] = node->index;
  }
  if (node->state == State::kDying) {
    return Status::Unavailable("node " + node->id + ": its previous session is being cleaned up; register again");
  }
  if (node->session != 0) {
    // Every peer holds the same token: the newcomer cannot prove the live
    // session gone, and taking its place would drop the real node's copies.
    return Status::AlreadyExists("node " + node->id + " has a live session from " + node->peer +
                                 " (last message " + std::to_string(Ms(now - node->last_message)) +
                                 "ms ago); another session of it is refused until that one ends or sends "
                                 "nothing for lease_ttl (" + std::to_string(lease_ttl_.count()) + "ms)");
  }
  node->session = next_session_++;
  node->state = State::kRegistering;
  node->link = std::move(link);
  node->peer = peer;
  node->data_address = message.data_address();
  node->data_mode = message.data_mode();
  node->route = message.route();
  node->devices.assign(message.devices().begin(), message.devices().end());
  for (auto& routed : node->routed) routed.store(0, std::memory_order_relaxed);
  node->over_limit_told = false;
  node->last_message = now;
  node->since = now;
  return SessionRef{node->index, node->session};
}

NodeRegistry::Node* NodeRegistry::FreeSlot() {
  if (nodes_.size() < kMaxNodes) {
    nodes_.push_back(std::make_unique<Node>());
    nodes_.back()->index = static_cast<uint16_t>(nodes_.size() - 1);
    return nodes_.back().get();
  }
  // Full: the node dead longest gives its slot up. Its copies left the
  // index at its death (state kDead comes after), and whatever still names
  // its index finds the new node not the one it meant: an order's answer
  // is checked against the node id it was meant for.
  Node* oldest = nullptr;
  for (const auto& node : nodes_) {
    if (node->state == State::kDead && (oldest == nullptr || node->since < oldest->since)) oldest = node.get();
  }
  if (oldest == nullptr) return nullptr;
  spdlog::info("master: node table full: node {}'s slot (dead {}ms) is freed for a new node", oldest->id,
               Ms(Clock::now() - oldest->since));
  by_id_.erase(oldest->id);
  oldest->id.clear();
  oldest->data_address.clear();
  oldest->data_mode.clear();
  oldest->peer.clear();
  oldest->devices.clear();
  oldest->state = State::kNew;
  return oldest;
}

NodeRegistry::Node* NodeRegistry::LiveNode(SessionRef session) {
  if (session.node >= nodes_.size()) return nullptr;
  Node* node = nodes_[session.node].get();
  return node->session == session.id && session.id != 0 ? node : nullptr;
}

bool NodeRegistry::MarkSnapshotDone(SessionRef session) {
  std::lock_guard lock(mu_);
  Node* node = LiveNode(session);
  if (node == nullptr || node->state != State::kRegistering) return false;
  node->state = State::kAlive;
  spdlog::info("master: node {} is alive ({} device(s), from {})", node->id, node->devices.size(), node->peer);
  RebuildStores();
  return true;
}

void NodeRegistry::Touch(SessionRef session, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (Node* node = LiveNode(session)) node->last_message = now;
}

void NodeRegistry::UpdateDevices(SessionRef session, const v1::Heartbeat& heartbeat) {
  std::lock_guard lock(mu_);
  Node* node = LiveNode(session);
  if (node == nullptr) return;
  node->devices.assign(heartbeat.devices().begin(), heartbeat.devices().end());
  for (auto& routed : node->routed) routed.store(0, std::memory_order_relaxed);
  if (node->state == State::kAlive) RebuildStores();
}

bool NodeRegistry::WithLiveSession(SessionRef session, const std::function<void()>& fn) {
  Node* node = nullptr;
  {
    std::lock_guard lock(mu_);
    node = LiveNode(session);
    if (node == nullptr) return false;
  }
  std::lock_guard apply(node->apply_mu);
  {
    // Still live now that we hold the apply lock: a death takes the apply
    // lock after it ended the session, so it waits for us, or we see it.
    std::lock_guard lock(mu_);
    if (LiveNode(session) == nullptr) return false;
  }
  fn();
  return true;
}

bool NodeRegistry::FirstOverLimit(SessionRef session) {
  std::lock_guard lock(mu_);
  Node* node = LiveNode(session);
  if (node == nullptr || node->over_limit_told) return false;
  node->over_limit_told = true;
  return true;
}

void NodeRegistry::Send(uint16_t node_index, v1::Instruction instruction, size_t orders, bool plans,
                        uint64_t term, ReplyDone done) {
  std::shared_ptr<NodeLink> link;
  v1::MasterMessage message;
  std::string not_alive;
  {
    std::lock_guard lock(mu_);
    Node* node = node_index < nodes_.size() ? nodes_[node_index].get() : nullptr;
    if (node == nullptr || node->session == 0 || node->state != State::kAlive) {
      not_alive = node != nullptr ? node->id : std::to_string(node_index);
    } else {
      uint64_t id = next_request_++;
      instruction.set_request_id(id);
      pending_[id] = Pending{std::move(done), orders, plans, Clock::now() + instruction_timeout_, node->session};
      link = node->link;
      message.set_term(term);
      *message.mutable_instruction() = std::move(instruction);
    }
  }
  if (link == nullptr) return done(Status::Unavailable("node " + not_alive + " is not alive"), SessionRef{});
  // Outside the lock: a session that ends meanwhile drops the message and
  // fails the instruction (it is in pending_ already).
  link->Send(std::move(message));
}

Status NodeRegistry::OnReply(SessionRef session, v1::InstructionReply&& reply) {
  Pending pending;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(reply.request_id());
    if (it == pending_.end()) {
      // Timed out already, or never sent: a late reply is harmless, a
      // reply to an id never sent to this session is not.
      return reply.request_id() < next_request_ ? Status::OK()
                                                : Status::ProtocolError("reply to instruction " +
                                                                        std::to_string(reply.request_id()) +
                                                                        ", which was never sent");
    }
    if (it->second.session != session.id) return Status::ProtocolError("reply to another session's instruction");
    pending = std::move(it->second);
    pending_.erase(it);
  }
  Status checked = CheckInstructionReply(reply, pending.orders, pending.plans);
  if (!checked.ok()) {
    pending.done(checked, session);
    return checked;
  }
  pending.done(std::move(reply), session);
  return Status::OK();
}

std::vector<NodeRegistry::Pending> NodeRegistry::TakePending(uint64_t session) {
  std::vector<Pending> taken;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.session == session) {
      taken.push_back(std::move(it->second));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

void NodeRegistry::Fail(std::vector<Pending> pending, const Status& why) {
  for (Pending& p : pending) p.done(why, SessionRef{});
}

bool NodeRegistry::EndSession(SessionRef session, const Status& why,
                              const std::function<void(uint16_t)>& remove_copies) {
  Node* node = nullptr;
  std::string id;  // the node's slot may go to another id once it is dead
  std::shared_ptr<NodeLink> link;
  std::vector<Pending> pending;
  {
    std::lock_guard lock(mu_);
    node = LiveNode(session);
    if (node == nullptr) return false;
    id = node->id;
    node->session = 0;
    node->state = State::kDying;
    link = std::move(node->link);
    pending = TakePending(session.id);
    RebuildStores();
  }
  spdlog::info("master: node {} is dead: {}", id, why.ToString());
  link->Close(why);
  {
    std::lock_guard apply(node->apply_mu);
    remove_copies(node->index);
  }
  {
    std::lock_guard lock(mu_);
    node->state = State::kDead;
    node->since = Clock::now();
  }
  Fail(std::move(pending), Status::Unavailable("node " + id + " is gone: " + std::string(why.message())));
  return true;
}

std::vector<SessionRef> NodeRegistry::Expire(Clock::time_point now) {
  std::vector<SessionRef> lapsed;
  std::vector<Pending> late;
  {
    std::lock_guard lock(mu_);
    for (const auto& node : nodes_) {
      if (node->session != 0 && now - node->last_message > lease_ttl_) {
        lapsed.push_back({node->index, node->session});
      }
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        late.push_back(std::move(it->second));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Fail(std::move(late), Status::Unavailable("the node did not answer within " +
                                            std::to_string(instruction_timeout_.count()) + "ms"));
  return lapsed;
}

void NodeRegistry::EndAll(const Status& why, const std::function<void(uint16_t)>& remove_copies) {
  std::vector<SessionRef> live;
  {
    std::lock_guard lock(mu_);
    for (const auto& node : nodes_) {
      if (node->session != 0) live.push_back({node->index, node->session});
    }
  }
  for (SessionRef s : live) EndSession(s, why, remove_copies);
}

void NodeRegistry::RebuildStores() {
  auto stores = std::make_shared<std::vector<StoreView>>();
  for (const auto& node : nodes_) {
    if (node->state != State::kAlive) continue;
    for (const v1::DeviceReport& d : node->devices) {
      StoreView view;
      view.node = node->index;
      view.node_id = node->id;
      view.data_address = node->data_address;
      view.route = node->route;
      view.device = d.device();
      view.uuid = d.uuid();
      view.capacity = d.capacity_bytes();
      view.used = d.used_bytes();
      view.routed = &node->routed[static_cast<size_t>(d.device())];
      view.high_watermark = d.high_watermark() > 0 ? d.high_watermark() : 1;
      view.host_capacity = d.host_capacity_bytes();
      view.host_used = std::min(d.host_used_bytes(), d.host_capacity_bytes());
      std::string seed = node->id + "/" + std::to_string(d.device());
      view.id_hash = XXH64(seed.data(), seed.size(), 0x6e616e6f6b76ull);
      stores->push_back(std::move(view));
    }
  }
  stores_ = std::move(stores);
}

std::shared_ptr<const std::vector<StoreView>> NodeRegistry::Stores() const {
  std::lock_guard lock(mu_);
  return stores_;
}

void NodeRegistry::NoteRouted(uint16_t node, int device, uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (node < nodes_.size() && device >= 0 && static_cast<size_t>(device) < kMaxNodeDevices) {
    nodes_[node]->routed[static_cast<size_t>(device)].fetch_add(bytes, std::memory_order_relaxed);
  }
}

NodeRegistry::Place NodeRegistry::PlaceOf(uint16_t node, int device) const {
  std::lock_guard lock(mu_);
  if (node >= nodes_.size()) return {};
  const Node& n = *nodes_[node];
  Place place{n.id, n.data_address, "", n.route, n.state == State::kAlive || n.state == State::kRegistering};
  for (const v1::DeviceReport& d : n.devices) {
    if (d.device() == device) place.device_uuid = d.uuid();
  }
  return place;
}

bool NodeRegistry::HasId(uint16_t node, std::string_view id) const {
  std::lock_guard lock(mu_);
  return node < nodes_.size() && nodes_[node]->id == id;
}

std::optional<uint16_t> NodeRegistry::FindNode(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

size_t NodeRegistry::alive_nodes() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& node : nodes_) n += node->state == State::kAlive ? 1 : 0;
  return n;
}

bool NodeRegistry::IsAlive(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  return it != by_id_.end() && nodes_[it->second]->state == State::kAlive;
}

void NodeRegistry::Describe(const MasterIndex& index, Clock::time_point now, v1::ClusterReply* out) const {
  std::lock_guard lock(mu_);
  for (const auto& node : nodes_) {
    if (node->state == State::kNew) continue;
    v1::NodeStatus* s = out->add_nodes();
    s->set_node_id(node->id);
    s->set_data_address(node->data_address);
    s->set_data_mode(node->data_mode);
    *s->mutable_route() = node->route;
    s->set_peer(node->peer);
    switch (node->state) {
      case State::kAlive: s->set_state("alive"); break;
      case State::kRegistering: s->set_state("registering"); break;
      default: s->set_state("dead"); break;
    }
    s->set_heartbeat_age_ms(Ms(now - node->last_message));
    s->set_session_age_ms(Ms(now - node->since));
    uint64_t objects = 0;
    for (const v1::DeviceReport& d : node->devices) {
      v1::DeviceStatus* ds = s->add_devices();
      ds->set_device(d.device());
      ds->set_uuid(d.uuid());
      ds->set_capacity_bytes(d.capacity_bytes());
      // As reported, plus what the master planned there since: the figure
      // routing goes by.
      uint64_t routed = node->routed[static_cast<size_t>(d.device())].load(std::memory_order_relaxed);
      ds->set_used_bytes(std::min(d.capacity_bytes(), d.used_bytes() + routed));
      ds->set_high_watermark(d.high_watermark());
      ds->set_low_watermark(d.low_watermark());
      ds->set_host_capacity_bytes(d.host_capacity_bytes());
      ds->set_host_used_bytes(d.host_used_bytes());
      uint64_t copies = index.copies_on(node->index, static_cast<uint8_t>(d.device()));
      ds->set_objects(copies);
      ds->set_host_objects(index.host_copies_on(node->index, static_cast<uint8_t>(d.device())));
      objects += copies;
    }
    s->set_objects(objects);
  }
}

}  // namespace nanokv::master
