#include "daemon/objects/offset_allocator.h"

#include <iterator>
#include <string>

namespace nanokv::kvd {

Result<OffsetAllocator> OffsetAllocator::Create(uint64_t capacity, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Status::InvalidArgument("offset allocator: alignment " + std::to_string(alignment) +
                                   " is not a power of two");
  }
  capacity -= capacity % alignment;
  if (capacity == 0) {
    return Status::InvalidArgument("offset allocator: capacity under one alignment unit");
  }
  return OffsetAllocator(capacity, alignment);
}

Result<OffsetAllocator> OffsetAllocator::CreateEmpty(uint64_t capacity, uint64_t alignment) {
  NANOKV_ASSIGN_OR_RETURN(OffsetAllocator empty, Create(capacity, alignment));
  empty.free_by_offset_.clear();
  empty.free_by_size_.clear();
  empty.away_ = empty.capacity_;
  return empty;
}

OffsetAllocator::OffsetAllocator(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity), alignment_(alignment) {
  InsertFree(0, capacity);
}

void OffsetAllocator::InsertFree(uint64_t offset, uint64_t length) {
  free_by_offset_.emplace(offset, length);
  free_by_size_.emplace(length, offset);
}

void OffsetAllocator::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_offset_.erase(it);
}

Result<uint64_t> OffsetAllocator::CarveFit(uint64_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("offset allocator: allocation of 0 bytes");
  if (bytes > capacity_) {
    return Status::ResourceExhausted("offset allocator: " + std::to_string(bytes) +
                                     " bytes asked, capacity " + std::to_string(capacity_));
  }
  uint64_t length = (bytes + alignment_ - 1) & ~(alignment_ - 1);
  auto fit = free_by_size_.lower_bound({length, 0});
  if (fit == free_by_size_.end()) {
    uint64_t largest = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
    return Status::ResourceExhausted(
        "offset allocator: no free range of " + std::to_string(length) + " bytes (" +
        std::to_string(free_bytes()) + " free in " +
        std::to_string(free_by_size_.size()) + " ranges, largest " + std::to_string(largest) + ")");
  }
  auto [free_length, offset] = *fit;
  EraseFree(free_by_offset_.find(offset));
  if (free_length > length) InsertFree(offset + length, free_length - length);
  return offset;
}

Result<uint64_t> OffsetAllocator::Allocate(uint64_t bytes) {
  NANOKV_ASSIGN_OR_RETURN(uint64_t offset, CarveFit(bytes));
  uint64_t length = (bytes + alignment_ - 1) & ~(alignment_ - 1);
  live_.emplace(offset, length);
  allocated_ += length;
  return offset;
}

Result<uint64_t> OffsetAllocator::TakeFit(uint64_t bytes) {
  NANOKV_ASSIGN_OR_RETURN(uint64_t offset, CarveFit(bytes));
  away_ += (bytes + alignment_ - 1) & ~(alignment_ - 1);
  return offset;
}

Status OffsetAllocator::CheckRange(const char* what, uint64_t offset, uint64_t length) const {
  if (length == 0 || offset % alignment_ != 0 || length % alignment_ != 0 || offset > capacity_ ||
      length > capacity_ - offset) {
    return Status::InvalidArgument(std::string("offset allocator: ") + what + " of [" + std::to_string(offset) +
                                   ", +" + std::to_string(length) + "): empty, unaligned or past the capacity");
  }
  return Status::OK();
}

Status OffsetAllocator::Give(uint64_t offset, uint64_t length) {
  NANOKV_RETURN_IF_ERROR(CheckRange("give", offset, length));
  // Nothing of it may be free or live: the last range starting before its
  // end must end at or before its start, in both maps.
  auto ends_before = [&](const std::map<uint64_t, uint64_t>& ranges) {
    auto after = ranges.lower_bound(offset + length);
    if (after == ranges.begin()) return true;
    auto last = std::prev(after);
    return last->first + last->second <= offset;
  };
  if (!ends_before(free_by_offset_) || !ends_before(live_)) {
    return Status::FailedPrecondition("offset allocator: give of [" + std::to_string(offset) + ", +" +
                                      std::to_string(length) + "): part of it is not away");
  }
  away_ -= length;
  FreeMerged(offset, length);
  return Status::OK();
}

Status OffsetAllocator::Take(uint64_t offset, uint64_t length) {
  NANOKV_RETURN_IF_ERROR(CheckRange("take", offset, length));
  auto after = free_by_offset_.upper_bound(offset);
  if (after == free_by_offset_.begin() ||
      std::prev(after)->first + std::prev(after)->second < offset + length) {
    return Status::FailedPrecondition("offset allocator: take of [" + std::to_string(offset) + ", +" +
                                      std::to_string(length) + "): not inside one free range");
  }
  auto range = std::prev(after);
  const uint64_t start = range->first, end = range->first + range->second;
  EraseFree(range);
  if (start < offset) InsertFree(start, offset - start);
  if (offset + length < end) InsertFree(offset + length, end - offset - length);
  away_ += length;
  return Status::OK();
}

Status OffsetAllocator::AllocateAt(uint64_t offset, uint64_t bytes) {
  const uint64_t length = bytes > capacity_ ? bytes : (bytes + alignment_ - 1) & ~(alignment_ - 1);
  NANOKV_RETURN_IF_ERROR(Take(offset, length));
  away_ -= length;
  allocated_ += length;
  live_.emplace(offset, length);
  return Status::OK();
}

Status OffsetAllocator::Free(uint64_t offset) {
  auto live = live_.find(offset);
  if (live == live_.end()) {
    return Status::FailedPrecondition("offset allocator: no live range starts at " +
                                      std::to_string(offset));
  }
  const uint64_t length = live->second;
  allocated_ -= length;
  live_.erase(live);
  FreeMerged(offset, length);
  return Status::OK();
}

void OffsetAllocator::FreeMerged(uint64_t start, uint64_t length) {
  // Merge with the free neighbours so touching free ranges never exist.
  auto next = free_by_offset_.lower_bound(start);
  if (next != free_by_offset_.end() && next->first == start + length) {
    length += next->second;
    auto after = std::next(next);
    EraseFree(next);
    next = after;
  }
  if (next != free_by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      length += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(start, length);
}

std::vector<std::pair<uint64_t, uint64_t>> OffsetAllocator::LargestFree(size_t n) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (auto it = free_by_size_.rbegin(); it != free_by_size_.rend() && out.size() < n; ++it) {
    out.emplace_back(it->second, it->first);
  }
  return out;
}

Status OffsetAllocator::Split(uint64_t offset, uint64_t at) {
  auto live = live_.find(offset);
  if (live == live_.end() || at <= offset || at >= offset + live->second || at % alignment_ != 0) {
    return Status::FailedPrecondition("offset allocator: no live range at " + std::to_string(offset) + " to cut at " +
                                      std::to_string(at));
  }
  const uint64_t end = offset + live->second;
  live->second = at - offset;
  live_.emplace(at, end - at);
  return Status::OK();
}

uint64_t OffsetAllocator::LengthAt(uint64_t offset) const {
  auto it = live_.find(offset);
  return it == live_.end() ? 0 : it->second;
}

OffsetAllocator::Stats OffsetAllocator::stats() const {
  Stats s;
  s.capacity = capacity_;
  s.allocated_bytes = allocated_;
  s.free_bytes = free_bytes();
  s.away_bytes = away_;
  s.largest_free = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  s.free_ranges = free_by_offset_.size();
  s.allocations = live_.size();
  return s;
}

Status OffsetAllocator::CheckInvariants() const {
  if (free_by_offset_.size() != free_by_size_.size()) {
    return Status::Internal("offset allocator: the two free indexes differ in size");
  }
  uint64_t free = 0, end = 0;
  bool first = true;
  for (const auto& [offset, length] : free_by_offset_) {
    std::string where = "offset allocator: free range at " + std::to_string(offset) + ": ";
    if (length == 0 || offset % alignment_ != 0 || length % alignment_ != 0) {
      return Status::Internal(where + "empty or unaligned");
    }
    if (!first && offset <= end) {
      return Status::Internal(where + (offset == end ? "touches" : "overlaps") + " the previous one");
    }
    if (offset + length > capacity_) return Status::Internal(where + "runs past the capacity");
    if (!free_by_size_.contains({length, offset})) return Status::Internal(where + "not in the size index");
    if (live_.upper_bound(offset) != live_.begin()) {
      auto live = std::prev(live_.upper_bound(offset));
      if (live->first + live->second > offset) return Status::Internal(where + "overlaps a live range");
    }
    free += length;
    end = offset + length;
    first = false;
  }
  uint64_t allocated = 0, live_end = 0;
  for (const auto& [offset, length] : live_) {
    if (offset < live_end || offset % alignment_ != 0 || length % alignment_ != 0) {
      return Status::Internal("offset allocator: live range at " + std::to_string(offset) +
                              " overlaps or is unaligned");
    }
    allocated += length;
    live_end = offset + length;
  }
  if (allocated != allocated_) return Status::Internal("offset allocator: allocated bytes drifted");
  if (free + allocated + away_ != capacity_) {
    return Status::Internal("offset allocator: free " + std::to_string(free) + " + allocated " +
                            std::to_string(allocated) + " + away " + std::to_string(away_) +
                            " != capacity " + std::to_string(capacity_));
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
