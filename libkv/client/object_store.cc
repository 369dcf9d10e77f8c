// The client side of the object store (nanokv/object_store.h): its own
// connection to kvd, one request at a time, and its own map of store pages.
#include "nanokv/object_store.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "gpu/backend.h"
#include "ipc/uds/kvd_socket.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"
#include "libkv/client/object_store_impl.h"
#include "libkv/client/object_transfer.h"
#include "libkv/client/quiet_stdout.h"
#include "libkv/client/slab_puts.h"

namespace nanokv {

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
    ObjectStoreDeviceInfo device;
    device.device = d.device();
    device.store_bytes = d.store_bytes();
    device.used_bytes = d.used_bytes();
    device.objects = d.objects();
    device.evictions = d.evictions();
    device.pages = d.pages();
    device.shared_free_pages = d.shared_free_pages();
    device.host_bytes = d.host_bytes();
    device.host_used_bytes = d.host_used_bytes();
    device.host_objects = d.host_objects();
    device.demotions = d.demotions();
    device.promotions = d.promotions();
    for (const auto& o : d.owners()) device.owners.push_back({o.uid(), o.kvd_callers(), o.pages()});
    device.slab_count = d.slabs();
    for (const auto& slab : d.slab_list()) {
      device.slabs.push_back({slab.slab_id(), slab.uid(), slab.payload_bytes(), slab.unannounced_bytes(),
                              slab.header_slots(), slab.slots_taken(), slab.ttl_ms()});
    }
    info.devices.push_back(std::move(device));
  }
  return info;
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> ObjectStore::Open(const ObjectStoreOptions& options) {
  client::KeepLogsOffStdout();
  NANOKV_ASSIGN_OR_RETURN(ipc::Channel channel, options.socket_path.empty()
                                                    ? ipc::ConnectToKvdNamed(options.ipc_name)
                                                    : ipc::ConnectToKvd(options.socket_path));
  if (options.spin_us > 10'000) {
    return Status::InvalidArgument("nanokv objects: spin_us " + std::to_string(options.spin_us) +
                                   " is over 10000");
  }
  auto impl = std::make_unique<Impl>(std::move(channel), options);
  if (options.ring) impl->SetupRing();
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

ObjectStore::ObjectStore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)), slab_puts_(std::make_unique<SlabPuts>(*this, impl_->backend())) {}
ObjectStore::~ObjectStore() = default;

Status ObjectStore::UseSlabs(int device, const SlabPutOptions& options) { return slab_puts_->Use(device, options); }
Status ObjectStore::FlushSlabPuts(uint32_t timeout_ms) { return slab_puts_->Flush(timeout_ms); }
uint64_t ObjectStore::slab_grants() const { return slab_puts_->grants(); }
bool ObjectStore::SlabServes(std::string_view key, uint64_t bytes, int preferred_device) const {
  return slab_puts_->Serves(key, bytes, preferred_device);
}

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
  return ExpectAck(impl_->Call(LeaseRelease(key, lease_id)));
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
  if (plan.tier == ObjectTier::kHost) {
    // kvd's host memory, mapped read-only here: host to host.
    std::memcpy(out.data(), src, plan.bytes_total);
    return Status::OK();
  }
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

Result<std::vector<std::byte>> ObjectStore::Get(std::string_view key) {
  NANOKV_ASSIGN_OR_RETURN(LeasedPlan leased, impl_->LeaseAndLocate(key));
  std::vector<std::byte> bytes(leased.plan.bytes_total);
  Status copied = CopyOut(leased.plan, bytes);
  impl_->EndLease(key, leased.lease_id);
  if (!copied.ok()) return copied;
  return bytes;
}

Status ObjectStore::PutFromDevice(std::string_view key, const void* src, uint64_t bytes,
                                  int preferred_device, void* stream) {
  if (src == nullptr) return Status::InvalidArgument("put of " + std::string(key) + " from a null address");
  if (bytes == 0) return Status::InvalidArgument("put of " + std::string(key) + ": 0 bytes");
  if (slab_puts_->Serves(key, bytes, preferred_device)) {
    const DevicePut put{key, src, bytes};
    return slab_puts_->Put({&put, 1}, preferred_device, stream)[0];
  }
  NANOKV_ASSIGN_OR_RETURN(ObjectPlan plan, OpenForWrite(key, bytes, preferred_device));
  auto pieces = impl_->Pieces(plan);
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
  if (impl_->ReadTable() != nullptr) {
    // Read without a lease where kvd's read table vouches for the copy.
    const DeviceGet item{key, dst, capacity};
    return std::move(BatchGetToDevice({&item, 1}, stream)[0]);
  }
  // The lease keeps the object in place until the load has run.
  NANOKV_ASSIGN_OR_RETURN(LeasedPlan leased, impl_->LeaseAndLocate(key));
  Result<uint64_t> out = Status::Internal("unset");
  const ObjectPlan* plan = &leased.plan;
  if (plan->bytes_total > capacity) {
    out = Status::InvalidArgument("object " + std::string(key) + " holds " + std::to_string(plan->bytes_total) +
                                  " bytes, the destination " + std::to_string(capacity));
  } else {
    auto pieces = impl_->Pieces(*plan);
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
      out.push_back({e.key(), e.bytes_total(), e.device(), static_cast<ObjectState>(e.state()), e.epoch(), e.age_ms(),
                     e.idle_ms(), e.leases(), e.lease_ms(), static_cast<ObjectPin>(e.pin()), e.tier() == 1});
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
uint64_t ObjectStore::requests_sent() const { return impl_->requests_sent(); }

}  // namespace nanokv
