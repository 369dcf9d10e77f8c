// The host tier under each device's store (object_index.h, "The host
// tier"): demotion of the store's eviction victims, promotion of what gets
// ask for, eviction from the host tier by dropping, and the tiers' share of
// the invariant check.
#include <fcntl.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

Status CheckHostTier(const ObjectStoreConfig& config, int devices) {
  if (config.host_tier == 0) return Status::OK();
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return Status::OK();  // cannot tell: the commit at start still fails cleanly
  const uint64_t memory = uint64_t{info.totalram} * info.mem_unit;
  const uint64_t asked = config.host_tier * static_cast<uint64_t>(devices > 0 ? devices : 1);
  if (config.host_tier > memory || asked > memory) {
    return Status::InvalidArgument("object_store.host_tier: " + std::to_string(config.host_tier) +
                                   " bytes per device x " + std::to_string(devices) +
                                   " device(s) is more than this machine's memory (" + std::to_string(memory) +
                                   " bytes)");
  }
  return Status::OK();
}

Result<bool> ObjectIndex::AddHostTier(Device& device, const JournaledStore* previous, StoreRestart* restart) {
  const uint64_t pages = config_.host_tier / page_bytes_;
  if (pages == 0) {
    return Status::InvalidArgument("object_store.host_tier: " + std::to_string(config_.host_tier) +
                                   " bytes is less than one page (" + std::to_string(page_bytes_) + ")");
  }
  std::map<uint32_t, int> given;
  if (restart != nullptr) given.swap(restart->host_pages[device.ordinal]);
  bool back = false;
  if (previous != nullptr && previous->host_pages != 0) {
    // The previous host tier only whole and of the same size: its records
    // name offsets in it.
    const bool all = given.size() == pages && given.rbegin()->first == pages - 1;
    if (previous->host_pages != pages) {
      spdlog::warn(
          "object store: device {}: object_store.host_tier changed ({} pages before the restart, {} now): "
          "the previous host tier's objects are dropped",
          device.ordinal, previous->host_pages, pages);
    } else if (!all) {
      spdlog::warn(
          "object store: device {}: {} of the previous host tier's {} pages came back: its objects are "
          "dropped",
          device.ordinal, given.size(), pages);
    } else {
      std::vector<int> fds;
      for (auto& [id, fd] : given) fds.push_back(std::exchange(fd, -1));
      auto adopted = HostRange::Adopt(backend_, device.ordinal, std::move(fds), page_bytes_);
      if (adopted.ok()) {
        device.host = std::move(adopted).value();
        back = true;
      } else {
        spdlog::warn("object store: device {}: the previous host tier is dropped: {}", device.ordinal,
                     adopted.status().ToString());
      }
    }
  }
  for (auto& [id, fd] : given) {
    if (fd >= 0) close(fd);  // not adopted: their memory goes
  }
  if (!back) {
    NANOKV_ASSIGN_OR_RETURN(device.host,
                            HostRange::Create(backend_, device.ordinal, static_cast<uint32_t>(pages), page_bytes_));
  }
  NANOKV_ASSIGN_OR_RETURN(auto space, OwnedSpace::Create(pages * page_bytes_, page_bytes_, kPayloadAlignment));
  device.host_space.emplace(std::move(space));
  NANOKV_ASSIGN_OR_RETURN(device.tier_stream, backend_.CreateStream(device.ordinal));
  device.host_order = EvictionOrder(config_.policy);
  spdlog::info("object store: device {}: a host tier of {} pages under the store{}", device.ordinal, pages,
               back ? ", the previous kvd's" : "");
  return back;
}

std::vector<std::tuple<int, PageId, int>> ObjectIndex::HostTierPages() const {
  std::lock_guard lock(mu_);
  std::vector<std::tuple<int, PageId, int>> out;
  for (const Device& device : devices_) {
    if (device.host == nullptr) continue;
    for (PageId id : device.host->pages()) out.emplace_back(device.ordinal, id, device.host->PageFd(id));
  }
  return out;
}

ObjectPlan ObjectIndex::HostPlanOf(const Object& object) const {
  const Device& device = devices_[object.device];
  ObjectPlan plan;
  plan.key = object.key;
  plan.key_hash = object.key_hash;
  plan.device = device.ordinal;
  plan.tier = ObjectTier::kHost;
  plan.payload_offset = object.payload_offset;
  plan.page_bytes = page_bytes_;
  plan.bytes_total = object.bytes_total;
  plan.epoch = object.epoch;
  plan.state = object.state;
  plan.store_bytes = device.host->bytes();
  const std::vector<PageId>& pages = device.host->pages();
  uint64_t at = object.payload_offset, left = object.bytes_total;
  while (left > 0) {
    const uint64_t in_page = at % page_bytes_;
    const uint64_t take = std::min<uint64_t>(left, page_bytes_ - in_page);
    plan.spans.push_back({pages[at / page_bytes_], static_cast<uint32_t>(in_page), static_cast<uint32_t>(take)});
    at += take;
    left -= take;
  }
  plan.n_pages = static_cast<uint32_t>(plan.spans.size());
  return plan;
}

Result<int> ObjectIndex::HostTierReadOnlyFd(int device, PageId id) const {
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  // devices_ and the host ranges are fixed after Create: no lock needed.
  const HostRange* host = devices_[d].host.get();
  const int fd = host != nullptr ? host->PageFd(id) : -1;
  if (fd < 0) {
    return Status::NotFound("page " + std::to_string(id) + " of device " + std::to_string(device) +
                            " is not a host tier page");
  }
  // A new open file description that reads only: the reader cannot map the
  // page writable, whatever it does with the fd.
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const int read_only = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (read_only < 0)
    return Status::Internal("opening host tier page " + std::to_string(id) + " read-only: " + std::strerror(errno));
  return read_only;
}

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

void ObjectIndex::SetTierKick(std::function<void()> kick) {
  std::lock_guard lock(mu_);
  tier_kick_ = std::move(kick);
}

EvictionOrder& ObjectIndex::OrderOf(const Object& object) {
  Device& device = devices_[object.device];
  return object.tier == Tier::kHost ? device.host_order : device.evictable;
}

bool ObjectIndex::EvictHostOne(size_t d, uint64_t now_ns) {
  Device& device = devices_[d];
  if (!device.host_space) return false;
  Object* victim = device.host_order.PickVictim([&](Object& object) { return table_.Leased(object, now_ns); });
  if (victim == nullptr) return false;
  Kill(victim, ObjectEvent::Kind::kEvicted);
  ++device.host_evictions;
  return true;
}

Result<uint64_t> ObjectIndex::AllocateHost(size_t d, uint64_t bytes, uint32_t /*owner*/, uint64_t now_ns) {
  OwnedSpace& space = *devices_[d].host_space;
  if (bytes > space.capacity()) {
    return Status::ResourceExhausted("object of " + std::to_string(bytes) + " bytes: the host tier holds " +
                                     std::to_string(space.capacity()));
  }
  for (;;) {
    // One owner for the host tier: nobody writes it but kvd, so its pages
    // need not be split by writer.
    auto offset = space.Allocate(kOperator, bytes);
    if (offset.ok() || offset.status().code() != Code::kResourceExhausted) return offset;
    if (!EvictHostOne(d, now_ns)) return offset.status();
  }
}

Result<uint64_t> ObjectIndex::AllocateOverHostTier(size_t d, uint64_t bytes, uint32_t owner, uint64_t now_ns) {
  Device& device = devices_[d];
  auto offset = device.payload->Allocate(owner, bytes);
  if (offset.ok()) return device.arena_pages * page_bytes_ + *offset;
  if (offset.status().code() != Code::kResourceExhausted) return offset.status();
  const bool can_move = device.evictable.PickVictim([&](Object& o) { return table_.Leased(o, now_ns); }) != nullptr;
  device.room_wanted = can_move;
  if (tier_kick_) tier_kick_();
  if (can_move) {
    return Status::Unavailable("object store on device " + std::to_string(device.ordinal) + ": no room for " +
                               std::to_string(bytes) +
                               " bytes while its tier worker moves objects to the host "
                               "tier; ask again");
  }
  return Status::ResourceExhausted("object store on device " + std::to_string(device.ordinal) + ": no room for " +
                                   std::to_string(bytes) +
                                   " bytes and nothing to move to the host tier (leased, "
                                   "pinned, moving or being written): " +
                                   std::string(offset.status().message()));
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

bool ObjectIndex::OverLowWatermark(size_t d) const {
  const OwnedSpace& payload = *devices_[d].payload;
  return payload.allocated_bytes() >
         static_cast<uint64_t>(config_.low_watermark * static_cast<double>(payload.capacity()));
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
  TierMove move;
  move.key = victim->key;
  move.d = *d;
  move.epoch = victim->epoch;
  move.to = Tier::kHost;
  move.from = victim->payload_offset;
  move.target = *target;
  move.bytes = victim->bytes_total;
  return move;
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
    TierMove move;
    move.key = object->key;
    move.d = *d;
    move.epoch = object->epoch;
    move.to = Tier::kGpu;
    move.from = object->payload_offset;
    move.target = dev.arena_pages * page_bytes_ + *offset;
    move.bytes = object->bytes_total;
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

Status ObjectIndex::CheckTiers(const Object& object, std::vector<bool>& slot_used, uint64_t& allocated,
                               TierCounts& tiers) const {
  const Device& device = devices_[object.device];
  const std::string where = "object store: '" + object.key + "': ";
  if (!device.host_space) return Status::Internal(where + "in or moving to a host tier its device has not");
  if (object.move.active && object.move.to == object.tier) return Status::Internal(where + "moving to its own tier");
  if (object.move.active && object.move.to == Tier::kHost) {
    const uint64_t length = device.host_space->LengthAt(object.move.offset);
    if (length < object.bytes_total) return Status::Internal(where + "its demotion's host space is missing or short");
    tiers.host_allocated[object.device] += length;
  }
  if (object.move.active && object.move.to == Tier::kGpu) {
    const uint64_t length = device.payload->LengthAt(object.move.offset - device.arena_pages * page_bytes_);
    if (length < object.bytes_total) return Status::Internal(where + "its promotion's store space is missing or short");
    if (object.move.slot >= slot_used.size() || slot_used[object.move.slot]) {
      return Status::Internal(where + "its promotion's header slot is out of range or shared");
    }
    slot_used[object.move.slot] = true;
    allocated += length;
  }
  if (object.tier != Tier::kHost) return Status::OK();
  if (object.state != ObjectState::kReady) return Status::Internal(where + "in the host tier but not READY");
  const uint64_t length = device.host_space->LengthAt(object.payload_offset);
  if (length < object.bytes_total) return Status::Internal(where + "host tier range missing or short");
  if (device.host_order.Contains(object) == object.move.active) {
    return Status::Internal(where + "the host tier's eviction order disagrees with its move");
  }
  tiers.host_allocated[object.device] += length;
  tiers.host_candidates[object.device] += object.move.active ? 0 : 1;
  ++tiers.host_objects[object.device];
  return Status::OK();
}

Status ObjectIndex::CheckHostSpace(size_t d, const TierCounts& tiers) const {
  const Device& device = devices_[d];
  if (!device.host_space) return Status::OK();
  const std::string where = "object store device " + std::to_string(device.ordinal) + " host tier: ";
  NANOKV_RETURN_IF_ERROR(device.host_space->CheckInvariants());
  uint64_t orphaned = 0;
  for (const Orphan& orphan : orphans_) {
    if (orphan.d == d && orphan.to == Tier::kHost) orphaned += device.host_space->LengthAt(orphan.offset);
  }
  if (tiers.host_allocated[d] + orphaned != device.host_space->allocated_bytes()) {
    return Status::Internal(where + "allocator holds " + std::to_string(device.host_space->allocated_bytes()) +
                            " bytes, objects " + std::to_string(tiers.host_allocated[d]));
  }
  if (tiers.host_candidates[d] != device.host_order.size() || tiers.host_objects[d] != device.host_objects) {
    return Status::Internal(where + "object count or eviction order drifted");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
