// v2 slabs (issue 34; object_index.h, "v2 slabs"; docs/ARCHITECTURE.md,
// "Device allocation: v2 slabs"): kvd grants a producer a range of an
// owner's store and an announce ring, reads the ring and indexes what the
// producer announces. Everything in a ring is the producer's word:
// AnnounceRing checks each record against the slab, and this file checks
// what only the store knows (alignment, epochs, keys taken).
//
// A slab holds, for its owner: a run of payload (one live range of the
// owner's, counted against high_watermark like a write), a run of header
// slots in one header page of the owner's (counted against max_objects,
// each with its epoch issued at the grant: slot i's is first_epoch + i) and
// an announce ring. Its pages are held by the owner's uid (as a plan's
// write fds are). An announced object is cut out of the slab's payload into
// a range of its own and indexed READY, as a commit does; what was never
// announced goes back when the slab ends: released, expired
// (object_store.slab_ttl), its connection closed, or its ring poisoned.
//
// kvd never reads a header slot here: on cuda it is device memory, and a
// device access from kvd's process while it serves costs the engines a
// context switch. The record's word is the source; a producer that
// announces without its READY header hides only its own object from device
// readers (as a v1 producer that commits without READY does).
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {
namespace {

constexpr uint64_t kMaxSlabPayload = uint64_t{1} << 40;  // far past any store; keeps sums in range

uint64_t RoundUp(uint64_t bytes) { return (bytes + kPayloadAlignment - 1) & ~(kPayloadAlignment - 1); }

}  // namespace

Result<uint32_t> ObjectIndex::TakeSlabSlots(Device& device, uint32_t owner, uint32_t count) {
  // One run of free slots (the producer addresses slot i at first + i) in
  // a header page of the owner's: one it has with room first (a scan of
  // its free slots, at a grant only), else a fresh one.
  auto take = [&](uint32_t ordinal, uint32_t first) {
    HeaderPage& header = device.headers[ordinal];
    std::erase_if(header.free, [&](uint32_t s) { return s >= first && s < first + count; });
    header.live += count;
    if (header.free.empty()) {
      auto& mine = device.header_room[owner];
      mine.erase(ordinal);
      if (mine.empty()) device.header_room.erase(owner);
    }
    return ordinal * device.slots_per_page + first;
  };
  if (auto room = device.header_room.find(owner); room != device.header_room.end()) {
    for (uint32_t ordinal : room->second) {
      std::vector<bool> free(device.slots_per_page, false);
      for (uint32_t s : device.headers[ordinal].free) free[s] = true;
      uint32_t run = 0;
      for (uint32_t s = 0; s < device.slots_per_page; ++s) {
        run = free[s] ? run + 1 : 0;
        if (run == count) return take(ordinal, s + 1 - count);
      }
    }
  }
  auto ordinal = AdoptHeaderPage(device, owner);
  if (!ordinal.ok()) {
    return Status::ResourceExhausted("no header page for a slab of " + OwnerName(owner) +
                                     " (its pages have no run of " + std::to_string(count) +
                                     " free slots): " + std::string(ordinal.status().message()));
  }
  return take(*ordinal, 0);
}

Status ObjectIndex::LendSlabPageLocked(size_t d, uint64_t index, const WriteClaim& claim) {
  const Device& dev = devices_[d];
  auto refuse = [&](const std::string& why) {
    return Status::PermissionDenied("page " + std::to_string(index) + " of device " + std::to_string(dev.ordinal) +
                                    "'s store " + why + ": a slab's pages are lent only to its producer");
  };
  const GrantedSlab* slab = slabs_.Find(claim.slab_id);
  if (slab == nullptr || slab->d != d) {
    return refuse("is lent for no slab " + std::to_string(claim.slab_id) + ": none is live on this device");
  }
  if (slab->owner != claim.uid) {
    return refuse("is not uid " + std::to_string(claim.uid) + "'s: slab " + std::to_string(slab->id) + " is " +
                  OwnerName(slab->owner) + "'s");
  }
  const uint64_t header = HeaderOffset(dev, slab->first_slot) / page_bytes_;
  const uint64_t first = slab->payload_offset / page_bytes_;
  const uint64_t last = (slab->payload_offset + slab->payload_bytes - 1) / page_bytes_;
  if (index != header && (index < first || index > last)) {
    return refuse("is not a page of slab " + std::to_string(slab->id));
  }
  return Status::OK();  // held by the owner since the grant (GrantSlab)
}

Result<SlabGrant> ObjectIndex::GrantSlab(const SlabRequest& request, uint32_t owner, uint64_t held_by,
                                         uint64_t now_ns) {
  if (request.payload_bytes == 0 || request.payload_bytes > kMaxSlabPayload) {
    return Status::InvalidArgument("slab of " + std::to_string(request.payload_bytes) +
                                   " payload bytes: ask for 1 byte to 1 TiB");
  }
  if (request.ring_records < ipc::AnnounceRing::kMinRecords || request.ring_records > ipc::AnnounceRing::kMaxRecords ||
      (request.ring_records & (request.ring_records - 1)) != 0) {
    return Status::InvalidArgument(
        "slab ring of " + std::to_string(request.ring_records) + " records: ask for a power of two in [" +
        std::to_string(ipc::AnnounceRing::kMinRecords) + ", " + std::to_string(ipc::AnnounceRing::kMaxRecords) + "]");
  }
  if (request.payload_bytes > (kMaxSlabPages - 1) * page_bytes_) {
    return Status::InvalidArgument("slab of " + std::to_string(request.payload_bytes) +
                                   " payload bytes: a slab spans " + std::to_string(kMaxSlabPages) +
                                   " pages at most, ask for " + std::to_string((kMaxSlabPages - 1) * page_bytes_) +
                                   " bytes or fewer");
  }
  std::lock_guard lock(mu_);
  NANOKV_ASSIGN_OR_RETURN(const size_t d, DeviceIndex(request.device));
  Device& device = devices_[d];
  if (request.header_slots == 0 || request.header_slots > device.slots_per_page) {
    return Status::InvalidArgument("slab of " + std::to_string(request.header_slots) +
                                   " header slots: a slab's slots are one header page's, ask for 1-" +
                                   std::to_string(device.slots_per_page));
  }
  if (slabs_.CountOf(owner) >= config_.max_slabs) {
    return Status::ResourceExhausted(OwnerName(owner) + " holds " + std::to_string(config_.max_slabs) +
                                     " slabs already (object_store.max_slabs): release one first");
  }
  if (device.objects + device.slab_slots + request.header_slots > device.max_objects) {
    return Status::ResourceExhausted("slab of " + std::to_string(request.header_slots) + " header slots on device " +
                                     std::to_string(device.ordinal) + ": " + std::to_string(device.objects) +
                                     " objects and " + std::to_string(device.slab_slots) + " slab slots of " +
                                     std::to_string(device.max_objects) +
                                     " in use (object_store.max_objects): ask for fewer slots");
  }
  // The high watermark as a write counts it, after what eviction can free:
  // a slab's payload is held whole from the grant, announced or not.
  const uint64_t bytes = RoundUp(request.payload_bytes);
  OwnedSpace& payload = *device.payload;
  const auto high = static_cast<uint64_t>(config_.high_watermark * static_cast<double>(payload.capacity()));
  if (payload.allocated_bytes() + bytes > high) {
    auto low = static_cast<uint64_t>(config_.low_watermark * static_cast<double>(payload.capacity()));
    EvictDownTo(d, low > bytes ? low - bytes : 0, now_ns);
    if (payload.allocated_bytes() + bytes > high) {
      return Status::ResourceExhausted(
          "slab of " + std::to_string(bytes) + " bytes on device " + std::to_string(device.ordinal) + ": " +
          std::to_string(payload.allocated_bytes()) + " of " + std::to_string(payload.capacity()) +
          " payload bytes in use, and the store stays under object_store.high_watermark (" + std::to_string(high) +
          " bytes): ask for less, or release slabs and objects");
    }
  }
  ipc::SlabBounds bounds{bytes, request.header_slots};
  int ring_fd = -1;
  NANOKV_ASSIGN_OR_RETURN(ipc::AnnounceRing ring, ipc::AnnounceRing::Create(request.ring_records, bounds, &ring_fd));
  auto fail = [&](Status why) {
    close(ring_fd);
    return why;
  };
  auto offset = AllocatePayload(d, bytes, owner, now_ns);
  if (!offset.ok()) return fail(offset.status());
  auto first_slot = TakeSlabSlots(device, owner, request.header_slots);
  if (!first_slot.ok()) {
    (void)payload.Free(*offset - device.arena_pages * page_bytes_);
    return fail(first_slot.status());
  }
  // Slot i's epoch is first_epoch + i: one run from the device's counter
  // (unique on it, newer than any the slots held), begun again if it wraps.
  uint32_t first_epoch = NextEpoch(device);
  for (uint32_t i = 1; i < request.header_slots; ++i) {
    const uint32_t epoch = NextEpoch(device);
    if (epoch != first_epoch + i) first_epoch = epoch, i = 0;
  }
  for (uint32_t i = 0; i < request.header_slots; ++i) device.slot_epochs[*first_slot + i] = first_epoch + i;
  device.slab_slots += request.header_slots;

  GrantedSlab slab;
  slab.id = slabs_.NextId();
  slab.d = d;
  slab.owner = owner;
  slab.held_by = held_by;
  slab.payload_offset = *offset;
  slab.payload_bytes = bytes;
  slab.first_slot = *first_slot;
  slab.header_slots = request.header_slots;
  slab.first_epoch = first_epoch;
  slab.expires_ns = now_ns + static_cast<uint64_t>(config_.slab_ttl.count()) * 1'000'000;
  slab.unannounced[*offset] = *offset + bytes;
  slab.slot_taken.assign(request.header_slots, false);
  slab.slots_left = request.header_slots;
  slab.ring = std::move(ring);

  SlabGrant grant;
  grant.id = slab.id;
  grant.device = device.ordinal;
  grant.payload_offset = slab.payload_offset;
  grant.payload_bytes = bytes;
  grant.header_offset = HeaderOffset(device, slab.first_slot);
  grant.header_slots = slab.header_slots;
  grant.first_epoch = first_epoch;
  grant.ring_records = request.ring_records;
  grant.expires_ns = slab.expires_ns;
  grant.page_bytes = page_bytes_;
  grant.store_bytes = device.range->bytes();
  const std::vector<PageId>& pages = device.range->pages();
  grant.header_page = pages[grant.header_offset / page_bytes_];
  // The producer writes these pages through fds it asks for naming the
  // slab (LendSlabPageLocked): held by its uid from now on, as a plan's
  // writer's pages are.
  auto& held = holds_[owner];
  const uint64_t header_index = grant.header_offset / page_bytes_;
  if (held.insert({d, header_index}).second) ++device.headers[device.header_at[header_index]].holds;
  for (uint64_t index = *offset / page_bytes_; index <= (*offset + bytes - 1) / page_bytes_; ++index) {
    grant.payload_pages.push_back(pages[index]);
    if (held.insert({d, index}).second) (void)payload.Hold(index - device.arena_pages);
  }
  grant.ring_fd = ring_fd;
  slabs_.Insert(std::move(slab));
  ++slabs_.counters.granted;
  spdlog::debug("object store: slab {} for {} on device {}: {} bytes at {}, {} slots from {}", grant.id,
                OwnerName(owner), device.ordinal, bytes, grant.payload_offset, grant.header_slots, *first_slot);
  return grant;
}

Status ObjectIndex::AdoptAnnounced(GrantedSlab& slab, const ipc::AnnouncedObject& announced, uint64_t now_ns) {
  Device& device = devices_[slab.d];
  const std::string where = "slab " + std::to_string(slab.id) + ": '" + announced.key.substr(0, 80) + "' ";
  if (announced.payload_offset % kPayloadAlignment != 0) {
    return Status::ProtocolError(where + "at payload offset " + std::to_string(announced.payload_offset) +
                                 ", not a multiple of " + std::to_string(kPayloadAlignment));
  }
  if (announced.epoch != slab.first_epoch + announced.header_slot) {
    return Status::ProtocolError(where + "has epoch " + std::to_string(announced.epoch) + "; its slot's is " +
                                 std::to_string(slab.first_epoch + announced.header_slot));
  }
  NANOKV_RETURN_IF_ERROR(CheckKey(announced.key));
  if (slab.slot_taken[announced.header_slot]) return Status::ProtocolError(where + "reuses a header slot");
  const uint64_t start = slab.payload_offset + announced.payload_offset;
  const uint64_t end = start + RoundUp(announced.bytes);
  auto piece = slab.unannounced.upper_bound(start);
  if (piece == slab.unannounced.begin() || std::prev(piece)->second < end) {
    return Status::ProtocolError(where + "overlaps an object announced before");
  }
  --piece;
  if (table_.Find(announced.key) != nullptr) {
    // The key's object stands (objects are immutable; the index's is the
    // one readers may hold a plan of). The loser's space stays the slab's
    // and goes back when the slab ends.
    ++slabs_.counters.lost_keys;
    slab.ring.NoteDropped();
    spdlog::warn("object store: {}is taken already; the announced object is dropped (its space returns with the slab)",
                 where);
    return Status::OK();
  }
  if (device.free_records.empty()) return Status::Internal(where + "finds no journal record");
  // Its own live range: cut out of the slab's piece.
  const uint64_t base = device.arena_pages * page_bytes_;
  const uint64_t piece_start = piece->first, piece_end = piece->second;
  if (start > piece_start) NANOKV_RETURN_IF_ERROR(device.payload->Split(piece_start - base, start - base));
  if (end < piece_end) NANOKV_RETURN_IF_ERROR(device.payload->Split(start - base, end - base));
  slab.unannounced.erase(piece);
  if (start > piece_start) slab.unannounced[piece_start] = start;
  if (end < piece_end) slab.unannounced[end] = piece_end;

  Object object;
  object.key = announced.key;
  object.owner = slab.owner;
  object.key_hash = announced.key_hash;
  object.device = slab.d;
  object.slot = slab.first_slot + announced.header_slot;
  object.payload_offset = start;
  object.bytes_total = announced.bytes;
  object.state = ObjectState::kReady;
  object.epoch = announced.epoch;
  object.seq = table_.NextSeq();
  object.created_ns = now_ns;
  object.last_access_ns = now_ns;
  object.record = device.free_records.back();
  device.free_records.pop_back();
  slab.slot_taken[announced.header_slot] = true;
  --slab.slots_left;
  --device.slab_slots;
  ++device.objects;
  Object* live = table_.Insert(std::move(object));
  device.evictable.Add(live);
  table_.Journal(*live);  // as a commit: back READY after a restart
  PublishRead(*live);
  Notify(*live, ObjectEvent::Kind::kReady);
  ++slabs_.counters.announced;
  return Status::OK();
}

bool ObjectIndex::ReadRing(GrantedSlab& slab, size_t max, uint64_t now_ns) {
  // One record per Poll: a poll that meets a bad record answers only the
  // error, and the records before it in the ring must still stand.
  for (size_t n = 0; n < max; ++n) {
    const uint64_t before = slab.ring.consumed();
    // Published after the adopt: a producer that sees the record read sees
    // its drop too (FlushSlabPuts).
    auto got = slab.ring.Poll(1, /*publish=*/false);
    Status bad = got.ok() ? Status::OK() : got.status();
    if (got.ok() && !got->empty()) bad = AdoptAnnounced(slab, got->front(), now_ns);
    if (slab.ring.consumed() != before) slab.ring.Publish();
    if (!bad.ok()) {
      ++slabs_.counters.poisoned;
      spdlog::warn("object store: slab {} of {} ends, its ring broke a rule (what it announced before stands): {}",
                   slab.id, OwnerName(slab.owner), bad.ToString());
      return false;
    }
    if (got->empty() && slab.ring.consumed() == before) return true;  // nothing stamped yet
  }
  return true;
}

void ObjectIndex::EndSlab(uint64_t id, const char* why) {
  GrantedSlab* slab = slabs_.Find(id);
  if (slab == nullptr) return;
  Device& device = devices_[slab->d];
  const uint64_t base = device.arena_pages * page_bytes_;
  uint64_t returned = 0;
  for (const auto& [start, end] : slab->unannounced) {
    Status freed = device.payload->Free(start - base);
    if (!freed.ok()) spdlog::error("object store: slab {}: {}", id, freed.ToString());
    returned += end - start;
  }
  for (uint32_t i = 0; i < slab->header_slots; ++i) {
    if (!slab->slot_taken[i]) FreeSlot(device, slab->first_slot + i);
  }
  device.slab_slots -= slab->slots_left;
  spdlog::debug("object store: slab {} of {} ends ({}): {} bytes and {} slots never announced go back", id,
                OwnerName(slab->owner), why, returned, slab->slots_left);
  slabs_.Erase(id);
}

Status ObjectIndex::ReleaseSlab(uint64_t id, uint32_t requester, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  GrantedSlab* slab = slabs_.Find(id);
  if (slab == nullptr) return Status::NotFound("slab " + std::to_string(id) + ": none (released or expired)");
  if (requester != kOperator && requester != slab->owner) {
    return Status::PermissionDenied("release of slab " + std::to_string(id) + " by " + OwnerName(requester) +
                                    ": only its owner (" + OwnerName(slab->owner) + ") may release it");
  }
  (void)ReadRing(*slab, slab->ring.record_count(), now_ns);
  EndSlab(id, "released");
  return Status::OK();
}

size_t ObjectIndex::ReleaseHeldSlabs(uint64_t held_by, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  size_t ended = 0;
  for (uint64_t id : slabs_.Ids()) {
    GrantedSlab* slab = slabs_.Find(id);
    if (slab->held_by != held_by) continue;
    (void)ReadRing(*slab, slab->ring.record_count(), now_ns);
    EndSlab(id, "its connection closed");
    ++ended;
  }
  return ended;
}

size_t ObjectIndex::PollSlabs(uint64_t now_ns, size_t max_records) {
  std::lock_guard lock(mu_);
  const uint64_t before = slabs_.counters.announced;
  for (uint64_t id : slabs_.Ids()) {
    GrantedSlab* slab = slabs_.Find(id);
    const bool expired = slab->expires_ns <= now_ns;
    // An expiring slab's ring is read whole first: what was announced stands.
    if (!ReadRing(*slab, expired ? slab->ring.record_count() : max_records, now_ns)) {
      EndSlab(id, "poisoned");
    } else if (expired) {
      ++slabs_.counters.expired;
      EndSlab(id, "past object_store.slab_ttl");
    }
  }
  return slabs_.counters.announced - before;
}

SlabCounters ObjectIndex::slab_counters() const {
  std::lock_guard lock(mu_);
  SlabCounters out = slabs_.counters;
  out.live = slabs_.size();
  return out;
}

Status ObjectIndex::CheckSlabs(std::vector<uint64_t>& allocated, std::vector<std::vector<bool>>& slot_used) const {
  for (const auto& [id, slab] : slabs_.all()) {
    const Device& device = devices_[slab->d];
    const std::string where = "object store: slab " + std::to_string(id) + ": ";
    uint64_t end = slab->payload_offset;
    for (const auto& [start, stop] : slab->unannounced) {
      if (start < end || stop > slab->payload_offset + slab->payload_bytes) {
        return Status::Internal(where + "a piece lies outside it or overlaps another");
      }
      if (device.payload->LengthAt(start - device.arena_pages * page_bytes_) != stop - start) {
        return Status::Internal(where + "a piece is not a live range of its own");
      }
      if (PageOwner(device, start / page_bytes_) != std::optional<uint32_t>(slab->owner)) {
        return Status::Internal(where + "a piece is in a page not its owner's");
      }
      allocated[slab->d] += stop - start;
      end = stop;
    }
    uint32_t left = 0;
    for (uint32_t i = 0; i < slab->header_slots; ++i) {
      if (slab->slot_taken[i]) continue;
      const uint32_t slot = slab->first_slot + i;
      if (slot >= slot_used[slab->d].size() || slot_used[slab->d][slot]) {
        return Status::Internal(where + "header slot out of range or shared");
      }
      slot_used[slab->d][slot] = true;
      ++left;
    }
    if (left != slab->slots_left) return Status::Internal(where + "its count of slots left drifted");
  }
  for (size_t d = 0; d < devices_.size(); ++d) {
    uint32_t slots = 0;
    for (const auto& [id, slab] : slabs_.all()) slots += slab->d == d ? slab->slots_left : 0;
    if (slots != devices_[d].slab_slots) return Status::Internal("object store: slab slot count drifted");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
