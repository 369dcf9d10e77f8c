// ObjectStore's v2 slabs (nanokv/object_store.h, ObjectSlab): one request
// for the grant, whose reply carries its announce ring's memfd (mapped
// shared); the slab's pages are mapped in the store's write range, where
// plans' are (so the payload is contiguous at its store offset), asking kvd
// only for the fds of pages not mapped here yet. Puts in it ask kvd
// nothing. kvd's reply is checked by the codec (ipc/wire/object_codec.cc)
// and the ring's words here before any is used.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#define XXH_INLINE_ALL  // one function, compiled in: libkv's users inherit no xxhash
#include <xxhash.h>

#include "libkv/client/object_store_impl.h"
#include "nanokv/object_store.h"

namespace nanokv {

struct ObjectSlab::Holder {
  std::shared_ptr<ObjectStore::Impl> store;
  wire::ObjectSlabReply grant;
  int local_device = 0;
  bool released = false;
  device::SlabCursor cursor{};
  bool mapping = false;  // Impl::MapSlab was called: CloseSlab undoes what it claimed
  uintptr_t base = 0;    // the store's write range here (Impl::MapSlab)
  void* ring = nullptr;
  size_t ring_bytes = 0;

  ~Holder() {
    if (store == nullptr) return;
    if (mapping) store->CloseSlab(grant);
    if (ring != nullptr) munmap(ring, ring_bytes);
  }

  // The ring kvd made: its size, magic, version and record count checked
  // before the producer writes a record (fd closed here).
  Status MapRing(int fd) {
    struct stat st {};
    const size_t want =
        sizeof(device::AnnounceRingHeader) + size_t{grant.ring_records()} * sizeof(device::AnnounceRecord);
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != want) {
      close(fd);
      return Status::ProtocolError("nanokv objects: the slab's announce ring is not " + std::to_string(want) +
                                   " bytes");
    }
    void* at = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (at == MAP_FAILED) return Status::FromErrno("mmap", errno, "the slab's announce ring");
    ring = at;
    ring_bytes = want;
    const auto* header = static_cast<const device::AnnounceRingHeader*>(at);
    if (header->magic != device::kAnnounceMagic || header->version != device::kAnnounceVersion ||
        header->records != grant.ring_records()) {
      return Status::ProtocolError("nanokv objects: the slab's announce ring has another magic, version or size");
    }
    return Status::OK();
  }
};

Result<std::unique_ptr<ObjectSlab>> ObjectStore::AcquireSlab(int device, uint64_t payload_bytes, uint32_t header_slots,
                                                             uint32_t ring_records) {
  wire::Message request;
  wire::ObjectSlabRequest* r = request.mutable_object_slab();
  r->set_device(device);
  r->set_payload_bytes(payload_bytes);
  r->set_header_slots(header_slots);
  r->set_ring_records(ring_records);
  std::vector<int> fds;
  auto reply = impl_->Call(std::move(request), &fds);
  auto holder = std::make_unique<ObjectSlab::Holder>();
  holder->store = impl_;
  auto close_left = [&](size_t from) {
    for (size_t i = from; i < fds.size(); ++i) close(fds[i]);
  };
  if (!reply.ok()) {
    close_left(0);
    holder->released = true;  // nothing was granted
    return reply.status();
  }
  if (!reply->has_object_slab_reply()) {
    close_left(0);
    holder->released = true;
    return Status::ProtocolError("nanokv objects: kvd answered a slab request with another message");
  }
  holder->grant = reply->object_slab_reply();
  const wire::ObjectSlabReply& g = holder->grant;
  // From here the slab is ours: a failure below releases it (ObjectSlab's
  // destructor) before the mappings go.
  auto give_back = [&](Status why, size_t close_from) {
    close_left(close_from);
    ObjectSlab dropped(std::move(holder));
    return why;
  };
  if (fds.size() != 1) {
    return give_back(Status::ProtocolError("nanokv objects: a slab's reply carried " + std::to_string(fds.size()) +
                                           " fds for its ring"),
                     0);
  }
  impl_->NoteDevice(g.device(), g.device_uuid());
  auto local = impl_->LocalDevice(g.device());
  if (!local.ok()) return give_back(local.status(), 0);
  holder->local_device = *local;
  Status ring = holder->MapRing(fds[0]);
  if (!ring.ok()) return give_back(ring, 1);
  holder->mapping = true;
  auto base = impl_->MapSlab(g, *local);
  if (!base.ok()) return give_back(base.status(), 1);
  holder->base = *base;
  holder->cursor = {0, g.payload_bytes(), 0, g.header_slots(), 0, g.ring_records(), 256, 0};
  return std::make_unique<ObjectSlab>(std::move(holder));
}

ObjectSlab::ObjectSlab(std::unique_ptr<Holder> holder) : holder_(std::move(holder)) {}
ObjectSlab::ObjectSlab(ObjectSlab&&) noexcept = default;
ObjectSlab& ObjectSlab::operator=(ObjectSlab&&) noexcept = default;

ObjectSlab::~ObjectSlab() {
  if (holder_ == nullptr) return;
  Status released = Release();
  if (!released.ok()) spdlog::warn("nanokv objects: slab {}: {}", holder_->grant.slab_id(), released.ToString());
}

Status ObjectSlab::Release() {
  if (holder_->released) return Status::OK();
  holder_->released = true;
  wire::Message request;
  request.mutable_object_slab_release()->set_slab_id(holder_->grant.slab_id());
  return holder_->store->Call(std::move(request)).status();
}

uint64_t ObjectSlab::id() const { return holder_->grant.slab_id(); }
int ObjectSlab::device() const { return holder_->grant.device(); }
uint64_t ObjectSlab::payload_bytes() const { return holder_->grant.payload_bytes(); }
uint32_t ObjectSlab::header_slots() const { return holder_->grant.header_slots(); }
uint64_t ObjectSlab::ttl_ms() const { return holder_->grant.ttl_ms(); }
device::SlabCursor* ObjectSlab::cursor() { return &holder_->cursor; }

device::AnnounceRing ObjectSlab::ring() const {
  auto* header = static_cast<device::AnnounceRingHeader*>(holder_->ring);
  return {header, reinterpret_cast<device::AnnounceRecord*>(header + 1)};
}

void* ObjectSlab::payload() const {
  const wire::ObjectSlabReply& g = holder_->grant;
  return reinterpret_cast<void*>(holder_->base + g.payload_offset());
}

ObjectHeader* ObjectSlab::header(uint32_t slot) const {
  const wire::ObjectSlabReply& g = holder_->grant;
  if (slot >= g.header_slots()) return nullptr;
  return reinterpret_cast<ObjectHeader*>(holder_->base + g.header_offset()) + slot;
}

uint32_t ObjectSlab::epoch(uint32_t slot) const { return holder_->grant.first_epoch() + slot; }

device::SlabGeometry ObjectSlab::geometry() const {
  const wire::ObjectSlabReply& g = holder_->grant;
  return {static_cast<char*>(payload()), header(0), g.payload_offset(), static_cast<uint32_t>(g.page_bytes()),
          g.first_epoch()};
}

int ObjectSlab::local_device() const { return holder_->local_device; }

ObjectHeader ObjectSlab::ReadyHeader(const device::SlabAllocation& at, uint64_t bytes, std::string_view key) const {
  ObjectHeader header = device::SlabHeader(geometry(), at, bytes, KeyHash(key));
  header.state = static_cast<uint32_t>(ObjectState::kReady);
  return header;
}

uint64_t ObjectSlab::KeyHash(std::string_view key) { return XXH64(key.data(), key.size(), 0); }

}  // namespace nanokv
