#include "daemon/objects/object_index.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "daemon/objects/store_range.h"

namespace nanokv::kvd {
namespace {

constexpr uint64_t kHeaderBytes = sizeof(ObjectHeader);

std::string Quote(std::string_view key) { return "'" + std::string(key.substr(0, 80)) + "'"; }

std::string Who(uint32_t uid) {
  return uid == ObjectIndex::kOperator ? std::string("kvd's own callers (the cluster master's orders)")
                                       : "uid " + std::to_string(uid);
}

// 64 random bits from the kernel, never 0 (0 is "no secret").
Result<uint64_t> RandomSecret() {
  uint64_t secret = 0;
  while (secret == 0) {
    ssize_t got = getrandom(&secret, sizeof(secret), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof(secret))) {
      return Status::Internal(std::string("object store: no random bytes for a write secret (getrandom: ") +
                              (got < 0 ? std::strerror(errno) : "short read") + ")");
    }
  }
  return secret;
}

}  // namespace

uint64_t KeyHash(std::string_view key) { return XXH64(key.data(), key.size(), 0); }

Status CheckKey(std::string_view key) {
  if (ValidObjectKey(key)) return Status::OK();
  if (key.empty() || key.size() > kMaxObjectKeyBytes) {
    return Status::InvalidArgument("object key of " + std::to_string(key.size()) +
                                   " bytes: keys are 1-" + std::to_string(kMaxObjectKeyBytes) + " bytes");
  }
  return Status::InvalidArgument("object key " + Quote(key) +
                                 " has a byte outside printable ASCII (0x21-0x7e)");
}

Result<std::unique_ptr<ObjectIndex>> ObjectIndex::Create(gpu::Backend& backend, NodeState& node,
                                                         const ObjectStoreConfig& config, StoreRestart* restart,
                                                         uint64_t now_ns) {
  // Every fd handed back is taken, whatever happens below.
  struct CloseLeft {
    StoreRestart* restart;
    ~CloseLeft() {
      if (restart == nullptr) return;
      for (auto& [device, pages] : restart->pages) {
        for (AdoptPage& page : pages) {
          if (page.fd >= 0) close(page.fd);
        }
        pages.clear();
      }
      for (auto& [device, pages] : restart->host_pages) {
        for (auto& [id, fd] : pages) {
          if (fd >= 0) close(fd);
        }
        pages.clear();
      }
    }
  } close_left{restart};
  if (!config.enabled()) return Status::InvalidArgument("object_store.size is 0: no store");
  NANOKV_RETURN_IF_ERROR(CheckHostTier(config, static_cast<int>(node.Counts().size())));
  if (!(config.low_watermark > 0 && config.low_watermark <= config.high_watermark &&
        config.high_watermark <= 1)) {
    return Status::InvalidArgument("object_store: need 0 < low_watermark <= high_watermark <= 1");
  }
  std::unique_ptr<ObjectIndex> store(new ObjectIndex(backend, node, config));
  size_t page = node.page_bytes();
  store->page_bytes_ = page;
  const uint64_t slots = config.max_objects != 0 ? config.max_objects : page / kHeaderBytes;
  const auto header_pages = static_cast<uint32_t>((slots * kHeaderBytes + page - 1) / page);

  AttachParams params;
  params.name = kStoreTenant;
  params.group = kStoreTenant;
  params.pid = getpid();
  params.uid = getuid();
  params.limit_bytes = node.capacity_bytes();
  params.kvd_owned = true;  // journaled held, but no engine may adopt its pages
  NANOKV_ASSIGN_OR_RETURN(store->tenant_, node.Attach(params, 0));

  for (const DeviceCounts& counts : node.Counts()) {
    uint64_t share = config.size.Resolve(uint64_t{counts.capacity_pages} * page);
    uint64_t pages = share / page;
    if (pages < header_pages + 1) {
      return Status::InvalidArgument(
          "object_store.size gives device " + std::to_string(counts.device) + " " +
          std::to_string(pages) + " pages; the store needs " + std::to_string(header_pages) +
          " header page(s) + at least 1 payload page");
    }
    Device device;
    device.ordinal = counts.device;
    device.evictable = EvictionOrder(config.policy);
    device.arena_pages = header_pages;
    device.max_objects = static_cast<uint32_t>(slots);
    device.slots_per_page = static_cast<uint32_t>(std::min<uint64_t>(slots, page / kHeaderBytes));
    const JournaledStore* previous = nullptr;
    if (restart != nullptr) {
      for (const JournaledStore& s : restart->previous.devices) {
        if (s.device == counts.device) previous = &s;
      }
    }
    std::vector<PageId> taken;
    NANOKV_ASSIGN_OR_RETURN(bool restoring,
                            store->TakePages(device, static_cast<uint32_t>(pages), taken, previous, restart));
    device.sorted_pages = taken;
    std::sort(device.sorted_pages.begin(), device.sorted_pages.end());
    for (uint32_t h = 0; h < header_pages; ++h) {
      HeaderPage header;
      header.page = h;
      for (uint32_t s = device.slots_per_page; s > 0; --s) header.free.push_back(s - 1);
      device.headers.push_back(std::move(header));
      device.header_at[h] = h;
      device.spare_headers.push_back(header_pages - 1 - h);  // ordinal 0 first
    }
    device.slot_epochs.assign(uint64_t{header_pages} * device.slots_per_page, 0);
    for (uint32_t r = device.max_objects; r > 0; --r) device.free_records.push_back(r - 1);
    uint64_t payload_bytes = (pages - header_pages) * page;
    NANOKV_ASSIGN_OR_RETURN(auto payload, OwnedSpace::Create(payload_bytes, page, kPayloadAlignment));
    device.payload.emplace(std::move(payload));
    store->devices_.push_back(std::move(device));
    Device& mapped = store->devices_.back();
    NANOKV_ASSIGN_OR_RETURN(mapped.range, StoreRange::Map(backend, node, counts.device, std::move(taken)));
    // A fresh arena is zeroed; a restored one is written by Restore.
    if (!restoring) NANOKV_RETURN_IF_ERROR(mapped.range->Fill(0, 0, mapped.arena_pages * page));
    bool host_back = false;
    if (config.host_tier != 0) {
      NANOKV_ASSIGN_OR_RETURN(host_back, store->AddHostTier(mapped, restoring ? previous : nullptr, restart));
    }
    if (restoring) NANOKV_RETURN_IF_ERROR(store->Restore(store->devices_.size() - 1, *previous, now_ns, host_back));
  }
  // Sized by max_objects, which Create gives every device alike.
  const uint32_t records = store->devices_.empty() ? 0 : store->devices_.front().max_objects;
  if (records > 0) {
    auto table = ReadTable::Create(store->devices_.size(), records);
    if (table.ok()) {
      store->read_table_ = std::move(*table);
      // What a restart restored is listed as a commit would have listed it.
      for (const auto& [key, object] : store->table_.objects()) store->PublishRead(object);
    } else {
      spdlog::warn("object store: no read table, every get takes a lease: {}", table.status().ToString());
    }
  }
  return store;
}

ObjectIndex::ObjectIndex(gpu::Backend& backend, NodeState& node, const ObjectStoreConfig& config)
    : backend_(backend), node_(node), config_(config), table_(config) {}

ObjectIndex::~ObjectIndex() {
  table_.RemoveJournal();
  for (Device& device : devices_) {
    if (!device.tier_stream.valid()) continue;
    // Nothing is queued: every CopyMove waited for its copies.
    Status s = backend_.DestroyStream(device.tier_stream);
    if (!s.ok()) spdlog::warn("object store: device {}: destroying the tier stream: {}", device.ordinal, s.ToString());
  }
  // Unmapped before the pages go back to the pool.
  for (Device& device : devices_) device.range.reset();
  if (tenant_ != 0) {
    Status s = node_.Detach(tenant_);
    if (!s.ok()) spdlog::warn("object store: giving its pages back failed: {}", s.ToString());
  }
}

Result<size_t> ObjectIndex::DeviceIndex(int device) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].ordinal == device) return i;
  }
  return Status::NotFound("the object store has no device " + std::to_string(device));
}

size_t ObjectIndex::PickDevice() const {
  size_t best = 0;
  uint64_t best_free = 0;
  for (size_t i = 0; i < devices_.size(); ++i) {
    uint64_t free = devices_[i].payload->capacity() - devices_[i].payload->allocated_bytes();
    if (free > best_free) best = i, best_free = free;
  }
  return best;
}

ObjectPlan ObjectIndex::PlanOf(const Object& object) const {
  const Device& device = devices_[object.device];
  if (object.tier == Tier::kHost) return HostPlanOf(object);
  ObjectPlan plan;
  plan.key = object.key;
  plan.key_hash = object.key_hash;
  plan.device = device.ordinal;
  plan.header_offset = HeaderOffset(device, object.slot);
  const std::vector<PageId>& pages = device.range->pages();
  plan.header_page = pages[plan.header_offset / page_bytes_];
  plan.payload_offset = object.payload_offset;
  plan.page_bytes = page_bytes_;
  plan.bytes_total = object.bytes_total;
  plan.epoch = object.epoch;
  plan.state = object.state;
  plan.store_bytes = device.range->bytes();
  uint64_t at = object.payload_offset, left = object.bytes_total;
  while (left > 0) {
    uint64_t in_page = at % page_bytes_;
    uint64_t take = std::min<uint64_t>(left, page_bytes_ - in_page);
    plan.spans.push_back({pages[at / page_bytes_], static_cast<uint32_t>(in_page), static_cast<uint32_t>(take)});
    at += take;
    left -= take;
  }
  plan.n_pages = static_cast<uint32_t>(plan.spans.size());
  return plan;
}

Result<uint64_t> ObjectIndex::AllocatePayload(size_t d, uint64_t bytes, uint32_t owner, uint64_t now_ns) {
  Device& device = devices_[d];
  OwnedSpace& payload = *device.payload;
  uint64_t capacity = payload.capacity();
  if (bytes > capacity) {
    return Status::ResourceExhausted("object of " + std::to_string(bytes) + " bytes: device " +
                                     std::to_string(device.ordinal) + "'s store holds " +
                                     std::to_string(capacity));
  }
  if (device.host_space) return AllocateOverHostTier(d, bytes, owner, now_ns);
  uint64_t need = (bytes + kPayloadAlignment - 1) & ~(kPayloadAlignment - 1);
  auto high = static_cast<uint64_t>(config_.high_watermark * static_cast<double>(capacity));
  if (payload.allocated_bytes() + need > high) {
    auto low = static_cast<uint64_t>(config_.low_watermark * static_cast<double>(capacity));
    EvictDownTo(d, low > need ? low - need : 0, now_ns);
  }
  bool adopted = false;
  for (;;) {
    auto offset = payload.Allocate(owner, bytes);
    if (offset.ok()) return device.arena_pages * page_bytes_ + *offset;
    if (offset.status().code() != Code::kResourceExhausted) return offset.status();
    // Free space is there but in holes, or in other owners' pages: evict
    // more, one at a time.
    if (EvictOne(d, now_ns)) continue;
    // Nothing left to evict: empty pages of others' that only this owner
    // holds (a producer that wrote through the master's plans and now
    // through its own: one uid, two owners) become its own. Last, not
    // first: a page that changes owner is one the uid's other clients map
    // anew (BENCHMARKS.md, 2026-11-29 fifth session).
    if (!adopted) {
      adopted = true;
      if (AdoptHeldPages(d, owner) > 0) continue;
    }
    return Status::ResourceExhausted(
        "object store on device " + std::to_string(device.ordinal) + ": no room for " + std::to_string(bytes) +
        " bytes and nothing evictable (leased, pinned or being written): " + std::string(offset.status().message()));
  }
}

size_t ObjectIndex::AdoptHeldPages(size_t d, uint32_t owner) {
  auto held = holds_.find(owner);
  if (held == holds_.end()) return 0;
  Device& device = devices_[d];
  size_t adopted = 0;
  for (const auto& [hd, index] : held->second) {
    if (hd != d || index < device.arena_pages || device.header_at.count(static_cast<uint32_t>(index)) != 0) continue;
    const uint64_t page = index - device.arena_pages;
    const std::optional<uint32_t> was = device.payload->PageOwner(page);
    if (was && *was != owner && device.payload->Adopt(page, owner).ok()) ++adopted;
  }
  if (adopted > 0)
    spdlog::debug("object store: {} adopted {} empty page(s) it held on device {}", OwnerName(owner), adopted,
                  device.ordinal);
  return adopted;
}

Result<ObjectPlan> ObjectIndex::OpenForWrite(std::string_view key, uint64_t bytes_total,
                                             int preferred_device, uint64_t now_ns, uint32_t owner) {
  NANOKV_RETURN_IF_ERROR(CheckKey(key));
  if (bytes_total == 0) return Status::InvalidArgument("object " + Quote(key) + " of 0 bytes");
  std::lock_guard lock(mu_);
  size_t d = 0;
  if (preferred_device >= 0) {
    NANOKV_ASSIGN_OR_RETURN(d, DeviceIndex(preferred_device));
  } else {
    d = PickDevice();
  }
  // A write of this key left past write_timeout, on any device, is dead
  // already: it must not hold the key against this open.
  if (const Object* old = table_.Find(key);
      old != nullptr && old->state != ObjectState::kReady && old->deadline_ns <= now_ns) {
    ReclaimLocked(old->device, now_ns);
  }
  if (const Object* old = table_.Find(key)) {
    return Status::AlreadyExists("object " + Quote(key) + " exists (" + ObjectStateName(old->state) +
                                 ", epoch " + std::to_string(old->epoch) +
                                 "); objects are immutable: remove it first");
  }
  Device& device = devices_[d];
  uint64_t secret = 0;
  if (owner == kOperator) {
    NANOKV_ASSIGN_OR_RETURN(secret, RandomSecret());
  }
  ReclaimLocked(d, now_ns);
  NANOKV_ASSIGN_OR_RETURN(const uint32_t slot, AllocateSlot(d, owner, now_ns));
  auto offset = AllocatePayload(d, bytes_total, owner, now_ns);
  if (!offset.ok()) {
    FreeSlot(device, slot);
    return offset.status();
  }

  Object object;
  object.key = std::string(key);
  object.owner = owner;
  object.write_secret = secret;
  object.key_hash = KeyHash(key);
  object.device = d;
  object.slot = slot;
  object.payload_offset = *offset;
  object.bytes_total = bytes_total;
  object.state = ObjectState::kReserved;
  object.epoch = NextEpoch(device);
  object.seq = table_.NextSeq();
  object.created_ns = now_ns;
  object.last_access_ns = now_ns;
  object.deadline_ns = now_ns + static_cast<uint64_t>(config_.write_timeout.count()) * 1'000'000;
  // The header is the producer's to write, from an older epoch to this one
  // (a writer stalled past write_timeout then cannot clobber the slot's next
  // object); RESERVED lives in the index only.
  object.state = ObjectState::kWriting;
  device.slot_epochs[object.slot] = object.epoch;
  object.record = device.free_records.back();  // live objects <= max_objects == records
  device.free_records.pop_back();
  // Past low_watermark the tier worker moves victims down, ahead of a
  // write that would have to drop them.
  if (tier_kick_ && OverLowWatermark(d)) tier_kick_();
  Object* live = table_.Insert(std::move(object));
  device.writing.insert({live->deadline_ns, live});
  ++device.objects;
  table_.Journal(*live);
  ObjectPlan plan = PlanOf(*live);
  plan.write_secret = secret;  // the open's answer alone carries it
  return plan;
}

Status ObjectIndex::CheckWriter(const Object& object, uint32_t writer, const char* what) const {
  if (writer == object.owner) return Status::OK();
  // Epochs are in every listing: an epoch proves nothing about who asks.
  return Status::PermissionDenied(std::string(what) + " of " + Quote(object.key) + " (epoch " +
                                  std::to_string(object.epoch) + ") by " + Who(writer) + ": only its writer (" +
                                  Who(object.owner) + ") may commit or revoke it");
}

Status ObjectIndex::Commit(std::string_view key, uint32_t epoch, uint64_t now_ns, uint32_t writer) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) {
    return Status::NotFound("commit of " + Quote(key) +
                            ": no such object (revoked, reclaimed past write_timeout, or never opened)");
  }
  if (object->epoch != epoch) {
    return Status::FailedPrecondition("commit of " + Quote(key) + " with stale epoch " +
                                      std::to_string(epoch) + ": the key is now epoch " +
                                      std::to_string(object->epoch));
  }
  NANOKV_RETURN_IF_ERROR(CheckWriter(*object, writer, "commit"));
  if (object->state == ObjectState::kReady) {
    return Status::FailedPrecondition("commit of " + Quote(key) + ": already READY (committed twice)");
  }
  if (object->deadline_ns <= now_ns) {
    // Past write_timeout, the timer may not have run yet: reclaim it now
    // rather than publish bytes whose space is as good as freed.
    ReclaimLocked(object->device, now_ns);
    return Status::NotFound("commit of " + Quote(key) +
                            ": reclaimed, not committed within write_timeout");
  }
  devices_[object->device].writing.erase({object->deadline_ns, object});
  object->state = ObjectState::kReady;
  object->last_access_ns = now_ns;
  devices_[object->device].evictable.Add(object);
  table_.Journal(*object);  // committed: back READY after a restart
  PublishRead(*object);
  Notify(*object, ObjectEvent::Kind::kReady);
  return Status::OK();
}

Status ObjectIndex::Revoke(std::string_view key, uint32_t epoch, uint64_t /*now_ns*/, uint32_t writer) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("revoke of " + Quote(key) + ": no such object");
  if (object->epoch != epoch) {
    return Status::FailedPrecondition("revoke of " + Quote(key) + " with stale epoch " +
                                      std::to_string(epoch) + ": the key is now epoch " +
                                      std::to_string(object->epoch));
  }
  NANOKV_RETURN_IF_ERROR(CheckWriter(*object, writer, "revoke"));
  if (object->state == ObjectState::kReady) {
    return Status::FailedPrecondition("revoke of " + Quote(key) + ": it is READY (remove it instead)");
  }
  Kill(object, ObjectEvent::Kind::kRevoked);
  return Status::OK();
}

Status ObjectIndex::Remove(std::string_view key, uint64_t now_ns, uint32_t requester) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("remove of " + Quote(key) + ": no such object");
  if (requester != kOperator && requester != object->owner) {
    // Only the owner or an operator: any peer allowed to connect is not
    // enough to drop another tenant's object.
    return Status::PermissionDenied(
        "remove of " + Quote(key) + " by uid " + std::to_string(requester) +
        ": only its producer's uid" +
        (object->owner == kOperator ? std::string() : " (" + std::to_string(object->owner) + ")") +
        ", root or kvd's user may remove it");
  }
  if (object->state != ObjectState::kReady) {
    return Status::FailedPrecondition("remove of " + Quote(key) + ": it is " +
                                      ObjectStateName(object->state) +
                                      " (revoke it with its plan's epoch)");
  }
  if (table_.Leased(*object, now_ns)) {
    return Status::FailedPrecondition("remove of " + Quote(key) + ": under a read lease (" +
                                      std::to_string(object->leases.size()) + " lease(s))");
  }
  Kill(object, ObjectEvent::Kind::kRemoved);
  return Status::OK();
}

Result<ObjectPlan> ObjectIndex::GetLocation(std::string_view key, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("object " + Quote(key) + " does not exist");
  if (object->state != ObjectState::kReady) {
    return Status::FailedPrecondition("object " + Quote(key) + " is " +
                                      ObjectStateName(object->state) + ", not READY yet");
  }
  return LocateLocked(*object, now_ns);
}

ObjectPlan ObjectIndex::LocateLocked(Object& object, uint64_t now_ns) {
  Device& device = devices_[object.device];
  if (object.tier == Tier::kHost) {
    // Read where it is (the engine copies from the host tier's pages), and
    // moved back into the store for the next get.
    ++device.host_hits;
    device.host_order.Touch(&object, now_ns);
    device.wanted.insert(&object);
    if (tier_kick_) tier_kick_();
    return PlanOf(object);
  }
  ++device.gpu_hits;
  device.evictable.Touch(&object, now_ns);
  ObjectPlan plan = PlanOf(object);
  if (read_table_ != nullptr) {
    read_table_->Publish(object.device, object.record, object.epoch);
    plan.read_entry = object.record + 1;
  }
  return plan;
}

Status ObjectIndex::SetPin(std::string_view key, ObjectPin pin, uint32_t requester) {
  std::lock_guard lock(mu_);
  Object* object = table_.Find(key);
  if (object == nullptr) return Status::NotFound("pin of " + Quote(key) + ": no such object");
  if (requester != kOperator && requester != object->owner) {
    // A hard pin outlasts the operator's evict: it is the owner's to set.
    return Status::PermissionDenied("pin of " + Quote(key) + " by uid " + std::to_string(requester) +
                                    ": only its owner (" + Who(object->owner) + "), root or kvd's user may pin it");
  }
  object->pin = pin;
  table_.Journal(*object);
  return Status::OK();
}

Result<uintptr_t> ObjectIndex::StoreBase(int device) const {
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  return devices_[d].range->base();
}

bool ObjectIndex::OwnsPage(int device, PageId id) const {
  auto d = DeviceIndex(device);
  if (!d.ok()) return false;
  const auto& sorted = devices_[*d].sorted_pages;
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

}  // namespace nanokv::kvd
