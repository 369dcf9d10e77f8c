// The client side of the object store (nanokv/object_store.h): its own
// connection to kvd, one request at a time, and its own map of store pages.
#include "nanokv/object_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "base/naming.h"
#include "ipc/rpc/call.h"
#include "ipc/uds/channel.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/uds/kvd_socket.h"
#include "ipc/wire/codec.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"
#include "libkv/client/object_mappings.h"
#include "libkv/client/object_transfer.h"
#include "gpu/backend.h"

namespace nanokv {

class ObjectStore::Impl {
 public:
  // The backend comes once kvd said which (SetBackend), before any map.
  Impl(ipc::Channel channel, const ObjectStoreOptions& options)
      : channel_(std::move(channel)),
        timeout_ms_(options.request_timeout_ms),
        spin_us_(options.spin_us),
        defer_lease_release_(options.defer_lease_release),
        access_devices_(options.access_devices) {}

  // The mappings go before the backend they were made with. A kept lease
  // (defer_lease_release) ends with lease_ttl: no request here, which a
  // hung kvd would make a destructor wait on.
  ~Impl() { mappings_.reset(); }

  // Sends `request` and waits for its reply; an Error reply is its Status.
  // The reply's fds are appended to *fds (nullptr: closed).
  Result<wire::Message> Call(wire::Message request, std::vector<int>* fds = nullptr) {
    std::lock_guard lock(call_mu_);
    SettleKeptLeaseLocked(request);
    return CallLocked(std::move(request), fds);
  }

  // A get's lease is done: released now, or with this store's next request
  // (defer_lease_release).
  void EndLease(std::string_view key, uint64_t lease_id) {
    std::lock_guard lock(call_mu_);
    kept_lease_ = {std::string(key), lease_id};
    if (defer_lease_release_) return;
    wire::Message none;
    SettleKeptLeaseLocked(none);
  }

  // A plan being written (WRITING: from an open) points into the write
  // range, read-write while the plan is open here; any other (READY: from a
  // locate) into the read range, read-only (client::ObjectMappings).
  // `begin`: the first pointer of a plan being written also writes its
  // header, WRITING at the plan's epoch (kvd writes none: issue 15), unless
  // a kernel is about to (PutFromDevice).
  Result<void*> Pointer(const ObjectPlan& plan, bool header, bool begin = true) {
    std::lock_guard lock(call_mu_);
    NANOKV_ASSIGN_OR_RETURN(uintptr_t base, MapLocked(plan));
    if (begin && plan.state == ObjectState::kWriting) {
      auto* at = reinterpret_cast<ObjectHeader*>(base + plan.header_offset);
      auto [it, fresh] = begun_.emplace(std::make_pair(plan.key, plan.epoch), at);
      if (fresh) {
        const auto now = std::chrono::steady_clock::now().time_since_epoch();
        Status begun = client::BeginByCopy(*backend_, at, WritingHeaderOf(plan, static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now).count())));
        if (!begun.ok()) {
          begun_.erase(it);
          return begun;
        }
      }
    }
    return reinterpret_cast<void*>(base + (header ? plan.header_offset : plan.payload_offset));
  }

  // READY into the header of a plan begun here (a copy after the caller's
  // payload writes); nothing for one this process never wrote.
  Status Publish(std::string_view key, uint32_t epoch) {
    std::lock_guard lock(call_mu_);
    auto it = begun_.find(std::make_pair(std::string(key), epoch));
    if (it == begun_.end()) return Status::OK();
    return client::PublishByCopy(*backend_, it->second);
  }

  // Committed or revoked: the plan's pages lose write access here.
  void ClosePlan(std::string_view key, uint32_t epoch) {
    std::lock_guard lock(call_mu_);
    begun_.erase(std::make_pair(std::string(key), epoch));
    mappings_->ClosePlan(key, epoch);
  }

 private:
  // The lease a get kept goes out with `request` when that is another
  // lease's acquire (one request for both), else on its own first. A
  // failed release is only logged: the lease ends with lease_ttl anyway.
  void SettleKeptLeaseLocked(wire::Message& request) {
    if (kept_lease_.second == 0) return;
    auto [key, id] = std::move(kept_lease_);
    kept_lease_ = {};
    if (request.has_object_lease() && !request.object_lease().release()) {
      request.mutable_object_lease()->set_release_key(key);
      request.mutable_object_lease()->set_release_lease_id(id);
      return;
    }
    wire::Message release;
    release.mutable_object_lease()->set_key(key);
    release.mutable_object_lease()->set_release(true);
    release.mutable_object_lease()->set_lease_id(id);
    auto released = CallLocked(std::move(release), nullptr);
    if (!released.ok()) spdlog::warn("nanokv objects: lease release: {}", released.status().ToString());
  }

  Result<uintptr_t> MapLocked(const ObjectPlan& plan) {
    NoteDeviceLocked(plan.device, plan.device_uuid);  // a plan from elsewhere (the master) carries it too
    NANOKV_ASSIGN_OR_RETURN(int local_device, LocalDeviceLocked(plan.device));
    auto fetch = [this](int device, const std::vector<uint32_t>& ids, bool write) -> Result<std::vector<int>> {
      wire::Message request;
      wire::DevicePages* r = request.mutable_object_pages();
      r->set_device(device);
      r->set_write(write);
      for (uint32_t id : ids) r->add_page_ids(id);
      std::vector<int> fds;
      NANOKV_RETURN_IF_ERROR(CallLocked(std::move(request), &fds).status());
      return fds;
    };
    return mappings_->Map(plan, local_device, fetch);
  }

 public:

  gpu::Backend& backend() { return *backend_; }
  void SetBackend(std::unique_ptr<gpu::Backend> backend) {
    backend_ = std::move(backend);
    mappings_ = std::make_unique<client::ObjectMappings>(*backend_, access_devices_);
  }

  // Notes the uuid kvd gave with a plan of its device `device`.
  void NoteDevice(int device, const std::string& uuid) {
    std::lock_guard lock(call_mu_);
    NoteDeviceLocked(device, uuid);
  }
  void NoteDeviceLocked(int device, const std::string& uuid) {
    if (uuid.empty() || uuids_[device] == uuid) return;
    uuids_[device] = uuid;
    local_.erase(device);  // a kvd restarted on other devices: match again
  }

  // This process's ordinal of kvd's device `device`, by the uuid of its plans.
  Result<int> LocalDevice(int device) {
    std::lock_guard lock(call_mu_);
    return LocalDeviceLocked(device);
  }

  // The devices a page of `device` (a local ordinal) is given access to.
  std::vector<int> AccessOf(int device) const { return mappings_->AccessOf(device); }

  size_t mapped_pages() const {
    std::lock_guard lock(call_mu_);
    return mappings_->mapped_pages();
  }

 private:
  Result<wire::Message> CallLocked(wire::Message request, std::vector<int>* fds) {
    if (!channel_.valid()) return Status::Unavailable("nanokv objects: kvd went away");
    ipc::ChannelTransport transport(channel_);
    ipc::CallOptions call;
    call.peer = "nanokv objects: kvd";
    if (timeout_ms_ != 0) call.timeout = std::chrono::milliseconds(timeout_ms_);
    // A reply within spin_us skips the wake-up of a blocked poll
    // (BENCHMARKS.md: plan round trip).
    call.spin = std::chrono::microseconds(spin_us_);
    call.reply_fds = fds != nullptr ? ipc::ReplyFds::kKeep : ipc::ReplyFds::kClose;
    // One request at a time (call_mu_): a reply to another id answers
    // nothing here, and is dropped.
    call.stray_replies = ipc::StrayReplies::kSkip;
    call.on_notice = [this](const wire::Message& notice) {
      if (!notice.has_shutdown()) return Status::OK();  // not this connection's business
      channel_.Close();
      return Status::Unavailable("nanokv objects: kvd is shutting down");
    };
    NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply,
                            ipc::Call(transport, next_rid_++, std::move(request), {}, call));
    if (fds != nullptr) fds->insert(fds->end(), reply.fds.begin(), reply.fds.end());
    return std::move(reply.message);
  }

  // REQUIRES: call_mu_ held.
  Result<int> LocalDeviceLocked(int device) {
    if (auto it = local_.find(device); it != local_.end()) return it->second;
    auto known = uuids_.find(device);
    auto local = gpu::LocalOrdinal(*backend_, device, known == uuids_.end() ? "" : known->second);
    if (!local.ok()) return Status(local.status().code(), "nanokv objects: " + std::string(local.status().message()));
    local_[device] = *local;
    return *local;
  }

  mutable std::mutex call_mu_;
  ipc::Channel channel_;
  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<client::ObjectMappings> mappings_;  // GUARDED_BY(call_mu_); made with the backend
  uint32_t timeout_ms_;
  uint32_t spin_us_;
  bool defer_lease_release_;
  std::pair<std::string, uint64_t> kept_lease_;  // GUARDED_BY(call_mu_); id 0: none
  std::vector<int> access_devices_;  // besides each page's own device
  uint64_t next_rid_ = 1;
  // Plans being written whose header this process wrote, by (key, epoch):
  // where, for the READY a Commit stores. GUARDED_BY(call_mu_).
  std::map<std::pair<std::string, uint32_t>, ObjectHeader*> begun_;
  std::map<int, std::string> uuids_;  // kvd's ordinal -> uuid, from its plans
  std::map<int, int> local_;          // kvd's ordinal -> this process's, once matched
};

namespace {

// The backend to map kvd's pages with: the one asked, else $NANOKV_BACKEND,
// else kvd's. A host backend simulates every device kvd serves (ImportPage
// checks the ordinal), whatever NANOKV_HOST_DEVICES says.
Result<std::unique_ptr<gpu::Backend>> OpenStoreBackend(const ObjectStoreOptions& options,
                                                       const ObjectStoreInfo& info) {
  std::string name = options.backend;
  if (name.empty()) {
    const char* env = std::getenv("NANOKV_BACKEND");
    name = env != nullptr && *env != '\0' ? env : info.backend;
  }
  if (name != "host") return gpu::OpenBackend(name);
  gpu::HostBackendOptions host = gpu::HostOptionsFromEnvironment();
  for (const ObjectStoreDeviceInfo& d : info.devices) host.devices = std::max(host.devices, d.device + 1);
  return gpu::MakeHostBackend(host);
}

Result<ObjectStoreInfo> FromWireInfo(const wire::Message& reply) {
  if (reply.body_case() != wire::Message::kObjectInfoReply) return Status::ProtocolError("info: bad reply");
  ObjectStoreInfo info;
  info.backend = reply.object_info_reply().backend();
  for (const auto& d : reply.object_info_reply().devices()) {
    info.devices.push_back({d.device(), d.store_bytes(), d.used_bytes(), d.objects(), d.evictions(), d.pages()});
  }
  return info;
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> ObjectStore::Open(const ObjectStoreOptions& options) {
  NANOKV_ASSIGN_OR_RETURN(ipc::Channel channel, ipc::ConnectToKvdNamed(options.ipc_name));
  if (options.spin_us > 10'000) {
    return Status::InvalidArgument("nanokv objects: spin_us " + std::to_string(options.spin_us) +
                                   " is over 10000");
  }
  auto impl = std::make_unique<Impl>(std::move(channel), options);
  wire::Message ask;
  ask.mutable_object_info();
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl->Call(std::move(ask)));
  NANOKV_ASSIGN_OR_RETURN(ObjectStoreInfo info, FromWireInfo(reply));
  NANOKV_ASSIGN_OR_RETURN(auto backend, OpenStoreBackend(options, info));
  for (int device : options.access_devices) {
    if (device < 0 || device >= backend->device_count()) {
      return Status::InvalidArgument("nanokv objects: access device " + std::to_string(device) +
                                     " is not one of the backend's " +
                                     std::to_string(backend->device_count()));
    }
  }
  impl->SetBackend(std::move(backend));
  return std::unique_ptr<ObjectStore>(new ObjectStore(std::move(impl)));
}

ObjectStore::ObjectStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ObjectStore::~ObjectStore() = default;

Result<ObjectPlan> ObjectStore::OpenForWrite(std::string_view key, uint64_t bytes_total,
                                             int preferred_device) {
  wire::Message m;
  auto* r = m.mutable_object_open();
  r->set_key(std::string(key));
  r->set_bytes_total(bytes_total);
  r->set_preferred_device(preferred_device);
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl_->Call(std::move(m)));
  if (reply.body_case() != wire::Message::kObjectPlan) return Status::ProtocolError("open: not a plan");
  impl_->NoteDevice(reply.object_plan().device(), reply.object_plan().device_uuid());
  return wire::FromWirePlan(key, reply.object_plan());
}

namespace {
Status ExpectAck(const Result<wire::Message>& reply) {
  if (!reply.ok()) return reply.status();
  if (reply->body_case() != wire::Message::kObjectAck) return Status::ProtocolError("not an object ack");
  return Status::OK();
}
}  // namespace

Status ObjectStore::Commit(std::string_view key, uint32_t epoch, bool published_on_device) {
  // READY is this process's to store, after its payload writes: kvd stores
  // nothing on the device (a copy of kvd's costs every engine on the GPU a
  // context switch). Failed: the plan stays open (Revoke it, or retry).
  if (!published_on_device) NANOKV_RETURN_IF_ERROR(impl_->Publish(key, epoch));
  wire::Message m;
  m.mutable_object_commit()->set_key(std::string(key));
  m.mutable_object_commit()->set_epoch(epoch);
  m.mutable_object_commit()->set_published(published_on_device);
  Status committed = ExpectAck(impl_->Call(std::move(m)));
  impl_->ClosePlan(key, epoch);  // READY or dead: either way not to be written again
  return committed;
}

Status ObjectStore::Revoke(std::string_view key, uint32_t epoch) {
  wire::Message m;
  m.mutable_object_revoke()->set_key(std::string(key));
  m.mutable_object_revoke()->set_epoch(epoch);
  Status revoked = ExpectAck(impl_->Call(std::move(m)));
  impl_->ClosePlan(key, epoch);
  return revoked;
}

Status ObjectStore::Remove(std::string_view key) {
  wire::Message m;
  m.mutable_object_remove()->set_key(std::string(key));
  return ExpectAck(impl_->Call(std::move(m)));
}

Status ObjectStore::Pin(std::string_view key, ObjectPin pin) {
  wire::Message m;
  m.mutable_object_pin()->set_key(std::string(key));
  m.mutable_object_pin()->set_pin(static_cast<uint32_t>(pin));
  return ExpectAck(impl_->Call(std::move(m)));
}

Result<ObjectPlan> ObjectStore::GetLocation(std::string_view key) {
  wire::Message m;
  m.mutable_object_locate()->set_key(std::string(key));
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl_->Call(std::move(m)));
  if (reply.body_case() != wire::Message::kObjectPlan) return Status::ProtocolError("locate: not a plan");
  impl_->NoteDevice(reply.object_plan().device(), reply.object_plan().device_uuid());
  return wire::FromWirePlan(key, reply.object_plan());
}

Result<ObjectLease> ObjectStore::Lease(std::string_view key) {
  wire::Message m;
  m.mutable_object_lease()->set_key(std::string(key));
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl_->Call(std::move(m)));
  if (reply.body_case() != wire::Message::kObjectLeaseReply) return Status::ProtocolError("lease: bad reply");
  return ObjectLease{reply.object_lease_reply().lease_id(), reply.object_lease_reply().ttl_ms()};
}

Status ObjectStore::ReleaseLease(std::string_view key, uint64_t lease_id) {
  wire::Message m;
  m.mutable_object_lease()->set_key(std::string(key));
  m.mutable_object_lease()->set_release(true);
  m.mutable_object_lease()->set_lease_id(lease_id);
  return ExpectAck(impl_->Call(std::move(m)));
}

Result<void*> ObjectStore::PayloadPointer(const ObjectPlan& plan) { return impl_->Pointer(plan, false); }
Status ObjectStore::PublishReady(const ObjectPlan& plan) {
  NANOKV_RETURN_IF_ERROR(impl_->Pointer(plan, true).status());  // begins it, if not yet
  return impl_->Publish(plan.key, plan.epoch);
}
void ObjectStore::ClosePlan(const ObjectPlan& plan) { impl_->ClosePlan(plan.key, plan.epoch); }
Result<void*> ObjectStore::HeaderPointer(const ObjectPlan& plan) { return impl_->Pointer(plan, true); }

Status ObjectStore::CopyIn(const ObjectPlan& plan, std::span<const std::byte> bytes) {
  if (bytes.size() != plan.bytes_total) {
    return Status::InvalidArgument("copy into " + plan.key + ": " + std::to_string(bytes.size()) +
                                   " bytes for an object of " + std::to_string(plan.bytes_total));
  }
  NANOKV_ASSIGN_OR_RETURN(void* dst, PayloadPointer(plan));
  return impl_->backend().Copy(dst, bytes.data(), bytes.size(), gpu::CopyKind::kHostToDevice);
}

Status ObjectStore::CopyOut(const ObjectPlan& plan, std::span<std::byte> out) {
  if (out.size() < plan.bytes_total) {
    return Status::InvalidArgument("copy out of " + plan.key + ": " + std::to_string(out.size()) +
                                   " bytes of room for an object of " + std::to_string(plan.bytes_total));
  }
  NANOKV_ASSIGN_OR_RETURN(void* src, PayloadPointer(plan));
  return impl_->backend().Copy(out.data(), src, plan.bytes_total, gpu::CopyKind::kDeviceToHost);
}

Status ObjectStore::Put(std::string_view key, std::span<const std::byte> bytes, int preferred_device) {
  NANOKV_ASSIGN_OR_RETURN(ObjectPlan plan, OpenForWrite(key, bytes.size(), preferred_device));
  Status copied = CopyIn(plan, bytes);
  if (!copied.ok()) {
    Status revoked = Revoke(key, plan.epoch);
    if (!revoked.ok()) spdlog::warn("nanokv objects: revoke after a failed put: {}", revoked.ToString());
    return copied;
  }
  return Commit(key, plan.epoch);
}

namespace {
// A get's one request: a lease (which keeps the object in place while its
// bytes are copied out) and the object's location in its reply.
struct LeasedPlan {
  uint64_t lease_id = 0;
  ObjectPlan plan;
};
Result<LeasedPlan> LeaseAndLocate(ObjectStore::Impl& impl, std::string_view key) {
  wire::Message m;
  m.mutable_object_lease()->set_key(std::string(key));
  m.mutable_object_lease()->set_locate(true);
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl.Call(std::move(m)));
  if (reply.body_case() != wire::Message::kObjectLeaseReply || !reply.object_lease_reply().has_plan()) {
    return Status::ProtocolError("lease: no location in the reply");
  }
  const wire::ObjectPlan& plan = reply.object_lease_reply().plan();
  impl.NoteDevice(plan.device(), plan.device_uuid());
  return LeasedPlan{reply.object_lease_reply().lease_id(), wire::FromWirePlan(key, plan)};
}
}  // namespace

Result<std::vector<std::byte>> ObjectStore::Get(std::string_view key) {
  NANOKV_ASSIGN_OR_RETURN(LeasedPlan leased, LeaseAndLocate(*impl_, key));
  std::vector<std::byte> bytes(leased.plan.bytes_total);
  Status copied = CopyOut(leased.plan, bytes);
  impl_->EndLease(key, leased.lease_id);
  if (!copied.ok()) return copied;
  return bytes;
}

namespace {
// The plan's pages mapped here, as the transfers see them: `local_device`
// and `access` are this process's ordinals.
Result<client::ObjectPieces> PiecesOf(ObjectStore::Impl& impl, const ObjectPlan& plan, int local_device,
                                      std::vector<int> access) {
  client::ObjectPieces pieces;
  pieces.device = local_device;
  pieces.bytes = plan.bytes_total;
  pieces.epoch = plan.epoch;
  const auto now = std::chrono::steady_clock::now().time_since_epoch();
  pieces.writing = WritingHeaderOf(plan, static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
  pieces.access = std::move(access);
  // The transfer writes the header itself (client::StoreObject).
  NANOKV_ASSIGN_OR_RETURN(pieces.payload, impl.Pointer(plan, false, /*begin=*/false));
  NANOKV_ASSIGN_OR_RETURN(void* header, impl.Pointer(plan, true, /*begin=*/false));
  pieces.header = static_cast<ObjectHeader*>(header);
  // One segment per span, as a producer that maps pages one by one sees them.
  auto* at = static_cast<std::byte*>(pieces.payload);
  for (const ObjectSpan& span : plan.spans) {
    pieces.segments.push_back({at, span.length});
    at += span.length;
  }
  return pieces;
}
}  // namespace

Status ObjectStore::PutFromDevice(std::string_view key, const void* src, uint64_t bytes,
                                  int preferred_device, void* stream) {
  if (src == nullptr) return Status::InvalidArgument("put of " + std::string(key) + " from a null address");
  if (bytes == 0) return Status::InvalidArgument("put of " + std::string(key) + ": 0 bytes");
  NANOKV_ASSIGN_OR_RETURN(ObjectPlan plan, OpenForWrite(key, bytes, preferred_device));
  auto local = impl_->LocalDevice(plan.device);
  auto pieces = local.ok() ? PiecesOf(*impl_, plan, *local, impl_->AccessOf(*local))
                           : Result<client::ObjectPieces>(local.status());
  Result<bool> published = pieces.ok() ? client::StoreObject(impl_->backend(), src, *pieces, stream)
                                       : Result<bool>(pieces.status());
  if (!published.ok()) {
    Status revoked = Revoke(key, plan.epoch);
    if (!revoked.ok()) spdlog::warn("nanokv objects: revoke after a failed put: {}", revoked.ToString());
    return published.status();
  }
  return Commit(key, plan.epoch, *published);
}

Result<uint64_t> ObjectStore::GetToDevice(std::string_view key, void* dst, uint64_t capacity, void* stream) {
  if (dst == nullptr) return Status::InvalidArgument("get of " + std::string(key) + " to a null address");
  // The lease keeps the object in place until the load has run.
  NANOKV_ASSIGN_OR_RETURN(LeasedPlan leased, LeaseAndLocate(*impl_, key));
  Result<uint64_t> out = Status::Internal("unset");
  const ObjectPlan* plan = &leased.plan;
  if (plan->bytes_total > capacity) {
    out = Status::InvalidArgument("object " + std::string(key) + " holds " + std::to_string(plan->bytes_total) +
                                  " bytes, the destination " + std::to_string(capacity));
  } else {
    auto local = impl_->LocalDevice(plan->device);
    auto pieces = local.ok() ? PiecesOf(*impl_, *plan, *local, impl_->AccessOf(*local))
                             : Result<client::ObjectPieces>(local.status());
    Status loaded = pieces.ok() ? client::LoadObject(impl_->backend(), dst, *pieces, stream) : pieces.status();
    out = loaded.ok() ? Result<uint64_t>(plan->bytes_total) : Result<uint64_t>(loaded);
  }
  impl_->EndLease(key, leased.lease_id);
  return out;
}

bool ObjectStore::device_transfers_use_kernels() const {
  return client::TransfersUseKernels(impl_->backend());
}

Result<std::vector<ObjectEntry>> ObjectStore::List() {
  std::vector<ObjectEntry> out;
  for (;;) {
    wire::Message m;
    m.mutable_object_list()->set_offset(static_cast<uint32_t>(out.size()));
    NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl_->Call(std::move(m)));
    if (reply.body_case() != wire::Message::kObjectListReply) return Status::ProtocolError("list: bad reply");
    const auto& r = reply.object_list_reply();
    for (const auto& e : r.objects()) {
      out.push_back({e.key(), e.bytes_total(), e.device(), static_cast<ObjectState>(e.state()),
                     e.epoch(), e.age_ms(), e.idle_ms(), e.leases(), e.lease_ms(),
                     static_cast<ObjectPin>(e.pin())});
    }
    // Objects come and go between pages: stop at the end or an empty page.
    if (r.objects_size() == 0 || out.size() >= r.total()) return out;
  }
}

Result<uint64_t> ObjectStore::Evict(int device, uint64_t bytes) {
  wire::Message m;
  m.mutable_object_evict()->set_device(device);
  m.mutable_object_evict()->set_bytes(bytes);
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl_->Call(std::move(m)));
  if (reply.body_case() != wire::Message::kObjectEvictReply) return Status::ProtocolError("evict: bad reply");
  return reply.object_evict_reply().freed_bytes();
}

Result<ObjectStoreInfo> ObjectStore::Info() {
  wire::Message m;
  m.mutable_object_info();
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, impl_->Call(std::move(m)));
  return FromWireInfo(reply);
}

size_t ObjectStore::mapped_pages() const { return impl_->mapped_pages(); }

}  // namespace nanokv
