// Moves between a device's tiers (object_index.h, "The host tier"): a
// demotion of the store's eviction victim into the host tier, a promotion
// of what gets asked for back into the store, each Begin (locked), CopyMove
// (unlocked, on the device's tier stream), FinishMove (locked), and the
// tier worker's round of them (RunTierWork).
#include <cstddef>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

void ObjectIndex::JournalMove(Device& device, Object* object) {
  if (device.free_records.empty()) {
    // Every record in use (max_objects objects): rewritten in place, a
    // window of one record's copy in which a kill loses the object.
    table_.Journal(*object);
    return;
  }
  const uint32_t old = object->record;
  object->record = device.free_records.back();
  device.free_records.pop_back();
  table_.Journal(*object);
  table_.ClearRecord(object->device, old);
  device.free_records.push_back(old);
}

void ObjectIndex::ReleaseMove(Object* object) {
  Device& device = devices_[object->device];
  if (object->move.to == Tier::kHost) {
    Status freed = device.host_space->Free(object->move.offset);
    if (!freed.ok()) spdlog::error("object store host tier: {}", freed.ToString());
  } else {
    Status freed = device.payload->Free(object->move.offset - device.arena_pages * page_bytes_);
    if (!freed.ok()) spdlog::error("object store: {}", freed.ToString());
    FreeSlot(device, object->move.slot);
  }
  object->move = {};
}

void ObjectIndex::OrphanMove(const Object& object) {
  orphans_.push_back({object.device, object.move.to, object.move.offset, object.move.slot});
}

ObjectIndex::TierMove ObjectIndex::MoveOf(const Object& object, size_t d, Tier to, uint64_t target) {
  TierMove move;
  move.key = object.key;
  move.d = d;
  move.epoch = object.epoch;
  move.to = to;
  move.from = object.payload_offset;
  move.target = target;
  move.bytes = object.bytes_total;
  return move;
}

std::optional<ObjectIndex::TierMove> ObjectIndex::BeginDemotion(int device, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  auto d = DeviceIndex(device);
  if (!d.ok() || !devices_[*d].host_space) return std::nullopt;
  Device& dev = devices_[*d];
  Object* victim = dev.evictable.PickVictim([&](Object& object) { return table_.Leased(object, now_ns); });
  if (victim == nullptr) return std::nullopt;
  auto target = AllocateHost(*d, victim->bytes_total, victim->owner, now_ns);
  if (!target.ok()) {
    spdlog::debug("object store: device {}: '{}' not demoted: {}", dev.ordinal, victim->key,
                  target.status().ToString());
    return std::nullopt;
  }
  dev.evictable.Remove(victim);
  victim->move = {true, Tier::kHost, *target, 0, 0};
  return MoveOf(*victim, *d, Tier::kHost, *target);
}

std::optional<ObjectIndex::TierMove> ObjectIndex::BeginPromotion(int device, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  auto d = DeviceIndex(device);
  if (!d.ok() || !devices_[*d].host_space) return std::nullopt;
  Device& dev = devices_[*d];
  // A leased one is being read in the host tier: it waits there (it stays
  // wanted) until its readers are done, as its space cannot go under them.
  for (auto it = dev.wanted.begin(); it != dev.wanted.end();) {
    Object* object = *it;
    if (object->tier == Tier::kHost && !object->move.active && object->state == ObjectState::kReady &&
        table_.Leased(*object, now_ns)) {
      ++it;
      continue;
    }
    it = dev.wanted.erase(it);
    if (object->tier != Tier::kHost || object->move.active || object->state != ObjectState::kReady) continue;
    // Only into room the store has: promotion never evicts (demotion makes
    // room, so a promoted object, the last read, is not the next to go).
    OwnedSpace& payload = *dev.payload;
    const uint64_t need = (object->bytes_total + kPayloadAlignment - 1) & ~(kPayloadAlignment - 1);
    const auto high = static_cast<uint64_t>(config_.high_watermark * static_cast<double>(payload.capacity()));
    // No room (over the high mark, no free header slot, or no run of pages
    // long enough): wanted again, and one demotion asked for even under the
    // low mark. Else a store between the marks, or fragmented, never made
    // room and the object's readers were told "ask again" for ever (found
    // on cuda after a restart, KvdTierRestartTest).
    auto no_room = [&] {
      dev.wanted.insert(object);
      dev.room_wanted = true;
      return std::nullopt;
    };
    if (payload.allocated_bytes() + need > high) return no_room();
    auto slot = TakeFreeSlot(dev, object->owner);
    if (!slot.ok()) return no_room();
    auto offset = payload.Allocate(object->owner, object->bytes_total);
    if (!offset.ok()) {
      FreeSlot(dev, *slot);
      return no_room();
    }
    TierMove move = MoveOf(*object, *d, Tier::kGpu, dev.arena_pages * page_bytes_ + *offset);
    move.header_offset = HeaderOffset(dev, *slot);
    const uint32_t epoch = NextEpoch(dev);
    dev.slot_epochs[*slot] = epoch;
    ObjectHeader& header = move.header;
    header.key_hash = object->key_hash;
    header.n_pages =
        static_cast<uint32_t>((move.target + move.bytes - 1) / page_bytes_ - move.target / page_bytes_ + 1);
    header.page_bytes = static_cast<uint32_t>(page_bytes_);
    header.payload_base = move.target;
    header.bytes_total = move.bytes;
    header.state = static_cast<uint32_t>(ObjectState::kReady);
    header.epoch = epoch;
    header.last_access = now_ns;
    dev.host_order.Remove(object);
    object->move = {true, Tier::kGpu, move.target, *slot, epoch};
    return move;
  }
  return std::nullopt;
}

Status ObjectIndex::CopyMove(const TierMove& move) {
  // Unlocked: devices_, the ranges and the streams are fixed after Create,
  // and what the move reads and writes is reserved until FinishMove.
  Device& device = devices_[move.d];
  auto* host = reinterpret_cast<std::byte*>(device.host->base());
  const gpu::StreamHandle stream = device.tier_stream;
  Status queued = move.to == Tier::kHost ? device.range->Read(move.from, host + move.target, move.bytes, stream)
                                         : device.range->Write(move.target, host + move.from, move.bytes, stream);
  // READY only after every byte, as a producer publishes: the stream runs
  // its copies in order.
  if (queued.ok() && move.to == Tier::kGpu) {
    queued = device.range->Write(move.header_offset, &move.header, sizeof(move.header), stream);
  }
  // Waited for even when a copy was refused: one queued before may still
  // be writing the reservation that FinishMove frees.
  Status done = backend_.SyncStream(stream);
  return queued.ok() ? done : queued;
}

bool ObjectIndex::FinishMove(const TierMove& move, const Status& copied, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  Device& device = devices_[move.d];
  Object* object = table_.Find(move.key);
  const bool ours = object != nullptr && object->device == move.d && object->epoch == move.epoch &&
                    object->move.active && object->move.to == move.to && object->move.offset == move.target;
  if (!ours) {
    // Removed (or reclaimed) mid-copy: its reservation was kept for the
    // copy, and goes now.
    for (auto it = orphans_.begin(); it != orphans_.end(); ++it) {
      if (it->d != move.d || it->to != move.to || it->offset != move.target) continue;
      Object stand_in;
      stand_in.device = it->d;
      stand_in.move = {true, it->to, it->offset, it->slot, 0};
      ReleaseMove(&stand_in);
      orphans_.erase(it);
      break;
    }
    return false;
  }
  // A reader leased the copy being moved away (the store's mid-demotion,
  // the host tier's mid-promotion: it reads there): it stays there.
  if (!copied.ok() || table_.Leased(*object, now_ns)) {
    if (!copied.ok()) spdlog::warn("object store: moving '{}': {}", object->key, copied.ToString());
    ReleaseMove(object);
    OrderOf(*object).Add(object);
    if (copied.ok() && move.to == Tier::kGpu) device.wanted.insert(object);  // once its readers are done
    return false;
  }
  // The copy moved away (and the record JournalMove gives up) stop being
  // readable without a lease before either is given on.
  WithdrawRead(*object);
  if (move.to == Tier::kHost) {
    Status freed = device.payload->Free(object->payload_offset - device.arena_pages * page_bytes_);
    if (!freed.ok()) spdlog::error("object store: {}", freed.ToString());
    FreeSlot(device, object->slot);
    object->tier = Tier::kHost;
    object->payload_offset = move.target;
    object->move = {};
    ++device.host_objects;
    ++device.demotions;
    device.host_order.Add(object);
    JournalMove(device, object);
    Notify(*object, ObjectEvent::Kind::kMoved);
  } else {
    Status freed = device.host_space->Free(object->payload_offset);
    if (!freed.ok()) spdlog::error("object store host tier: {}", freed.ToString());
    object->tier = Tier::kGpu;
    object->slot = object->move.slot;
    object->epoch = object->move.epoch;
    object->payload_offset = move.target;
    object->move = {};
    --device.host_objects;
    ++device.promotions;
    device.evictable.Add(object);
    JournalMove(device, object);
    PublishRead(*object);
    Notify(*object, ObjectEvent::Kind::kMoved);
  }
  return true;
}

size_t ObjectIndex::RunTierWork(uint64_t now_ns) {
  size_t moved = 0;
  for (size_t d = 0; d < devices_.size(); ++d) {
    const int ordinal = devices_[d].ordinal;
    if (!devices_[d].host_space) continue;
    // Bounded, so a move that keeps failing cannot hold the worker.
    for (size_t round = 0; round < 4096; ++round) {
      {
        std::lock_guard lock(mu_);
        // Under the mark, one move per refused write: the writer asks again.
        if (!OverLowWatermark(d) && !std::exchange(devices_[d].room_wanted, false)) break;
      }
      auto move = BeginDemotion(ordinal, now_ns);
      if (!move) break;
      if (!FinishMove(*move, CopyMove(*move), now_ns)) break;
      ++moved;
    }
    for (size_t round = 0; round < 4096; ++round) {
      auto move = BeginPromotion(ordinal, now_ns);
      if (!move) break;
      if (FinishMove(*move, CopyMove(*move), now_ns)) ++moved;
    }
  }
  return moved;
}

}  // namespace nanokv::kvd
