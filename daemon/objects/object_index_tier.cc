// The host tier under each device's store (object_index.h, "The host
// tier"): its memory and the plans and fds of what is in it, room in it
// and in the store over it, eviction from it by dropping, and the tiers'
// share of the invariant check. Moves between the tiers (demotion,
// promotion, the tier worker's round) are object_index_moves.cc's.
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

bool ObjectIndex::OverLowWatermark(size_t d) const {
  const OwnedSpace& payload = *devices_[d].payload;
  return payload.allocated_bytes() >
         static_cast<uint64_t>(config_.low_watermark * static_cast<double>(payload.capacity()));
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
