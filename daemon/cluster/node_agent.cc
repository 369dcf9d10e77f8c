#include "daemon/cluster/node_agent.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "base/clocks.h"
#include "base/host_identity.h"
#include "ipc/master/grpc_status.h"
#include "ipc/master/master_channel.h"
#include "ipc/master/master_checks.h"
#include "ipc/master/master_protocol.h"
#include "ipc/master/token.h"

namespace nanokv::kvd {
namespace v1 = master::v1;
namespace {

// A master that answers at all answers a Hello at once; Stop may wait this
// long for one that hangs.
constexpr std::chrono::milliseconds kHelloTimeout{3000};

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || !master::ValidNodeId(name)) return "node";
  return name;
}

v1::ObjectEvent::Kind WireKind(ObjectEvent::Kind kind) {
  switch (kind) {
    case ObjectEvent::Kind::kReady: return v1::ObjectEvent::READY;
    case ObjectEvent::Kind::kRemoved: return v1::ObjectEvent::REMOVED;
    case ObjectEvent::Kind::kEvicted: return v1::ObjectEvent::EVICTED;
    case ObjectEvent::Kind::kReclaimed: return v1::ObjectEvent::RECLAIMED;
    case ObjectEvent::Kind::kRevoked: return v1::ObjectEvent::REVOKED;
    // A READY of a copy the master has refreshes it (master.proto): so a
    // master of before tiers takes a move as well.
    case ObjectEvent::Kind::kMoved:
      return v1::ObjectEvent::READY;
  }
  return v1::ObjectEvent::REMOVED;
}

}  // namespace

Status NodeAgent::AdmitTerm(std::atomic<uint64_t>& highest, uint64_t term) {
  uint64_t seen = highest.load();
  while (term > seen) {
    if (highest.compare_exchange_weak(seen, term)) return Status::OK();
  }
  if (term < seen) {
    return Status::FailedPrecondition("a master of term " + std::to_string(term) + " is refused: this kvd follows term " +
                                      std::to_string(seen) + " (the master was deposed)");
  }
  return Status::OK();
}

Result<std::unique_ptr<NodeAgent>> NodeAgent::Start(ObjectIndex& store, NodeAgentOptions options) {
  std::string token;
  if (!options.link.token_file.empty()) {
    NANOKV_ASSIGN_OR_RETURN(token, master::ReadTokenFile(options.link.token_file));
  }
  NANOKV_ASSIGN_OR_RETURN(auto credentials, master::MakeChannelCredentials(options.link.tls));
  std::unique_ptr<NodeAgent> agent(new NodeAgent(store, std::move(options), std::move(token), credentials));
  store.SetEventListener([a = agent.get()](const ObjectEvent& e) { a->OnEvent(e); });
  agent->sessions_ = std::thread([a = agent.get()] { a->RunSessions(); });
  agent->beats_ = std::thread([a = agent.get()] { a->RunBeats(); });
  return agent;
}

NodeAgent::NodeAgent(ObjectIndex& store, NodeAgentOptions options, std::string token,
                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : store_(store),
      options_(std::move(options)),
      node_id_(options_.link.node_id.empty() ? HostName() : options_.link.node_id),
      token_(std::move(token)),
      credentials_(std::move(credentials)) {}

NodeAgent::~NodeAgent() { Stop(); }

void NodeAgent::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  wake_.notify_all();
  if (sessions_.joinable()) sessions_.join();
  if (beats_.joinable()) beats_.join();
  store_.SetEventListener(nullptr);
}

bool NodeAgent::Pause(std::chrono::milliseconds delay) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, delay, [&] { return stopping_; });
  return !stopping_;
}

void NodeAgent::OnEvent(const ObjectEvent& event) {
  {
    std::lock_guard lock(events_mu_);
    if (!collecting_) return;  // not registered: the next snapshot says it all
    v1::ObjectEvent& e = events_.emplace_back();
    e.set_kind(WireKind(event.kind));
    e.set_key(std::string(event.key));
    e.set_device(event.device);
    e.set_epoch(event.epoch);
    e.set_bytes_total(event.bytes_total);
    e.set_tier(event.tier == Tier::kHost ? v1::HOST_TIER : v1::GPU_STORE);
  }
  std::lock_guard lock(mu_);  // so the beat thread cannot miss the wake-up
  wake_.notify_all();
}

void NodeAgent::FillDevices(google::protobuf::RepeatedPtrField<v1::DeviceReport>* out) const {
  for (const StoreDeviceStats& s : store_.Stats()) {
    v1::DeviceReport* d = out->Add();
    d->set_device(s.device);
    if (static_cast<size_t>(s.device) < options_.device_uuids.size()) {
      d->set_uuid(options_.device_uuids[static_cast<size_t>(s.device)]);
    }
    d->set_capacity_bytes(s.payload_capacity);
    d->set_used_bytes(std::min(s.payload_used, s.payload_capacity));
    d->set_host_capacity_bytes(s.host_capacity);
    d->set_host_used_bytes(std::min(s.host_used, s.host_capacity));
    d->set_high_watermark(store_.config().high_watermark);
    d->set_low_watermark(store_.config().low_watermark);
  }
}

v1::RegisterNode NodeAgent::RegisterMessage() const {
  v1::RegisterNode r;
  r.set_node_id(node_id_);
  r.set_data_address(options_.link.data_address);
  r.set_data_mode(options_.data_mode);
  r.mutable_route()->set_host_id(HostIdentity(options_.link.host_id));
  // Absolute, as the master's check wants (a run_dir may be relative); a
  // path too long for a socket address stays unsaid: no route then.
  std::error_code error;
  std::string socket = std::filesystem::absolute(options_.kvd_socket, error).string();
  if (!error && socket.size() <= master::kMaxSocketPathBytes) r.mutable_route()->set_kvd_socket(socket);
  r.set_highest_term(highest_term_.load());
  FillDevices(r.mutable_devices());
  return r;
}

bool NodeAgent::Write(const v1::NodeMessage& message) {
  return stream_ != nullptr && stream_->Write(message);
}

Status NodeAgent::Register(Stream& stream, const std::string& address) {
  v1::NodeMessage hello;
  *hello.mutable_register_() = RegisterMessage();
  if (!stream.Write(hello)) return Status::Unavailable("master " + address + " took no registration");
  v1::MasterMessage welcome;
  if (!stream.Read(&welcome)) return Status::Unavailable("master " + address + " ended the session");
  NANOKV_RETURN_IF_ERROR(master::CheckMasterMessage(welcome));
  if (!welcome.has_welcome()) return Status::ProtocolError("master " + address + " did not answer with a welcome");
  NANOKV_RETURN_IF_ERROR(AdmitTerm(highest_term_, welcome.term()));
  {
    std::lock_guard lock(mu_);
    heartbeat_ = std::chrono::milliseconds(welcome.welcome().heartbeat_ms());
  }
  // The snapshot: events from here on are queued and follow it, so nothing
  // that happens while it is sent is lost (a change that makes it into the
  // list too is told twice; the master takes it once).
  {
    std::lock_guard lock(events_mu_);
    collecting_ = true;
    events_.clear();
  }
  std::vector<ObjectEntry> objects = store_.List(SteadyNowNs());
  size_t ready = 0;
  v1::NodeMessage batch;
  for (size_t i = 0;; ++i) {
    bool last = i == objects.size();
    if (!last && objects[i].state == ObjectState::kReady) {
      v1::ObjectEvent* e = batch.mutable_events()->add_events();
      e->set_kind(v1::ObjectEvent::READY);
      e->set_key(objects[i].key);
      e->set_device(objects[i].device);
      e->set_epoch(objects[i].epoch);
      e->set_tier(objects[i].host_tier ? v1::HOST_TIER : v1::GPU_STORE);
      e->set_bytes_total(objects[i].bytes_total);
      ++ready;
    }
    if (last) batch.mutable_events()->set_snapshot_done(true);
    if (last || static_cast<size_t>(batch.events().events_size()) == master::kMaxEventsPerBatch) {
      if (!stream.Write(batch)) return Status::Unavailable("master " + address + " went away during the snapshot");
      batch.Clear();
    }
    if (last) break;
  }
  spdlog::info("kvd: node {} registered with master {} at {} (term {}): {} object(s)", node_id_,
               welcome.welcome().master_id(), address, welcome.term(), ready);
  return Status::OK();
}

Status NodeAgent::Session(const std::string& address, std::string* leader_hint) {
  auto channel = master::MakeChannel(address, credentials_, options_.link.retry_interval);
  auto stub = v1::Master::NewStub(channel);
  // The master proves it holds the token before it hears anything of ours:
  // our objects, our token's credential, and above all before we take its
  // term (an impostor's high term would lock the real master out).
  std::string credential;
  NANOKV_ASSIGN_OR_RETURN(credential, master::Authenticate(channel, address, token_, kHelloTimeout));
  grpc::ClientContext context;
  master::PrepareCall(&context, credential, std::chrono::milliseconds(0));
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::Unavailable("stopping");
    context_ = &context;
  }
  std::unique_ptr<Stream> stream = stub->NodeSession(&context);
  Status registered;
  {
    std::lock_guard lock(write_mu_);
    registered = Register(*stream, address);
    if (registered.ok()) stream_ = stream.get();
  }
  Status fault;
  v1::MasterMessage in;
  while (registered.ok() && stream->Read(&in)) {
    fault = master::CheckMasterMessage(in);
    if (fault.ok() && !in.has_instruction()) fault = Status::ProtocolError("a second welcome");
    if (!fault.ok()) break;
    v1::NodeMessage out;
    Status term = AdmitTerm(highest_term_, in.term());
    if (term.ok()) {
      *out.mutable_reply() = Execute(in.instruction());
    } else {
      // Every order refused: a deposed master routes nothing here.
      spdlog::warn("kvd: {}", term.ToString());
      v1::InstructionReply* reply = out.mutable_reply();
      reply->set_request_id(in.instruction().request_id());
      const auto& i = in.instruction();
      int orders = i.has_open() ? i.open().orders_size()
                   : i.has_commit() ? i.commit().orders_size()
                   : i.has_revoke() ? i.revoke().orders_size() : i.remove().orders_size();
      for (int k = 0; k < orders; ++k) master::ToItem(term, reply->add_statuses());
    }
    std::lock_guard lock(write_mu_);
    if (!Write(out)) break;
  }
  {
    std::lock_guard lock(write_mu_);
    stream_ = nullptr;
  }
  {
    std::lock_guard lock(events_mu_);
    collecting_ = false;
    events_.clear();
  }
  // Ended by us (a refusal, a fault): cancel. Ended by the master: Finish
  // brings its reason (a token refused, not the leader).
  const bool ours = !fault.ok() || (!registered.ok() && registered.code() != Code::kUnavailable);
  if (ours) context.TryCancel();
  grpc::Status finished = stream->Finish();
  {
    std::lock_guard lock(mu_);
    context_ = nullptr;
  }
  const auto& trailers = context.GetServerTrailingMetadata();
  if (auto hint = trailers.find(master::kLeaderKey); hint != trailers.end() && hint->second.size() > 0) {
    *leader_hint = std::string(hint->second.data(), std::min<size_t>(hint->second.size(), master::kMaxAddressBytes));
  }
  if (!fault.ok()) return fault;
  // Our own refusal (an older term, a malformed welcome) says more than
  // the CANCELLED it ended with; a session the master ended, the master's.
  if (!registered.ok() && (registered.code() != Code::kUnavailable || finished.ok())) return registered;
  Status why = master::FromGrpcStatus(finished, "master " + address);
  return why.ok() ? (registered.ok() ? Status::Unavailable("master " + address + " ended the session") : registered)
                  : why;
}

void NodeAgent::RunSessions() {
  const auto& addresses = options_.link.addresses;
  size_t next = 0;
  std::string hint;
  std::string last_error;
  while (Pause(std::chrono::milliseconds(0))) {
    std::string address = !hint.empty() ? hint : addresses[next % addresses.size()];
    hint.clear();
    Status why = Session(address, &hint);
    if (!Pause(std::chrono::milliseconds(0))) break;
    std::string text = why.ToString();
    if (text != last_error) {
      spdlog::warn("kvd: node {}: no session with the master ({}); serving on, trying again every {}ms", node_id_,
                   text, options_.link.retry_interval.count());
      last_error = text;
    }
    if (hint.empty()) ++next;
    if (!Pause(options_.link.retry_interval)) break;
  }
}

void NodeAgent::RunBeats() {
  auto next_beat = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_until(lock, next_beat, [&] {
        if (stopping_) return true;
        std::lock_guard events(events_mu_);
        return !events_.empty();
      });
      if (stopping_) return;
    }
    std::vector<v1::ObjectEvent> events;
    {
      std::lock_guard lock(events_mu_);
      events.swap(events_);
    }
    const auto now = std::chrono::steady_clock::now();
    const bool beat = now >= next_beat;
    std::lock_guard lock(write_mu_);
    if (stream_ == nullptr) {
      next_beat = now + std::chrono::milliseconds(100);
      continue;
    }
    for (size_t i = 0; i < events.size();) {
      v1::NodeMessage batch;
      for (; i < events.size() && static_cast<size_t>(batch.events().events_size()) < master::kMaxEventsPerBatch; ++i) {
        *batch.mutable_events()->add_events() = std::move(events[i]);
      }
      if (!Write(batch)) break;
    }
    if (beat) {
      v1::NodeMessage heartbeat;
      FillDevices(heartbeat.mutable_heartbeat()->mutable_devices());
      Write(heartbeat);
      std::lock_guard interval(mu_);
      next_beat = now + heartbeat_;
    }
  }
}

}  // namespace nanokv::kvd
