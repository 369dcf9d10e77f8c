// The object store's upkeep: evicting the eviction order's victims,
// dropping objects, zombie reclaim, listing and the invariant check
// (object_index.h).
#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

void ObjectIndex::SetEventListener(std::function<void(const ObjectEvent&)> listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
}

void ObjectIndex::Notify(const Object& object, ObjectEvent::Kind kind) {
  if (!listener_) return;
  listener_(
      ObjectEvent{kind, object.key, devices_[object.device].ordinal, object.epoch, object.bytes_total, object.tier});
}

void ObjectIndex::Kill(Object* object, ObjectEvent::Kind why) {
  Device& device = devices_[object->device];
  if (object->state == ObjectState::kReady) OrderOf(*object).Remove(object);
  if (object->state == ObjectState::kReserved || object->state == ObjectState::kWriting) {
    device.writing.erase({object->deadline_ns, object});
  }
  // DEAD in the index only (object_index.h: kvd stores nothing on the
  // device); the slot's next object gets a newer epoch.
  object->state = ObjectState::kDead;
  Notify(*object, why);
  Drop(object);
}

void ObjectIndex::Drop(Object* object) {
  Device& device = devices_[object->device];
  WithdrawRead(*object);
  if (object->move.active) OrphanMove(*object);
  device.wanted.erase(object);
  if (object->tier == Tier::kHost) {
    Status freed = device.host_space->Free(object->payload_offset);
    if (!freed.ok()) spdlog::error("object store host tier: {}", freed.ToString());
    --device.host_objects;
  } else {
    Status freed = device.payload->Free(object->payload_offset - device.arena_pages * page_bytes_);
    if (!freed.ok()) spdlog::error("object store: {}", freed.ToString());
    FreeSlot(device, object->slot);
  }
  table_.ClearRecord(object->device, object->record);
  device.free_records.push_back(object->record);
  --device.objects;
  table_.Erase(object);
}

size_t ObjectIndex::ReclaimLocked(size_t d, uint64_t now_ns) {
  Device& device = devices_[d];
  size_t reclaimed = 0;
  for (auto it = device.writing.begin(); it != device.writing.end() && it->first <= now_ns;) {
    Object* object = it->second;
    ++it;  // Kill erases the entry
    spdlog::info("object store: reclaiming '{}' ({} past write_timeout, epoch {})", object->key,
                 ObjectStateName(object->state), object->epoch);
    Kill(object, ObjectEvent::Kind::kReclaimed);
    ++device.reclaimed_writes;
    ++reclaimed;
  }
  return reclaimed;
}

size_t ObjectIndex::Reclaim(uint64_t now_ns) {
  std::lock_guard lock(mu_);
  table_.PruneLeases(now_ns);
  size_t reclaimed = 0;
  for (size_t d = 0; d < devices_.size(); ++d) reclaimed += ReclaimLocked(d, now_ns);
  return reclaimed;
}

bool ObjectIndex::EvictOne(size_t d, uint64_t now_ns) {
  Device& device = devices_[d];
  Object* victim = device.evictable.PickVictim([&](Object& object) { return table_.Leased(object, now_ns); });
  if (victim == nullptr) return false;
  Kill(victim, ObjectEvent::Kind::kEvicted);
  ++device.evictions;
  return true;
}

uint64_t ObjectIndex::EvictDownTo(size_t d, uint64_t target, uint64_t now_ns) {
  OwnedSpace& payload = *devices_[d].payload;
  uint64_t before = payload.allocated_bytes();
  while (payload.allocated_bytes() > target) {
    if (!EvictOne(d, now_ns)) break;
  }
  return before - payload.allocated_bytes();
}

Result<uint64_t> ObjectIndex::Evict(int device, uint64_t bytes, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  std::vector<size_t> which;
  if (device < 0) {
    for (size_t d = 0; d < devices_.size(); ++d) which.push_back(d);
  } else {
    NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
    which.push_back(d);
  }
  uint64_t freed = 0;
  for (size_t d : which) {
    const OwnedSpace& payload = *devices_[d].payload;
    uint64_t used = payload.allocated_bytes();
    uint64_t target = 0;
    if (bytes == 0) {
      target = static_cast<uint64_t>(config_.low_watermark * static_cast<double>(payload.capacity()));
    } else {
      uint64_t left = bytes > freed ? bytes - freed : 0;
      target = used > left ? used - left : 0;
    }
    freed += EvictDownTo(d, target, now_ns);
  }
  return freed;
}

std::vector<ObjectEntry> ObjectIndex::List(uint64_t now_ns) const {
  // Whole milliseconds from `from` to `to`, 0 when `to` is not later.
  auto ms = [](uint64_t from, uint64_t to) { return to > from ? (to - from) / 1'000'000 : 0; };
  std::lock_guard lock(mu_);
  std::vector<ObjectEntry> out;
  out.reserve(table_.objects().size());
  for (const auto& [key, object] : table_.objects()) {
    ObjectEntry entry;
    entry.key = key;
    entry.bytes_total = object.bytes_total;
    entry.device = devices_[object.device].ordinal;
    entry.state = object.state;
    entry.epoch = object.epoch;
    entry.age_ms = ms(object.created_ns, now_ns);
    entry.idle_ms = ms(object.last_access_ns, now_ns);
    entry.pin = object.pin;
    entry.host_tier = object.tier == Tier::kHost;
    uint64_t lease_until_ns = 0;
    for (const auto& [id, expiry] : object.leases) {
      if (expiry <= now_ns) continue;
      ++entry.leases;
      lease_until_ns = std::max(lease_until_ns, expiry);
    }
    // A held lease (a view) has no end: UINT64_MAX says so.
    entry.lease_ms = lease_until_ns == UINT64_MAX ? UINT64_MAX : ms(now_ns, lease_until_ns);
    out.push_back(std::move(entry));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  return out;
}

std::vector<StoreDeviceStats> ObjectIndex::Stats() const {
  std::lock_guard lock(mu_);
  std::vector<StoreDeviceStats> out;
  for (const Device& device : devices_) {
    StoreDeviceStats s;
    s.device = device.ordinal;
    s.pages = static_cast<uint32_t>(device.range->pages().size());
    s.header_pages = static_cast<uint32_t>(device.headers.size());
    s.header_slots = s.header_pages * device.slots_per_page;
    s.shared_free_pages = static_cast<uint32_t>(device.payload->shared_free_pages());
    s.owned_pages = device.payload->OwnedPages();
    for (const HeaderPage& header : device.headers) {
      if (header.owned) ++s.owned_pages[header.owner];
    }
    s.payload_capacity = device.payload->capacity();
    s.payload_used = device.payload->allocated_bytes();
    s.objects = device.objects;
    s.evictions = device.evictions;
    s.reclaimed_writes = device.reclaimed_writes;
    s.recovered_objects = device.recovered_objects;
    s.recovered_bytes = device.recovered_bytes;
    s.recovered_writes = device.recovered_writes;
    s.refused_records = device.refused_records;
    if (device.host_space) {
      s.host_capacity = device.host_space->capacity();
      s.host_used = device.host_space->allocated_bytes();
    }
    s.host_objects = device.host_objects;
    s.demotions = device.demotions;
    s.promotions = device.promotions;
    s.host_evictions = device.host_evictions;
    s.gpu_hits = device.gpu_hits;
    s.host_hits = device.host_hits;
    out.push_back(s);
  }
  for (const auto& [id, slab] : slabs_.all()) {
    uint64_t unannounced = 0;
    for (const auto& [begin, end] : slab->unannounced) unannounced += end - begin;
    out[slab->d].slabs.push_back({id, slab->owner, slab->payload_bytes, unannounced, slab->header_slots,
                                  slab->header_slots - slab->slots_left, slab->expires_ns});
  }
  return out;
}

Status ObjectIndex::CheckInvariants(const NodeState& node) const {
  std::lock_guard lock(mu_);
  const Tenant* tenant = node.FindTenant(tenant_);
  if (tenant == nullptr) return Status::Internal("object store: its tenant is gone");
  std::vector<uint64_t> allocated(devices_.size(), 0);
  std::vector<uint32_t> live(devices_.size(), 0), evictable(devices_.size(), 0),
      writing(devices_.size(), 0);
  std::vector<std::vector<bool>> slot_used(devices_.size());
  for (size_t d = 0; d < devices_.size(); ++d) slot_used[d].assign(devices_[d].slot_epochs.size(), false);
  TierCounts tiers(devices_.size());
  std::vector<std::set<uint32_t>> records(devices_.size());
  for (const auto& [key, object] : table_.objects()) {
    std::string where = "object store: '" + key + "': ";
    if (object.key != key) return Status::Internal(where + "indexed under another key");
    const Device& device = devices_[object.device];
    // One journal record each, in either tier (a move takes a new one).
    if (object.record >= device.max_objects || !records[object.device].insert(object.record).second) {
      return Status::Internal(where + "its journal record is out of range or shared");
    }
    if (object.move.active || object.tier != Tier::kGpu) {
      NANOKV_RETURN_IF_ERROR(CheckTiers(object, slot_used[object.device], allocated[object.device], tiers));
      if (object.tier != Tier::kGpu) {
        ++live[object.device];
        continue;
      }
    }
    if (object.slot >= device.slot_epochs.size() || slot_used[object.device][object.slot]) {
      return Status::Internal(where + "header slot out of range or shared");
    }
    slot_used[object.device][object.slot] = true;
    uint64_t length = device.payload->LengthAt(object.payload_offset - device.arena_pages * page_bytes_);
    if (length < object.bytes_total) return Status::Internal(where + "payload range missing or short");
    NANOKV_RETURN_IF_ERROR(CheckOwner(device, object));
    allocated[object.device] += length;
    ++live[object.device];
    if (object.state == ObjectState::kReady) {
      if (device.evictable.Contains(object) == object.move.active) {
        return Status::Internal(where + (object.move.active ? "moving between tiers but in the eviction order"
                                                            : "READY but not in the eviction order"));
      }
      if (!object.move.active) ++evictable[object.device];
    } else if (object.state == ObjectState::kWriting || object.state == ObjectState::kReserved) {
      if (!device.writing.contains({object.deadline_ns, const_cast<Object*>(&object)})) {
        return Status::Internal(where + "being written but not in the reclaim order");
      }
      ++writing[object.device];
    } else {
      return Status::Internal(where + "indexed in state " + ObjectStateName(object.state));
    }
    // The device header is the producer's: either not begun (an older
    // epoch of the slot's) or this object's, WRITING or READY. (A producer
    // that commits without storing READY leaves WRITING there: it hides only
    // its own object from device readers.) A test-only read: kvd serving
    // requests never calls this.
    if (object.restored_write) continue;  // its slot was written free at the restart
    if (device.slot_epochs[object.slot] != object.epoch) {
      return Status::Internal(where + "its slot's last epoch is " + std::to_string(device.slot_epochs[object.slot]));
    }
    ObjectHeader header{};
    Status read = device.range->Read(HeaderOffset(device, object.slot), &header, sizeof(header));
    if (!read.ok()) return read;
    const bool begun = header.epoch == object.epoch;
    const bool state_ok = header.state == static_cast<uint32_t>(ObjectState::kWriting) ||
                          header.state == static_cast<uint32_t>(ObjectState::kReady);
    if (begun ? (header.key_hash != object.key_hash || !state_ok || header.payload_base != object.payload_offset ||
                 header.bytes_total != object.bytes_total)
              : (header.epoch != 0 && !EpochIsNewer(object.epoch, header.epoch))) {
      return Status::Internal(where + "device header disagrees (state " + std::to_string(header.state) +
                              ", epoch " + std::to_string(header.epoch) + ")");
    }
  }
  NANOKV_RETURN_IF_ERROR(table_.CheckLeases());
  NANOKV_RETURN_IF_ERROR(CheckReadTable());
  // Slab space: objects' + slabs' + free == the payload (checked below).
  NANOKV_RETURN_IF_ERROR(CheckSlabs(allocated, slot_used));
  for (size_t d = 0; d < devices_.size(); ++d) {
    const Device& device = devices_[d];
    std::string where = "object store device " + std::to_string(device.ordinal) + ": ";
    NANOKV_RETURN_IF_ERROR(device.payload->CheckInvariants());
    for (const Orphan& orphan : orphans_) {
      if (orphan.d == d && orphan.to == Tier::kGpu) {
        allocated[d] += device.payload->LengthAt(orphan.offset - device.arena_pages * page_bytes_);
      }
    }
    if (allocated[d] != device.payload->allocated_bytes()) {
      return Status::Internal(where + "allocator holds " + std::to_string(device.payload->allocated_bytes()) +
                              " bytes, objects " + std::to_string(allocated[d]));
    }
    if (live[d] != device.objects || live[d] > device.max_objects) {
      return Status::Internal(where + "object count drifted");
    }
    if (live[d] + device.free_records.size() != device.max_objects) {
      return Status::Internal(where + "journal records drifted (" + std::to_string(device.free_records.size()) +
                              " free for " + std::to_string(live[d]) + " objects)");
    }
    NANOKV_RETURN_IF_ERROR(CheckHeaderPages(d));
    NANOKV_RETURN_IF_ERROR(CheckHostSpace(d, tiers));
    if (evictable[d] != device.evictable.size() || writing[d] != device.writing.size()) {
      return Status::Internal(where + "eviction or reclaim order lists a dead object");
    }
    auto held = node.Counts();
    size_t index = 0;
    for (; index < held.size() && held[index].device != device.ordinal; ++index) {}
    const size_t pages = device.range->pages().size();
    if (index == held.size() || tenant->used_pages[index] != pages) {
      return Status::Internal(where + "holds " + std::to_string(pages) + " pages, its tenant counts otherwise");
    }
  }
  return node.CheckInvariants();
}

}  // namespace nanokv::kvd
