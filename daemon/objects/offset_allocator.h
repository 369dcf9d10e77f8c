// Byte ranges inside one linear space [0, capacity): the object store's
// payload allocator over its pages (daemon/objects/object_index.h). Many small
// objects share a page; a large one spans several.
//
// Every range starts at a multiple of `alignment` and its length is rounded
// up to one, so every free range is aligned too and best fit needs no
// padding. Allocate and Free are O(log n) in the number of free ranges:
// free ranges are indexed twice, by offset (to coalesce with neighbours on
// Free) and by (length, offset) (best fit: the shortest range that fits,
// lowest offset among equals, which keeps the space packed toward 0).
//
// Bytes may also be *away*: neither free nor allocated, handed to someone
// else (Take/TakeFit) until given back (Give). The object store's per-owner
// spaces use that (daemon/objects/owned_space.h): its pool of whole free
// pages takes runs of pages away to an owner's allocator, which starts
// with everything away (CreateEmpty) and is given those pages.
//
// Invariants (CheckInvariants() verifies them; tests call it):
//   1. free ranges never overlap, never touch (touching ones are merged),
//      and the two indexes hold the same set;
//   2. free bytes + allocated bytes + away bytes == capacity;
//   3. every offset and length is a multiple of alignment.
//
// Not thread-safe: the owner locks (the object store holds its mutex).
#ifndef NANOKV_DAEMON_OBJECTS_OFFSET_ALLOCATOR_H_
#define NANOKV_DAEMON_OBJECTS_OFFSET_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::kvd {

class OffsetAllocator {
 public:
  struct Stats {
    uint64_t capacity = 0;
    uint64_t allocated_bytes = 0;  // rounded lengths of live ranges
    uint64_t free_bytes = 0;
    uint64_t away_bytes = 0;
    uint64_t largest_free = 0;
    size_t free_ranges = 0;
    size_t allocations = 0;
  };

  // `alignment` is a power of two; `capacity` is rounded down to a multiple
  // of it. kInvalidArgument otherwise.
  static Result<OffsetAllocator> Create(uint64_t capacity, uint64_t alignment);
  // The same, but every byte starts away: nothing is free until Give.
  static Result<OffsetAllocator> CreateEmpty(uint64_t capacity, uint64_t alignment);

  // The offset of a fresh range of at least `bytes` (> 0). kInvalidArgument
  // for 0; kResourceExhausted when no free range is long enough (the message
  // says how much is free and the largest hole, so fragmentation shows).
  Result<uint64_t> Allocate(uint64_t bytes);
  // Frees the range that starts at `offset`. kFailedPrecondition for an
  // offset that no live range starts at (double free, never allocated).
  Status Free(uint64_t offset);
  // The rounded length of the live range at `offset`; 0 if none.
  uint64_t LengthAt(uint64_t offset) const;

  // Away bytes [offset, offset + length) become free, merged with free
  // neighbours. kInvalidArgument for an unaligned or empty range or one past
  // the capacity; kFailedPrecondition if any of it is free or live already.
  Status Give(uint64_t offset, uint64_t length);
  // Free bytes [offset, offset + length) go away. kFailedPrecondition unless
  // the range lies inside one free range; kInvalidArgument as Give.
  Status Take(uint64_t offset, uint64_t length);
  // The `n` longest free ranges (offset, length), longest first.
  std::vector<std::pair<uint64_t, uint64_t>> LargestFree(size_t n) const;
  // Best fit, as Allocate, but the range goes away instead of becoming live.
  Result<uint64_t> TakeFit(uint64_t bytes);
  // A live range at exactly [offset, offset + bytes rounded up): a kvd
  // restart putting back an object it recovered (object_recovery.h).
  // kInvalidArgument as Give (offset unaligned, empty, past the capacity);
  // kFailedPrecondition unless the range lies inside one free range.
  Status AllocateAt(uint64_t offset, uint64_t bytes);
  // The live range starting at `offset` becomes two, cut at `at` (aligned,
  // strictly inside it): a v2 slab's range giving an announced object a
  // range of its own (object_index_slabs.cc). kFailedPrecondition otherwise.
  Status Split(uint64_t offset, uint64_t at);

  uint64_t alignment() const { return alignment_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t allocated_bytes() const { return allocated_; }
  uint64_t away_bytes() const { return away_; }
  uint64_t free_bytes() const { return capacity_ - allocated_ - away_; }
  Stats stats() const;
  Status CheckInvariants() const;

 private:
  OffsetAllocator(uint64_t capacity, uint64_t alignment);
  void InsertFree(uint64_t offset, uint64_t length);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);
  // Frees [start, start + length), merged with touching free neighbours.
  void FreeMerged(uint64_t start, uint64_t length);
  // Best fit: the offset of a free range of `length` (aligned), now out of
  // the free indexes; kResourceExhausted naming `bytes` otherwise.
  Result<uint64_t> CarveFit(uint64_t bytes);
  Status CheckRange(const char* what, uint64_t offset, uint64_t length) const;

  uint64_t capacity_ = 0;
  uint64_t alignment_ = 0;
  uint64_t allocated_ = 0;
  uint64_t away_ = 0;
  std::map<uint64_t, uint64_t> free_by_offset_;          // offset -> length
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (length, offset)
  std::map<uint64_t, uint64_t> live_;                     // offset -> rounded length
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OFFSET_ALLOCATOR_H_
