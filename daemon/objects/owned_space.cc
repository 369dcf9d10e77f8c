#include "daemon/objects/owned_space.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace nanokv::kvd {

std::string OwnerName(uint32_t owner) {
  return owner == kKvdCallers ? std::string("kvd's own callers") : "uid " + std::to_string(owner);
}

Result<OwnedSpace> OwnedSpace::Create(uint64_t capacity, uint64_t page_bytes, uint64_t alignment) {
  if (page_bytes == 0 || alignment == 0 || (alignment & (alignment - 1)) != 0 || page_bytes % alignment != 0) {
    return Status::InvalidArgument("owned space: alignment " + std::to_string(alignment) +
                                   " is not a power of two dividing the page (" + std::to_string(page_bytes) + ")");
  }
  capacity -= capacity % page_bytes;
  if (capacity == 0) return Status::InvalidArgument("owned space: capacity under one page");
  OwnedSpace space(capacity, page_bytes, alignment);
  NANOKV_ASSIGN_OR_RETURN(OffsetAllocator pages, OffsetAllocator::Create(capacity, page_bytes));
  space.pages_.emplace(std::move(pages));
  return space;
}

OwnedSpace::OwnedSpace(uint64_t capacity, uint64_t page_bytes, uint64_t alignment)
    : capacity_(capacity), page_bytes_(page_bytes), alignment_(alignment), page_(capacity / page_bytes) {}

std::vector<uint64_t> OwnedSpace::Touch(uint64_t offset, uint64_t length, int delta) {
  std::vector<uint64_t> idle;
  for (uint64_t p = offset / page_bytes_; p <= (offset + length - 1) / page_bytes_; ++p) {
    if (delta > 0 && page_[p].live == 0) Unidle(p);
    page_[p].live = static_cast<uint32_t>(static_cast<int64_t>(page_[p].live) + delta);
    if (page_[p].live == 0) idle.push_back(p);
  }
  return idle;
}

Result<uint64_t> OwnedSpace::Allocate(uint32_t owner, uint64_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("owned space: allocation of 0 bytes");
  Arena& arena = arenas_[owner];
  if (!arena.space) {
    NANOKV_ASSIGN_OR_RETURN(OffsetAllocator space, OffsetAllocator::CreateEmpty(capacity_, alignment_));
    arena.space.emplace(std::move(space));
  }
  auto offset = arena.space->Allocate(bytes);
  if (offset.ok()) {
    Record(owner, *offset, arena.space->LengthAt(*offset));
    return *offset;
  }
  auto placed = Grow(owner, bytes);
  if (!placed.ok() && idle_.size() > arena.idle) {
    // Other owners' empty pages nobody holds are free for anyone: they go
    // back to the pool only now, when this owner cannot be served otherwise.
    ReclaimIdle(owner);
    placed = Grow(owner, bytes);
  }
  if (!placed.ok() && arenas_[owner].pages == 0) arenas_.erase(owner);
  return placed;
}

Result<uint64_t> OwnedSpace::Grow(uint32_t owner, uint64_t bytes) {
  Arena& arena = arenas_[owner];
  // None of its pages has a hole that fits. First grow one of its largest
  // holes that ends (or starts) at a page edge by the free pages next to
  // it. Else a run of fresh pages.
  const uint64_t length = (bytes + alignment_ - 1) & ~(alignment_ - 1);
  for (const auto& [hole, hole_length] : arena.space->LargestFree(kHolesTried)) {
    const uint64_t missing = (length - hole_length + page_bytes_ - 1) / page_bytes_ * page_bytes_;
    const uint64_t end = hole + hole_length;
    if (end % page_bytes_ == 0 && pages_->Take(end, missing).ok()) return Place(owner, bytes, end, missing);
    if (hole % page_bytes_ == 0 && hole >= missing && pages_->Take(hole - missing, missing).ok()) {
      return Place(owner, bytes, hole - missing, missing);
    }
  }
  const uint64_t run = (bytes + page_bytes_ - 1) / page_bytes_ * page_bytes_;
  // An owner's first run, while others have pages: in the middle of the
  // largest free range, so owners grow apart (each next run grows its hole
  // into the free pages after it) instead of interleaving page by page.
  auto taken = arena.pages == 0 && arenas_.size() > 1 ? TakeApart(run) : pages_->TakeFit(run);
  if (!taken.ok()) {
    return Status::ResourceExhausted(
        "no room for " + std::to_string(bytes) + " bytes of " + OwnerName(owner) + "'s: none of its " +
        std::to_string(arena.pages) + " page(s) has a hole that fits, and no run of " +
        std::to_string(run / page_bytes_) + " free page(s) is left (" + std::to_string(shared_free_pages()) +
        " free; pages hold one owner's objects each)");
  }
  return Place(owner, bytes, *taken, run);
}

Result<uint64_t> OwnedSpace::TakeApart(uint64_t run) {
  const auto largest = pages_->LargestFree(1);
  if (!largest.empty() && largest[0].second >= std::max(2 * run, kApartMinPages * page_bytes_)) {
    const auto [offset, length] = largest[0];
    const uint64_t middle = offset + (length - run) / 2 / page_bytes_ * page_bytes_;
    if (pages_->Take(middle, run).ok()) return middle;
  }
  return pages_->TakeFit(run);
}

Result<uint64_t> OwnedSpace::Place(uint32_t owner, uint64_t bytes, uint64_t run, uint64_t run_length) {
  Arena& arena = arenas_[owner];
  NANOKV_RETURN_IF_ERROR(arena.space->Give(run, run_length));
  for (uint64_t p = run / page_bytes_; p < (run + run_length) / page_bytes_; ++p) {
    page_[p].owned = true;
    page_[p].owner = owner;
    ++arena.pages;
  }
  NANOKV_ASSIGN_OR_RETURN(uint64_t offset, arena.space->Allocate(bytes));
  Record(owner, offset, arena.space->LengthAt(offset));
  // Best fit may have started in a hole of the owner's that the run
  // touches: pages of the run the range does not reach are idle.
  for (uint64_t p = run / page_bytes_; p < (run + run_length) / page_bytes_; ++p) {
    if (page_[p].live == 0 && page_[p].holds == 0) MakeIdle(p);
  }
  return offset;
}

void OwnedSpace::Record(uint32_t owner, uint64_t offset, uint64_t length) {
  live_.emplace(offset, Live{owner, length});
  allocated_ += length;
  (void)Touch(offset, length, +1);
}

Status OwnedSpace::Free(uint64_t offset) {
  auto live = live_.find(offset);
  if (live == live_.end()) {
    return Status::FailedPrecondition("owned space: no live range starts at " + std::to_string(offset));
  }
  const Live range = live->second;
  live_.erase(live);
  NANOKV_RETURN_IF_ERROR(arenas_[range.owner].space->Free(offset));
  allocated_ -= range.length;
  for (uint64_t p : Touch(offset, range.length, -1)) {
    if (page_[p].holds == 0) MakeIdle(p);
  }
  return Status::OK();
}

Status OwnedSpace::Split(uint64_t offset, uint64_t at) {
  auto live = live_.find(offset);
  if (live == live_.end()) {
    return Status::FailedPrecondition("owned space: no live range starts at " + std::to_string(offset));
  }
  const Live range = live->second;
  NANOKV_RETURN_IF_ERROR(arenas_[range.owner].space->Split(offset, at));
  live->second.length = at - offset;
  live_.emplace(at, Live{range.owner, offset + range.length - at});
  // The page the cut falls in is touched by both halves now.
  if (at % page_bytes_ != 0) (void)Touch(at, 1, +1);
  return Status::OK();
}

void OwnedSpace::MakeIdle(uint64_t page) {
  if (idle_.insert(page).second) {
    ++arenas_[page_[page].owner].idle;
  }
}

void OwnedSpace::Unidle(uint64_t page) {
  if (idle_.erase(page) != 0) {
    --arenas_[page_[page].owner].idle;
  }
}

void OwnedSpace::ReclaimIdle(std::optional<uint32_t> keep) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    const uint64_t page = *it;
    if (keep && page_[page].owner == *keep) {
      ++it;
      continue;
    }
    it = idle_.erase(it);
    --arenas_[page_[page].owner].idle;
    ReturnPage(page);
  }
}

void OwnedSpace::ReturnPage(uint64_t page) {
  Page& p = page_[page];
  auto arena = arenas_.find(p.owner);
  // All of the page is free in its owner's allocator (nothing live touches
  // it), so it lies inside one free range there: take it out, give it back.
  Status taken = arena->second.space->Take(page * page_bytes_, page_bytes_);
  Status given = taken.ok() ? pages_->Give(page * page_bytes_, page_bytes_) : taken;
  if (!given.ok()) return;  // CheckInvariants reports the page still owned
  p.owned = false;
  if (--arena->second.pages == 0) arenas_.erase(arena);
}

uint64_t OwnedSpace::LengthAt(uint64_t offset) const {
  auto it = live_.find(offset);
  return it == live_.end() ? 0 : it->second.length;
}

std::optional<uint32_t> OwnedSpace::PageOwner(uint64_t page) const {
  if (page >= page_.size() || !page_[page].owned) return std::nullopt;
  return page_[page].owner;
}

Status OwnedSpace::Hold(uint64_t page) {
  if (page >= page_.size() || !page_[page].owned) {
    return Status::FailedPrecondition("owned space: page " + std::to_string(page) + " has no owner to hold it for");
  }
  if (page_[page].holds++ == 0 && page_[page].live == 0) Unidle(page);
  return Status::OK();
}

void OwnedSpace::Unhold(uint64_t page) {
  if (page >= page_.size() || page_[page].holds == 0) return;
  Page& p = page_[page];
  if (--p.holds == 0 && p.live == 0 && p.owned) MakeIdle(page);
}

Status OwnedSpace::Adopt(uint64_t page, uint32_t owner) {
  if (page >= page_.size() || !page_[page].owned || page_[page].live != 0 || page_[page].holds != 1) {
    return Status::FailedPrecondition("owned space: page " + std::to_string(page) +
                                      " is not an owned empty page with one hold");
  }
  Page& p = page_[page];
  if (p.owner == owner) return Status::OK();
  Arena& to = arenas_[owner];
  if (!to.space) {
    NANOKV_ASSIGN_OR_RETURN(OffsetAllocator space, OffsetAllocator::CreateEmpty(capacity_, alignment_));
    to.space.emplace(std::move(space));
  }
  // Nothing live touches it: it lies inside one free range of its owner's.
  auto from = arenas_.find(p.owner);
  NANOKV_RETURN_IF_ERROR(from->second.space->Take(page * page_bytes_, page_bytes_));
  NANOKV_RETURN_IF_ERROR(to.space->Give(page * page_bytes_, page_bytes_));
  if (--from->second.pages == 0) arenas_.erase(from);
  p.owner = owner;
  ++to.pages;
  return Status::OK();
}

Result<uint64_t> OwnedSpace::TakePage() {
  auto offset = pages_->TakeFit(page_bytes_);
  if (!offset.ok() && !idle_.empty()) {
    ReclaimIdle(std::nullopt);
    offset = pages_->TakeFit(page_bytes_);
  }
  if (!offset.ok()) {
    return Status::ResourceExhausted("no free page left in the payload space (" +
                                     std::to_string(page_.size() - taken_pages_) + " pages, each " +
                                     "holding one owner's objects)");
  }
  page_[*offset / page_bytes_].taken = true;
  ++taken_pages_;
  return *offset;
}

Status OwnedSpace::Claim(uint32_t owner, uint64_t offset, uint64_t bytes) {
  if (bytes == 0 || offset % alignment_ != 0 || offset >= capacity_ || bytes > capacity_ - offset) {
    return Status::InvalidArgument("owned space: claim of [" + std::to_string(offset) + ", +" +
                                   std::to_string(bytes) + "): empty, unaligned or past the capacity");
  }
  const uint64_t first = offset / page_bytes_, last = (offset + bytes - 1) / page_bytes_;
  const uint64_t rounded = (bytes + alignment_ - 1) & ~(alignment_ - 1);
  if (auto after = live_.lower_bound(offset + rounded);
      after != live_.begin() && std::prev(after)->first + std::prev(after)->second.length > offset) {
    return Status::FailedPrecondition("owned space: claim of [" + std::to_string(offset) + ", +" +
                                      std::to_string(bytes) + ") overlaps the live range at " +
                                      std::to_string(std::prev(after)->first));
  }
  for (uint64_t p = first; p <= last; ++p) {
    if (page_[p].taken || (page_[p].owned && page_[p].owner != owner)) {
      return Status::FailedPrecondition("owned space: claim of [" + std::to_string(offset) + ", +" +
                                        std::to_string(bytes) + ") for " + OwnerName(owner) + ": page " +
                                        std::to_string(p) + " is " +
                                        (page_[p].taken ? "a header page" : OwnerName(page_[p].owner) + "'s"));
    }
  }
  Arena& arena = arenas_[owner];
  if (!arena.space) {
    NANOKV_ASSIGN_OR_RETURN(OffsetAllocator space, OffsetAllocator::CreateEmpty(capacity_, alignment_));
    arena.space.emplace(std::move(space));
  }
  for (uint64_t p = first; p <= last; ++p) {
    if (page_[p].owned) continue;
    NANOKV_RETURN_IF_ERROR(pages_->Take(p * page_bytes_, page_bytes_));
    NANOKV_RETURN_IF_ERROR(arena.space->Give(p * page_bytes_, page_bytes_));
    page_[p].owned = true;
    page_[p].owner = owner;
    ++arena.pages;
  }
  NANOKV_RETURN_IF_ERROR(arena.space->AllocateAt(offset, bytes));
  Record(owner, offset, arena.space->LengthAt(offset));
  return Status::OK();
}

Status OwnedSpace::TakePageAt(uint64_t page) {
  if (page >= page_.size() || page_[page].owned || page_[page].taken) {
    return Status::FailedPrecondition("owned space: page " + std::to_string(page) +
                                      " is not a shared free page (taken, owned or past the space)");
  }
  NANOKV_RETURN_IF_ERROR(pages_->Take(page * page_bytes_, page_bytes_));
  page_[page].taken = true;
  ++taken_pages_;
  return Status::OK();
}

std::map<uint32_t, uint32_t> OwnedSpace::OwnedPages() const {
  std::map<uint32_t, uint32_t> out;
  for (const auto& [owner, arena] : arenas_) {
    if (arena.pages > arena.idle) out[owner] = arena.pages - arena.idle;
  }
  return out;
}

Status OwnedSpace::CheckInvariants() const {
  NANOKV_RETURN_IF_ERROR(pages_->CheckInvariants());
  std::vector<uint32_t> live(page_.size(), 0);
  uint64_t allocated = 0;
  for (const auto& [offset, range] : live_) {
    for (uint64_t p = offset / page_bytes_; p <= (offset + range.length - 1) / page_bytes_; ++p) {
      if (!page_[p].owned || page_[p].owner != range.owner) {
        return Status::Internal("owned space: the range at " + std::to_string(offset) + " of " + OwnerName(range.owner) +
                                " lies in page " + std::to_string(p) + ", which is not its owner's");
      }
      ++live[p];
    }
    allocated += range.length;
  }
  if (allocated != allocated_) return Status::Internal("owned space: allocated bytes drifted");
  std::unordered_map<uint32_t, uint32_t> owned;
  uint64_t pooled = 0, taken = 0;
  for (uint64_t p = 0; p < page_.size(); ++p) {
    const Page& page = page_[p];
    std::string where = "owned space: page " + std::to_string(p) + ": ";
    if (page.live != live[p]) return Status::Internal(where + "live count drifted");
    if (page.taken) {
      if (page.owned || page.live != 0) return Status::Internal(where + "taken for good yet in use");
      ++taken;
    } else if (page.owned) {
      if ((page.live == 0 && page.holds == 0) != idle_.contains(p)) {
        return Status::Internal(where + "idle (owned, empty, not held) but not listed so, or the reverse");
      }
      ++owned[page.owner];
    } else {
      if (page.live != 0 || page.holds != 0) return Status::Internal(where + "in the pool yet in use or held");
      ++pooled;
    }
  }
  if (taken != taken_pages_ || pooled * page_bytes_ != pages_->free_bytes()) {
    return Status::Internal("owned space: the pool's free pages are not the unowned ones");
  }
  uint64_t arena_allocated = 0;
  for (const auto& [owner, arena] : arenas_) {
    NANOKV_RETURN_IF_ERROR(arena.space->CheckInvariants());
    const uint64_t held = arena.space->capacity() - arena.space->away_bytes();
    if (arena.pages != owned[owner] || held != uint64_t{arena.pages} * page_bytes_) {
      return Status::Internal("owned space: " + OwnerName(owner) + "'s allocator holds " + std::to_string(held) +
                              " bytes, it owns " + std::to_string(owned[owner]) + " page(s)");
    }
    arena_allocated += arena.space->allocated_bytes();
  }
  if (arena_allocated != allocated_) return Status::Internal("owned space: owners' allocators disagree");
  uint64_t idle = 0;
  for (uint64_t p : idle_) {
    if (p >= page_.size() || !page_[p].owned) return Status::Internal("owned space: an idle page has no owner");
  }
  for (const auto& [owner, arena] : arenas_) idle += arena.idle;
  if (idle != idle_.size()) return Status::Internal("owned space: idle counts drifted");
  for (const auto& [owner, pages] : owned) {
    if (!arenas_.contains(owner)) return Status::Internal("owned space: " + OwnerName(owner) + " owns pages, no allocator");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
