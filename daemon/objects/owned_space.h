// The payload space of one device's object store, split by owner (no page
// shared with another's object under write access). A
// producer's write fd maps a whole page, so every page here is either in a
// shared pool of free pages or one owner's (an owner: a producer's uid, or
// kvd's own callers), and holds bytes of that owner's objects only.
//
// Two levels, each an OffsetAllocator, so Allocate and Free stay O(log n)
// (plus O(pages) of the range itself): `pages_` hands out runs of whole free
// pages (page-aligned best fit); each owner has an allocator of its own
// (256-byte best fit) that holds exactly its pages. An allocation is tried
// in its owner's pages first, so one owner's small objects still share a
// page; then by growing one of its largest holes at a page edge with the
// free pages next to it (so in a one-uid node, the common deployment, an
// object still starts in the last one's tail page, as with one allocator
// over the whole space); a run of fresh pages only after that. An owner's
// first run, while others have pages, goes in the middle of the largest
// free range, so owners grow apart instead of interleaving their pages.
// A page no live range touches and nobody holds (Hold: a write fd of it
// was handed out, and its holder may still map it) is *idle*: free for any
// owner, but left in its last owner's allocator until another owner cannot
// be served otherwise (then every idle page of the others goes back to the
// pool), so one owner alone packs as one allocator over the whole space.
//
// Pages may also leave the payload space for good (TakePage): the store's
// header pages beyond its first ones (object_index.h).
//
// Invariants (CheckInvariants() verifies them; tests call it):
//   1. every live range lies in pages owned by its owner, and each owned
//      page is touched by a live range, held, or listed idle;
//   2. an owner's allocator holds exactly its owned pages (free + allocated
//      == its pages' bytes), and the page pool's free pages are exactly the
//      pages no owner has and TakePage did not take;
//   3. the allocated bytes counted here are the sum of the live ranges.
//
// Not thread-safe: the owner locks (the object store holds its mutex).
#ifndef NANOKV_DAEMON_OBJECTS_OWNED_SPACE_H_
#define NANOKV_DAEMON_OBJECTS_OWNED_SPACE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/objects/offset_allocator.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// The owner that is not a uid: kvd's own callers (root, kvd's uid, the
// master's orders). ObjectIndex::kOperator is this one.
inline constexpr uint32_t kKvdCallers = UINT32_MAX;
// "uid N", or "kvd's own callers": how messages and logs name an owner.
std::string OwnerName(uint32_t owner);

class OwnedSpace {
 public:
  // `capacity` is a whole number of pages (rounded down); `alignment` a
  // power of two dividing `page_bytes`. kInvalidArgument otherwise.
  static Result<OwnedSpace> Create(uint64_t capacity, uint64_t page_bytes, uint64_t alignment);

  // A fresh range of at least `bytes` in pages of `owner`'s, taking a run
  // of shared free pages (other owners' idle ones included) when none of
  // its own has room. kResourceExhausted when no run is long enough (the
  // message says what is free where).
  Result<uint64_t> Allocate(uint32_t owner, uint64_t bytes);
  // kFailedPrecondition for an offset no live range starts at.
  Status Free(uint64_t offset);
  // The live range at `offset` becomes two, cut at `at` (aligned, inside
  // it), both its owner's: a v2 slab handing an announced object its own
  // range. kFailedPrecondition otherwise.
  Status Split(uint64_t offset, uint64_t at);
  // The rounded length of the live range at `offset`; 0 if none.
  uint64_t LengthAt(uint64_t offset) const;
  // The owner of page `page` (index in this space); nullopt when it is in
  // the shared pool or taken for good. An idle page is still its last
  // owner's (its allocator has it) until another owner needs it.
  std::optional<uint32_t> PageOwner(uint64_t page) const;
  // An owned page stays its owner's while held, even with nothing in it
  // (Hold counts; kFailedPrecondition for a page nobody owns). Unhold makes
  // an empty page idle at the last one.
  Status Hold(uint64_t page);
  void Unhold(uint64_t page);
  // An empty page of another owner's with one hold, which the caller knows
  // is `owner`'s (its producer already has the page's write fd), becomes
  // `owner`'s: without it an owner's empty held page is nobody else's until
  // its holder leaves, though the holder itself could use it.
  // kFailedPrecondition for a page not owned, not empty, or held otherwise.
  Status Adopt(uint64_t page, uint32_t owner);
  // A whole shared free page out of the payload space for good: its offset.
  // kResourceExhausted when no page is free.
  Result<uint64_t> TakePage();

  // A kvd restart rebuilding the space as the dead kvd left it
  // (object_recovery.h), before any Allocate: a live range of `owner`'s at
  // exactly [offset, offset + bytes), its pages becoming `owner`'s;
  // kFailedPrecondition when a page of it is another owner's or taken, or
  // the range overlaps a live one; kInvalidArgument for a range outside.
  Status Claim(uint32_t owner, uint64_t offset, uint64_t bytes);
  // Page `page` (index in this space) out of the payload space for good, as
  // TakePage. kFailedPrecondition unless it is in the shared pool.
  Status TakePageAt(uint64_t page);

  uint64_t page_bytes() const { return page_bytes_; }
  // The bytes still payload: pages taken for good do not count.
  uint64_t capacity() const { return capacity_ - taken_pages_ * page_bytes_; }
  uint64_t allocated_bytes() const { return allocated_; }
  // Pages free for any owner: the pool's and the idle ones.
  uint64_t shared_free_pages() const { return pages_->free_bytes() / page_bytes_ + idle_.size(); }
  // Pages each owner has now, idle ones not counted.
  std::map<uint32_t, uint32_t> OwnedPages() const;
  Status CheckInvariants() const;

 private:
  struct Page {
    bool owned = false;
    bool taken = false;   // TakePage's: out of the payload space
    uint32_t owner = 0;
    uint32_t live = 0;    // live ranges touching it
    uint32_t holds = 0;
  };
  struct Arena {
    std::optional<OffsetAllocator> space;  // everything away but its pages
    uint32_t pages = 0;
    uint32_t idle = 0;  // of its pages
  };
  struct Live {
    uint32_t owner = 0;
    uint64_t length = 0;
  };

  OwnedSpace(uint64_t capacity, uint64_t page_bytes, uint64_t alignment);
  // Adds `delta` to the live count of every page [offset, offset + length)
  // touches; returns those left with no live range.
  std::vector<uint64_t> Touch(uint64_t offset, uint64_t length, int delta);
  // How many of an owner's largest holes an allocation tries to grow by
  // neighbouring free pages before it takes a fresh run (bounded: O(log n)).
  static constexpr size_t kHolesTried = 4;
  // A run of `run` bytes of free pages in the middle of the largest free
  // range when it is long enough (twice the run, and kApartMinPages: in a
  // small space halving the room costs more than interleaving), else best fit.
  static constexpr uint64_t kApartMinPages = 16;
  Result<uint64_t> TakeApart(uint64_t run);
  // Gives the free pages [run, run + run_length) to `owner` and allocates
  // `bytes` there (it fits: run and any hole it joins were chosen so).
  Result<uint64_t> Place(uint32_t owner, uint64_t bytes, uint64_t run, uint64_t run_length);
  // The owner's holes grown by free pages next to them, else a fresh run.
  Result<uint64_t> Grow(uint32_t owner, uint64_t bytes);
  void MakeIdle(uint64_t page);
  void Unidle(uint64_t page);
  // Every idle page but `keep`'s goes back to the pool.
  void ReclaimIdle(std::optional<uint32_t> keep);
  // A live range of `owner`'s at [offset, offset + length).
  void Record(uint32_t owner, uint64_t offset, uint64_t length);
  // REQUIRES: page owned, no live range, no hold, not listed idle.
  void ReturnPage(uint64_t page);

  uint64_t capacity_ = 0;
  uint64_t page_bytes_ = 0;
  uint64_t alignment_ = 0;
  uint64_t allocated_ = 0;
  uint64_t taken_pages_ = 0;
  std::optional<OffsetAllocator> pages_;  // the shared pool of whole free pages
  std::vector<Page> page_;
  std::unordered_map<uint32_t, Arena> arenas_;
  std::set<uint64_t> idle_;  // pages owned, empty and not held
  std::map<uint64_t, Live> live_;  // offset -> its owner and rounded length
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OWNED_SPACE_H_
