// The object store's header slots and page owners (object_index.h, "Owners"):
// each header page holds one owner's headers, a page handed out for writing
// stays its owner's while the uid it went to holds it.
#include <algorithm>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"

namespace nanokv::kvd {

uint32_t ObjectIndex::NextEpoch(Device& device) {
  if (++device.last_epoch == 0) ++device.last_epoch;  // 0 never names an object
  if (ObjectJournal* journal = table_.journal()) {
    journal->SetLastEpoch(static_cast<size_t>(&device - devices_.data()), device.last_epoch);
  }
  return device.last_epoch;
}

uint64_t ObjectIndex::HeaderOffset(const Device& device, uint32_t slot) const {
  const HeaderPage& header = device.headers[slot / device.slots_per_page];
  return uint64_t{header.page} * page_bytes_ + uint64_t{slot % device.slots_per_page} * sizeof(ObjectHeader);
}

ObjectIndex::ObjectPages ObjectIndex::PagesOf(const Device& device, const Object& object) const {
  return {HeaderOffset(device, object.slot) / page_bytes_, object.payload_offset / page_bytes_,
          (object.payload_offset + object.bytes_total - 1) / page_bytes_};
}

std::optional<uint32_t> ObjectIndex::PageOwner(const Device& device, uint64_t index) const {
  if (auto header = device.header_at.find(static_cast<uint32_t>(index)); header != device.header_at.end()) {
    const HeaderPage& page = device.headers[header->second];
    return page.owned ? std::optional<uint32_t>(page.owner) : std::nullopt;
  }
  if (index < device.arena_pages) return std::nullopt;
  return device.payload->PageOwner(index - device.arena_pages);
}

Result<uint32_t> ObjectIndex::AdoptHeaderPage(Device& device, uint32_t owner) {
  uint32_t ordinal = 0;
  if (!device.spare_headers.empty()) {
    ordinal = device.spare_headers.back();
    device.spare_headers.pop_back();
  } else {
    // A payload page becomes a header page, for good. Its bytes are
    // whatever objects left there, and a producer's first CAS on a slot
    // needs an older epoch than its plan's: kvd writes every slot free at
    // the epoch last issued (device work while serving, once per page).
    NANOKV_ASSIGN_OR_RETURN(uint64_t offset, device.payload->TakePage());
    const auto page = static_cast<uint32_t>(device.arena_pages + offset / page_bytes_);
    std::vector<ObjectHeader> fresh(page_bytes_ / sizeof(ObjectHeader), ObjectHeader{});
    for (ObjectHeader& header : fresh) header.epoch = device.last_epoch;
    Status written = device.range->Write(uint64_t{page} * page_bytes_, fresh.data(), page_bytes_);
    if (!written.ok()) {
      spdlog::error("object store: making page {} of device {} a header page: {}", page, device.ordinal,
                    written.ToString());
      return written;  // the page stays out of the payload space: lost room, never a bad header
    }
    ordinal = static_cast<uint32_t>(device.headers.size());
    HeaderPage header;
    header.page = page;
    for (uint32_t s = device.slots_per_page; s > 0; --s) header.free.push_back(s - 1);
    device.headers.push_back(std::move(header));
    device.header_at[page] = ordinal;
    device.slot_epochs.resize(device.slot_epochs.size() + device.slots_per_page, 0);
    if (ObjectJournal* journal = table_.journal()) {
      journal->SetHeaderPage(static_cast<size_t>(&device - devices_.data()), ordinal, page);
    }
    spdlog::info("object store: device {} page {} is a header page now ({} in all), for {}", device.ordinal, page,
                 device.headers.size(), OwnerName(owner));
  }
  HeaderPage& header = device.headers[ordinal];
  header.owned = true;
  header.owner = owner;
  device.header_room[owner].insert(ordinal);
  return ordinal;
}

Result<uint32_t> ObjectIndex::TakeFreeSlot(Device& device, uint32_t owner) {
  auto room = device.header_room.find(owner);
  auto ordinal =
      room != device.header_room.end() ? Result<uint32_t>(*room->second.begin()) : AdoptHeaderPage(device, owner);
  if (!ordinal.ok()) {
    return Status::ResourceExhausted(
        "no header page for " + OwnerName(owner) +
        "'s objects (header pages hold one owner's each): " + std::string(ordinal.status().message()));
  }
  HeaderPage& header = device.headers[*ordinal];
  const uint32_t slot = *ordinal * device.slots_per_page + header.free.back();
  header.free.pop_back();
  ++header.live;
  if (header.free.empty()) {
    auto& mine = device.header_room[owner];
    mine.erase(*ordinal);
    if (mine.empty()) device.header_room.erase(owner);
  }
  return slot;
}

Result<uint32_t> ObjectIndex::AllocateSlot(size_t d, uint32_t owner, uint64_t now_ns) {
  Device& device = devices_[d];
  for (;;) {
    Status short_of;
    if (device.objects + device.slab_slots >= device.max_objects) {
      short_of = Status::ResourceExhausted("all " + std::to_string(device.max_objects) +
                                           " header slots in use (object_store.max_objects)");
    } else {
      auto slot = TakeFreeSlot(device, owner);
      if (slot.ok()) return slot;
      short_of = slot.status();
    }
    // Out of slots, the host tier's victim goes first (it holds a journal
    // record, so it counts); it frees no page, so not for a header page.
    const bool slots_full = device.objects + device.slab_slots >= device.max_objects;
    if (!(slots_full && EvictHostOne(d, now_ns)) && !EvictOne(d, now_ns)) {
      return Status::ResourceExhausted("object store on device " + std::to_string(device.ordinal) + ": " +
                                       std::string(short_of.message()) + ", and nothing evictable");
    }
  }
}

void ObjectIndex::FreeSlot(Device& device, uint32_t slot) {
  const uint32_t ordinal = slot / device.slots_per_page;
  HeaderPage& header = device.headers[ordinal];
  header.free.push_back(slot % device.slots_per_page);
  --header.live;
  if (header.free.size() == 1) device.header_room[header.owner].insert(ordinal);
  MaybeSpareHeader(device, ordinal);
}

void ObjectIndex::MaybeSpareHeader(Device& device, uint32_t ordinal) {
  HeaderPage& header = device.headers[ordinal];
  if (!header.owned || header.live != 0 || header.holds != 0) return;
  auto room = device.header_room.find(header.owner);
  if (room != device.header_room.end()) {
    room->second.erase(ordinal);
    if (room->second.empty()) device.header_room.erase(room);
  }
  header.owned = false;
  device.spare_headers.push_back(ordinal);
}

Status ObjectIndex::LendWritablePage(int device, PageId id, const WriteClaim& claim) {
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  std::lock_guard lock(mu_);
  Device& dev = devices_[d];
  const std::vector<PageId>& pages_in_range = dev.range->pages();
  auto at = std::find(pages_in_range.begin(), pages_in_range.end(), id);
  const std::string plan = "'" + std::string(claim.key.substr(0, 80)) + "' (epoch " + std::to_string(claim.epoch) + ")";
  auto refuse = [&](const std::string& why) {
    return Status::PermissionDenied("page " + std::to_string(id) + " of device " + std::to_string(device) + " " +
                                    why + ": store pages are written only by a plan's writer, through its own " +
                                    "open plan's pages (readers get read-only fds)");
  };
  if (at == pages_in_range.end()) return refuse("is not a store page");
  const auto index = static_cast<uint64_t>(at - pages_in_range.begin());
  if (claim.slab_id != 0) return LendSlabPageLocked(d, index, claim);
  const std::optional<uint32_t> owner = PageOwner(dev, index);
  const std::string whose = owner ? " (it is " + OwnerName(*owner) + "'s)" : std::string();
  const Object* object = table_.Find(claim.key);
  if (object == nullptr || object->device != d || object->epoch != claim.epoch ||
      (object->state != ObjectState::kReserved && object->state != ObjectState::kWriting)) {
    return refuse("is lent for no plan " + plan + ": none is open on this device" + whose);
  }
  // The writer only: a write fd maps the whole page, and the page holds its
  // owner's other objects, READY ones included (an epoch is in every listing
  // and proves nothing).
  const bool writer = object->owner == kOperator
                          ? object->write_secret != 0 && claim.secret == object->write_secret  // 0: a restored write's
                          : claim.uid == object->owner;
  if (!writer) {
    return refuse(object->owner == kOperator
                      ? "is lent only to the writer of plan " + plan +
                            ", who shows the write secret the master's plan carries"
                      : "is lent only to plan " + plan + "'s writer, " + OwnerName(object->owner) + ", not uid " +
                            std::to_string(claim.uid));
  }
  const ObjectPages pages = PagesOf(dev, *object);
  if (index != pages.header && (index < pages.first || index > pages.last)) {
    return refuse("is not a page of plan " + plan + whose);
  }
  if (!holds_[claim.uid].insert({d, index}).second) return Status::OK();  // held already
  if (auto header = dev.header_at.find(static_cast<uint32_t>(index)); header != dev.header_at.end()) {
    ++dev.headers[header->second].holds;
    return Status::OK();
  }
  return dev.payload->Hold(index - dev.arena_pages);
}

void ObjectIndex::ReleaseHolder(uint32_t holder) {
  std::lock_guard lock(mu_);
  auto held = holds_.find(holder);
  if (held == holds_.end()) return;
  for (const auto& [d, index] : held->second) {
    Device& dev = devices_[d];
    if (auto header = dev.header_at.find(static_cast<uint32_t>(index)); header != dev.header_at.end()) {
      --dev.headers[header->second].holds;
      MaybeSpareHeader(dev, header->second);
    } else {
      dev.payload->Unhold(index - dev.arena_pages);
    }
  }
  spdlog::debug("object store: {} held {} page(s), no longer", OwnerName(holder), held->second.size());
  holds_.erase(held);
}

size_t ObjectIndex::held_pages(uint32_t holder) const {
  std::lock_guard lock(mu_);
  auto held = holds_.find(holder);
  return held == holds_.end() ? 0 : held->second.size();
}

Status ObjectIndex::CheckOwner(const Device& device, const Object& object) const {
  const ObjectPages pages = PagesOf(device, object);
  for (uint64_t index = pages.first; index <= pages.last + 1; ++index) {
    const uint64_t page = index == pages.last + 1 ? pages.header : index;
    if (PageOwner(device, page) != std::optional<uint32_t>(object.owner)) {
      return Status::Internal("object store: '" + object.key + "' of " + OwnerName(object.owner) + " has store page " +
                              std::to_string(page) + ", which is not its owner's");
    }
  }
  return Status::OK();
}

Status ObjectIndex::CheckHeaderPages(size_t d) const {
  const Device& device = devices_[d];
  std::vector<uint32_t> live(device.headers.size(), 0), holds(device.headers.size(), 0);
  for (const auto& [key, object] : table_.objects()) {
    if (object.device != d) continue;
    if (object.tier == Tier::kGpu) ++live[object.slot / device.slots_per_page];
    if (object.move.active && object.move.to == Tier::kGpu) ++live[object.move.slot / device.slots_per_page];
  }
  for (const Orphan& orphan : orphans_) {
    if (orphan.d == d && orphan.to == Tier::kGpu) ++live[orphan.slot / device.slots_per_page];
  }
  for (const auto& [id, slab] : slabs_.all()) {
    if (slab->d == d) live[slab->first_slot / device.slots_per_page] += slab->slots_left;
  }
  for (const auto& [holder, pages] : holds_) {
    for (const auto& [held_d, index] : pages) {
      if (held_d != d) continue;
      if (auto header = device.header_at.find(static_cast<uint32_t>(index)); header != device.header_at.end()) {
        ++holds[header->second];
      } else if (!PageOwner(device, index)) {
        return Status::Internal("object store: store page " + std::to_string(index) + " is held by " + OwnerName(holder) +
                                " but owned by nobody");
      }
    }
  }
  size_t spare = 0;
  for (uint32_t ordinal = 0; ordinal < device.headers.size(); ++ordinal) {
    const HeaderPage& header = device.headers[ordinal];
    std::string where = "object store: header page " + std::to_string(header.page) + ": ";
    if (header.live != live[ordinal] || header.holds != holds[ordinal] ||
        header.free.size() + header.live != device.slots_per_page) {
      return Status::Internal(where + "its live, held or free count drifted");
    }
    if (header.owned != (header.live != 0 || header.holds != 0)) {
      return Status::Internal(where + (header.owned ? "owned but empty and not held" : "in use but owned by nobody"));
    }
    auto room = header.owned ? device.header_room.find(header.owner) : device.header_room.end();
    const bool listed = room != device.header_room.end() && room->second.contains(ordinal);
    if (header.owned && listed != !header.free.empty()) return Status::Internal(where + "room list disagrees");
    if (!header.owned) ++spare;
  }
  if (spare != device.spare_headers.size()) return Status::Internal("object store: spare header list drifted");
  return Status::OK();
}

}  // namespace nanokv::kvd
