// The object store across a kvd restart: the object
// journal it keeps while it serves, and a new store rebuilt from a dead
// kvd's journal and pages (object_index.h, Create; object_recovery.h).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"
#include "daemon/objects/object_recovery.h"

namespace nanokv::kvd {

std::vector<std::pair<int, PageId>> ObjectIndex::StorePages() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<int, PageId>> out;
  for (const Device& device : devices_) {
    for (PageId id : device.range->pages()) out.emplace_back(device.ordinal, id);
  }
  return out;
}

Status ObjectIndex::StartJournal(const std::string& path) {
  std::lock_guard lock(mu_);
  std::vector<ObjectJournal::Layout> layouts;
  for (const Device& device : devices_) {
    ObjectJournal::Layout layout;
    layout.device = device.ordinal;
    layout.pages.assign(device.range->pages().begin(), device.range->pages().end());
    layout.arena_pages = device.arena_pages;
    layout.slots_per_page = device.slots_per_page;
    layout.max_objects = device.max_objects;
    layout.host_pages = device.host != nullptr ? static_cast<uint32_t>(device.host->pages().size()) : 0;
    layouts.push_back(std::move(layout));
  }
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<ObjectJournal> journal, ObjectJournal::Create(path, page_bytes_, layouts));
  for (size_t d = 0; d < devices_.size(); ++d) {
    const Device& device = devices_[d];
    for (uint32_t h = device.arena_pages; h < device.headers.size(); ++h) {
      journal->SetHeaderPage(d, h, device.headers[h].page);
    }
    journal->SetLastEpoch(d, device.last_epoch);
  }
  table_.InstallJournal(std::move(journal));
  for (const auto& [key, object] : table_.objects()) table_.Journal(object);
  Status installed = table_.journal()->Install();
  if (!installed.ok()) table_.InstallJournal(nullptr);  // unlinks the private file
  return installed;
}

Result<bool> ObjectIndex::TakePages(Device& device, uint32_t pages, std::vector<PageId>& taken,
                                    const JournaledStore* previous, StoreRestart* restart) {
  std::vector<AdoptPage> none;
  std::vector<AdoptPage>& given = restart != nullptr ? restart->pages[device.ordinal] : none;
  const bool same = previous != nullptr && restart->previous.page_bytes == page_bytes_ &&
                    previous->pages.size() == pages && previous->arena_pages == device.arena_pages &&
                    previous->slots_per_page == device.slots_per_page &&
                    previous->max_objects == device.max_objects;
  if (previous != nullptr && !same) {
    spdlog::warn("object store: device {}: the previous kvd's store had another geometry (pages, "
                 "object_store.max_objects or page size changed): its {} objects are not recovered",
                 device.ordinal, previous->objects.size());
  } else if (previous == nullptr && !given.empty()) {
    spdlog::warn("object store: device {}: {} pages of the previous kvd's store came back without its object "
                 "journal: its objects are not recovered", device.ordinal, given.size());
  }
  if (!given.empty()) {
    // Pages back are memory already held: the new store takes them (as its
    // old layout, or as plain pages, at most its share; the rest wait out the
    // recovery window) rather than granting others beside them.
    const size_t take = same ? given.size() : std::min<size_t>(given.size(), pages);
    auto adopted = node_.Adopt(tenant_, device.ordinal, std::span<const AdoptPage>(given.data(), take), 0);
    for (size_t i = 0; i < take; ++i) given[i].fd = -1;  // Adopt took them
    std::vector<PageId> back = adopted.ok() ? adopted->adopted : std::vector<PageId>{};
    std::sort(back.begin(), back.end());
    if (same) {
      bool all = back.size() == previous->pages.size();
      for (uint32_t id : previous->pages) all = all && std::binary_search(back.begin(), back.end(), id);
      if (all) {
        taken.assign(previous->pages.begin(), previous->pages.end());
        return true;
      }
    }
    if (same || !adopted.ok()) {
      spdlog::warn("object store: device {}: {} of the previous store's {} pages came back ({}): its objects "
                   "are not recovered",
                   device.ordinal, back.size(), previous != nullptr ? previous->pages.size() : given.size(),
                   adopted.ok() ? adopted->reason : adopted.status().ToString());
    }
    taken.assign(back.begin(), back.end());  // plain pages of the new store
  } else if (same && !previous->pages.empty()) {
    spdlog::warn("object store: device {}: none of the previous store's {} pages came back: its {} objects "
                 "are not recovered", device.ordinal, previous->pages.size(), previous->objects.size());
  }
  const auto more = static_cast<uint32_t>(pages > taken.size() ? pages - taken.size() : 0);
  if (more > 0) {
    auto granted = node_.Grant(tenant_, device.ordinal, more, 0);
    if (!granted.ok()) {
      return Status(granted.status().code(), "object store share of device " + std::to_string(device.ordinal) +
                                                 ": " + std::string(granted.status().message()));
    }
    for (const PageGrant& g : *granted) taken.push_back(g.id);
  }
  return false;
}

bool ObjectIndex::RestoreObject(size_t d, const JournaledObject& found, bool ready, uint64_t now_ns,
                                uint64_t deadline_ns) {
  Device& device = devices_[d];
  const uint64_t arena_bytes = uint64_t{device.arena_pages} * page_bytes_;
  const bool host = found.tier == Tier::kHost;
  // The host tier has one owner (object_index_tier.cc, AllocateHost).
  Status claimed = host ? device.host_space->Claim(kOperator, found.payload_offset, found.bytes_total)
                        : device.payload->Claim(found.owner, found.payload_offset - arena_bytes, found.bytes_total);
  if (!claimed.ok()) {
    spdlog::warn("object store: device {}: '{}' not recovered: {}", device.ordinal, found.key, claimed.ToString());
    return false;
  }
  Object object;
  object.key = found.key;
  object.key_hash = KeyHash(found.key);
  object.device = d;
  object.slot = found.slot;
  object.payload_offset = found.payload_offset;
  object.bytes_total = found.bytes_total;
  object.state = ready ? ObjectState::kReady : ObjectState::kWriting;
  object.epoch = found.epoch;
  object.seq = found.seq;
  object.created_ns = now_ns;
  object.last_access_ns = now_ns;
  object.deadline_ns = deadline_ns;
  object.pin = found.pin;
  object.owner = found.owner;
  object.restored_write = !ready;
  object.tier = found.tier;
  object.record = device.free_records.back();
  device.free_records.pop_back();
  if (!host) device.slot_epochs[object.slot] = object.epoch;
  table_.SeenSeq(found.seq);
  Object* live = table_.Insert(std::move(object));
  if (host) {
    device.host_order.Add(live);
    ++device.host_objects;
  } else if (ready) {
    device.evictable.Add(live);
  } else {
    device.writing.insert({live->deadline_ns, live});
  }
  ++device.objects;
  return true;
}

Status ObjectIndex::Restore(size_t d, const JournaledStore& previous, uint64_t now_ns, bool host_back) {
  Device& device = devices_[d];
  // The header pages, as the producers left them: one copy each, at start.
  std::vector<std::vector<std::byte>> copies(previous.header_pages.size());
  for (size_t h = 0; h < copies.size(); ++h) {
    copies[h].resize(page_bytes_);
    Status read = device.range->Read(uint64_t{previous.header_pages[h]} * page_bytes_, copies[h].data(), page_bytes_);
    if (!read.ok()) {
      spdlog::warn("object store: device {}: reading header page {}: {}", device.ordinal, h, read.ToString());
      copies[h].clear();  // its objects are not vouched for
    }
  }
  const RecoveredStore found = ScanStore(previous, page_bytes_, copies, host_back);
  // The header pages past the arena are header pages again, under the same
  // ordinals: records name their slots by them.
  for (size_t h = device.arena_pages; h < previous.header_pages.size(); ++h) {
    const uint32_t page = previous.header_pages[h];
    NANOKV_RETURN_IF_ERROR(device.payload->TakePageAt(page - device.arena_pages));
    HeaderPage header;
    header.page = page;
    device.headers.push_back(std::move(header));
    device.header_at[page] = static_cast<uint32_t>(h);
    device.slot_epochs.resize(device.slot_epochs.size() + device.slots_per_page, 0);
  }
  device.last_epoch = found.last_epoch;
  const uint64_t deadline = now_ns + static_cast<uint64_t>(config_.write_timeout.count()) * 1'000'000;
  uint32_t refused = found.reclaimed;
  std::vector<bool> ready_slot(device.headers.size() * uint64_t{device.slots_per_page}, false);
  std::vector<bool> live_slot(ready_slot.size(), false);
  std::vector<std::optional<uint32_t>> owner(device.headers.size());
  for (const bool ready : {true, false}) {
    for (const JournaledObject& object : ready ? found.objects : found.writes) {
      if (!RestoreObject(d, object, ready, now_ns, deadline)) {
        ++refused;
        continue;
      }
      if (object.tier == Tier::kHost) continue;  // no header slot
      ready_slot[object.slot] = ready;
      live_slot[object.slot] = true;
      owner[object.slot / device.slots_per_page] = object.owner;
    }
  }
  // Each header page: its free slots, owner and room; every slot not holding
  // a READY object written {FREE, last epoch}, so the next producer's CAS
  // there finds an older epoch than its plan's, and a producer of a write
  // cut by the kill (its plan older) cannot begin or commit there any more.
  device.spare_headers.clear();
  for (uint32_t h = static_cast<uint32_t>(device.headers.size()); h > 0; --h) {
    const uint32_t ordinal = h - 1;
    HeaderPage& header = device.headers[ordinal];
    header.free.clear();
    header.live = 0;
    std::vector<std::byte> page = copies[ordinal].size() == page_bytes_ ? copies[ordinal]
                                                                         : std::vector<std::byte>(page_bytes_);
    for (uint32_t s = device.slots_per_page; s > 0; --s) {
      const uint32_t slot = ordinal * device.slots_per_page + (s - 1);
      if (live_slot[slot]) {
        ++header.live;
      } else {
        header.free.push_back(s - 1);
      }
      if (!ready_slot[slot]) {
        ObjectHeader fresh{};
        fresh.epoch = device.last_epoch;
        std::memcpy(page.data() + uint64_t{s - 1} * sizeof(ObjectHeader), &fresh, sizeof(fresh));
      }
    }
    NANOKV_RETURN_IF_ERROR(device.range->Write(uint64_t{header.page} * page_bytes_, page.data(), page_bytes_));
    header.owned = owner[ordinal].has_value();
    if (header.owned) {
      header.owner = *owner[ordinal];
      if (!header.free.empty()) device.header_room[header.owner].insert(ordinal);
    } else {
      device.spare_headers.push_back(ordinal);  // ordinal 0 last: first out
    }
  }
  device.recovered_objects = static_cast<uint32_t>(found.objects.size());
  device.recovered_bytes = found.bytes;
  device.recovered_writes = static_cast<uint32_t>(found.writes.size());
  device.refused_records = refused;
  const auto in_host = std::count_if(found.objects.begin(), found.objects.end(),
                                     [](const JournaledObject& o) { return o.tier == Tier::kHost; });
  spdlog::info(
      "object store: device {}: recovered {} objects ({} bytes; {} in the host tier), reclaimed {} ({} "
      "writes cut by the restart held until write_timeout, {} refused now)",
      device.ordinal, found.objects.size(), found.bytes, in_host, found.writes.size() + refused, found.writes.size(),
      refused);
  for (const std::string& why : found.reasons) spdlog::info("object store: device {}: {}", device.ordinal, why);
  if (found.host_dropped > 0) {
    std::string keys;
    for (const std::string& key : found.dropped) keys += (keys.empty() ? "'" : ", '") + key + "'";
    spdlog::warn(
        "object store: device {}: {} objects of the previous kvd's host tier are dropped, its host tier "
        "not having come back whole (object_store.host_tier changed, or its pages were lost): {}{}",
        device.ordinal, found.host_dropped, keys, found.host_dropped > found.dropped.size() ? ", ..." : "");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
