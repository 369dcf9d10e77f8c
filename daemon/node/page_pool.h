// The page pool of ONE device: physical pages created ahead of demand and
// granted by dense page id to tenant groups. kvd keeps one per GPU it owns.
// The pool owns every free page: never-used ones on its free stack, and the
// pages each group gave back on that group's free list; NodeState keeps
// tenants, holders and quotas. docs/ARCHITECTURE.md, "The page pool", says
// why and states invariants 1 and 5 below for the whole node.
//
// Invariants (CheckInvariants() walks the state and verifies each; tests call it):
//   1. free_pages + granted_pages == created_pages <= capacity_pages, where
//      free_pages counts the free stack and every group's free list (the
//      object store's pages are granted pages, held by its own tenant); and
//      created + creating + held back + held after recycle <= capacity_pages:
//      a page recycled away whose old memory a process may still hold counts
//      as memory until its owner calls DropHeldAfterRecycle.
//   2. Every page id is in exactly one state: uncreated (on the uncreated
//      stack), creating (claimed by one CreatePage in flight), free (on the
//      free stack, exactly once), granted (to one group), group-free (on its
//      group's free list, exactly once), recycling (its physical page being
//      replaced), or held back (a restarted kvd waits for the engine holding
//      it to hand it back: Adopt).
//   3. A created id (free, group-free, granted) holds a valid handle, never
//      another id's; an uncreated one holds none.
//   4. The pool never creates more than capacity_pages pages: an id must be
//      claimed from the uncreated stack before CreatePage is called for it.
//   5. A page that belonged to one group reaches another only through
//      RecycleSlot (release + fresh create under the same id), so its old
//      bytes never cross groups. The free stack holds only pages no group
//      has had since they were created.
//
// Threads: every method is safe to call from many threads. Pages are created
// outside any lock. The free stack and the group free lists (intrusive lists
// through the slots: no allocation) are guarded by a spinlock held for a few
// instructions; a mutex and condition variable are used only to wake the
// refill thread, and only when the free stack drops below the reserve.
#ifndef NANOKV_DAEMON_NODE_PAGE_POOL_H_
#define NANOKV_DAEMON_NODE_PAGE_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/node/page_types.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct PagePoolConfig {
  int device = 0;
  // A multiple of the device's granularity (kInvalidArgument otherwise).
  size_t page_bytes = size_t{2} << 20;
  // Capacity in bytes; 0 means gpu_utilization * DeviceInfo::total_bytes
  // (kvcached's knob). Either way rounded down to whole pages.
  size_t capacity_bytes = 0;
  double gpu_utilization = 0.95;  // in (0, 1]
  // Pages kept created and free ahead of demand; clamped to the capacity.
  size_t reserve_pages = 8;
  // Also export each page as an fd when it is created (ahead of demand), so
  // its first grant costs no export; TakeFd hands that fd out once, and any
  // later one exports anew. So a page holds no fd at rest once granted
  // (a node of GPUs has ~290,000 pages, no open-file limit in
  // use has room for an fd each); only pages created ahead and not granted
  // yet, and adopted ones, keep one.
  bool export_fds = false;
  // Ids kept out of service until Adopt or ReleaseHeldBack: pages a kvd that
  // died had granted, whose memory engines still hold (kvd restart). They
  // are neither created nor uncreated until one of the two is called.
  std::vector<PageId> held_back;
};

class PagePool {
 public:
  // Exact counts, read together under the lock.
  struct Stats {
    size_t capacity_pages = 0;
    size_t page_bytes = 0;
    size_t created_pages = 0;  // live physical pages: free + granted
    size_t free_pages = 0;     // the free stack + every group's free list
    size_t group_free_pages = 0;  // of free_pages, on a group's free list
    size_t granted_pages = 0;
    size_t reserve_pages = 0;
    size_t creating_pages = 0;  // CreatePage calls in flight right now
    // Pages created ahead of demand: the initial fill and the refill thread.
    uint64_t background_creates = 0;
    // Pages Allocate had to create itself because the free stack was empty:
    // non-zero means the reserve is too small for the grant rate.
    uint64_t sync_creates = 0;
    uint64_t create_failures = 0;  // CreatePage errors, all paths
    // Successful recycles: Recycle calls, and grants that took another
    // group's free page.
    uint64_t recycles = 0;
    size_t held_back_pages = 0;    // ids awaiting Adopt or ReleaseHeldBack
    // Old pages recycled away that some process may still hold (it was told
    // to forget them and has not said it did): memory no page may be made in.
    size_t held_after_recycle_pages = 0;
  };

  // Builds the pool and creates its reserve before returning, so the first
  // grants never wait. `backend` must remain live while the pool exists.
  // Errors: kNotFound (no such device), kInvalidArgument (page size not a
  // multiple of the granularity, capacity under one page, bad utilization),
  // or the backend's error (e.g. kOutOfMemory) if the reserve cannot be made.
  static Result<std::unique_ptr<PagePool>> Create(gpu::Backend& backend,
                                                  const PagePoolConfig& config);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;
  // Stops the refill thread and releases every created page, granted ones
  // too: the pool's owner owns the pages. Teardown errors are logged.
  // REQUIRES: no other thread is inside a method of this pool.
  ~PagePool();

  // Grants a page to `group`. Hot path: pop the group's own free list (its
  // processes may have the page imported already), else the free stack,
  // under the spinlock; no syscall, no driver call, no allocation. Only when
  // the free stack first drops below the reserve does it wake the refill
  // thread (a mutex and a futex wake, once per dip, not per grant).
  // Out of line, when both are empty: a page created synchronously (counted
  // in sync_creates), else another group's free page recycled (RecycleSlot;
  // it then ends in `*recycled`). The first grant to a group also goes there,
  // to size the group lists (the one allocation, outside the lock).
  // `recycled` (may be null) is set to kNoPage, or to the id of the other
  // group's free page whose old memory this call released: also when it then
  // fails to create the fresh page (the id is then uncreated), because either
  // way that group's processes must be told to drop their handles of it.
  // Errors: kInvalidArgument for kNoGroup; kResourceExhausted when all
  // capacity_pages are granted; the backend's error (e.g. kOutOfMemory) when
  // a needed page cannot be created or recycled.
  // A recycle of a page whose old memory may still be held (StillHeld says
  // so) releases it but makes no fresh page: that would put the device over
  // its capacity while the holder keeps the old one. The id then waits,
  // uncreated and counted as held after recycle, until DropHeldAfterRecycle;
  // *recycled names it and the answer is kResourceExhausted.
  Result<PageId> Allocate(GroupId group, PageId* recycled = nullptr);

  // Whether a process may still hold the memory of page `id` as it is now
  // (its group's engines imported it). Asked on the recycle path, outside
  // the lock, on the thread that calls Allocate. Unset: never held. Set it
  // before the first Allocate; what it reads must remain live while the
  // pool exists.
  using StillHeld = std::function<bool(PageId)>;
  void SetStillHeld(StillHeld still_held) { still_held_ = std::move(still_held); }
  // `pages` old pages recycled away are no longer held by anyone (every
  // holder said it dropped them, or is gone): their room may hold new pages.
  // kFailedPrecondition if fewer are counted.
  Status DropHeldAfterRecycle(uint32_t pages);

  // Gives a granted page back onto its group's free list (O(1), no syscall).
  // The page keeps its memory and contents for that group: the pool recycles
  // it before any other group gets it.
  // kInvalidArgument for an id outside the pool, kFailedPrecondition for an
  // id that is not granted (double free, never allocated, being recycled).
  Status Free(PageId id);

  // Grants `id` again, taking it off `group`'s free list: a tenant shares or
  // hands back a page its group gave back earlier. kInvalidArgument for an id
  // outside the pool; kFailedPrecondition if it is not on that group's list.
  Status TakeGroupFree(PageId id, GroupId group);

  // Replaces the physical page under a granted id with a freshly created one
  // (zero-filled by the driver or memfd) and keeps the id granted. The old
  // page is released first, so this works on a full device too; mappings of
  // the old page elsewhere keep the old memory alive (backend.h rule 3).
  // kInvalidArgument / kFailedPrecondition as Free. If the new page cannot be
  // created, the id is no longer granted (it returns to the uncreated set)
  // and the backend's error is returned.
  Status Recycle(PageId id);

  // Takes a held-back id into service as granted to `group`, with a page
  // that already exists: `handle` (imported from an engine's fd) and `fd` (an
  // fd of it the pool keeps and TakeFd duplicates; owned by the pool from
  // here on, also on error). kFailedPrecondition if the id is not held back,
  // kInvalidArgument for kNoGroup.
  Status Adopt(PageId id, GroupId group, gpu::PageHandle handle, int fd);
  // Gives up on a held-back id: it joins the uncreated ids, so a fresh page
  // is created under it when needed. With `still_held`, a process still
  // holds its memory (a page adopted without a handle, returned by its last
  // holder): counted held after recycle, as Allocate's recycles are, until
  // DropHeldAfterRecycle. kFailedPrecondition if not held back.
  Status ReleaseHeldBack(PageId id, bool still_held = false);

  // Which group page `id` belongs to: granted to it, or (free true) on its
  // free list; group kNoGroup for an id no group has (free, uncreated, held
  // back, being created or recycled) or one outside the pool.
  struct Owner {
    GroupId group = kNoGroup;
    bool free = false;
  };
  Owner owner(PageId id) const;
  // The handle of a granted page; an invalid handle (value 0) otherwise.
  gpu::PageHandle handle(PageId id) const;
  // A new fd of granted page `id` for the caller to send and close: the fd
  // exported when the page was created (once), a duplicate of an adopted
  // page's (CUDA will not export an imported handle, so the pool keeps
  // that one), else a fresh export (a driver call, ~36-58 us on cuda, made
  // outside the lock). kFailedPrecondition for a page not granted.
  Result<int> TakeFd(PageId id);
  // The fd the pool keeps for granted page `id` (created ahead and not yet
  // taken, or adopted), -1 for none; the pool's own, for comparisons only.
  int kept_fd(PageId id) const;
  // Fds the pool keeps open now: pages created ahead, and adopted ones.
  size_t kept_fds() const;

  // Pages Allocate(group) can give without recycling another group's: its
  // own free list, the free stack, pages being created, and the room of
  // uncreated ids. Walks the group's list under the lock, so only for the
  // slow path (kvd asks while pages are held after recycle).
  size_t ObtainableWithoutRecycle(GroupId group) const;

  Stats stats() const;
  // OK, or kInternal naming the first invariant found broken.
  Status CheckInvariants() const;

  int device() const { return device_; }
  size_t page_bytes() const { return page_bytes_; }
  size_t capacity_pages() const { return capacity_; }

 private:
  enum class SlotState : uint8_t {
    kUncreated, kCreating, kFree, kGranted, kRecycling, kHeldBack, kGroupFree
  };
  struct Slot {
    gpu::PageHandle handle;
    int fd = -1;  // exported at creation and not taken yet, or adopted
    bool adopted = false;  // fd is an engine's: duplicated, never taken
    SlotState state = SlotState::kUncreated;
    // The group it is granted to or free for (kGranted, kGroupFree; the group
    // it will be granted to while kRecycling); kNoGroup in the other states.
    GroupId group = kNoGroup;
    // kGroupFree: the neighbours on the group's free list, newest first
    // (stale in the other states).
    PageId prev = kNoPage;
    PageId next = kNoPage;
  };

  PagePool(gpu::Backend& backend, int device, size_t page_bytes, uint32_t capacity,
           uint32_t reserve, bool export_fds, const std::vector<PageId>& held_back);

  // REQUIRES: lock_ held and free_count_ > 0. Grants the top of the free
  // stack to `group`. Sets *wake when the refill thread must be woken (after
  // lock_ is released).
  PageId PopFreeLocked(GroupId group, bool* wake);
  // The group free lists, all O(1). REQUIRES: lock_ held; for Push, the id
  // is granted and its group < group_count_; for Unlink, it is group-free.
  void PushGroupFreeLocked(PageId id);
  void UnlinkGroupFreeLocked(PageId id);
  // Grants a group-free id to its group again. REQUIRES: lock_ held.
  void RegrantGroupFreeLocked(PageId id);
  // A recycled id whose old page was released and that gets no new one (its
  // memory is still held away, or creating failed): out of the grant, back to
  // the uncreated ids.
  void UncreateRecycledLocked(PageId id);
  // Grants the newest page of `group`'s free list to it again, and returns
  // it. REQUIRES: lock_ held, the list is not empty.
  PageId PopGroupFreeLocked(GroupId group);
  // Another group's free page for Allocate to recycle: the newest of the
  // lowest-numbered group that has one; kNoPage if none. REQUIRES: lock_ held.
  PageId FindOtherGroupsFreeLocked(GroupId group) const;
  // Makes the group lists hold `group` (allocating outside the lock).
  // REQUIRES: lock_ not held; group != kNoGroup.
  void EnsureGroupList(GroupId group);
  // Claims an uncreated id for one CreatePage. REQUIRES: lock_ held, one exists.
  PageId ClaimUncreatedLocked();
  // Creates the physical page of a claimed id outside the lock, then
  // publishes it as granted to `group` (sync path) or free (ahead of demand:
  // group kNoGroup). On failure the id goes back to the uncreated stack.
  Status CreateClaimed(PageId id, GroupId group);
  // Releases the physical page of an id this caller holds in kRecycling
  // state (`old` its handle, `old_fd` its exported fd, taken off the slot)
  // and creates a fresh one under the same id, which ends granted to its
  // slot's group: the one way a page moves between groups. If the release
  // fails the id goes back as it was, fd included: granted, or with
  // `back_to` != kNoGroup, on that group's free list. Once the release is
  // done, *released (may be null) = id. On a create failure the id goes
  // back to the uncreated stack.
  // With `held` (StillHeld said so) no fresh page is made: the id joins the
  // uncreated ones, counted as held after recycle, and kResourceExhausted
  // is returned.
  Status RecycleSlot(PageId id, gpu::PageHandle old, int old_fd, GroupId back_to,
                     PageId* released, bool held = false);
  // Whether one more page may be created: the uncreated ids outnumber the
  // pages held after recycle (each of those is memory a process keeps).
  // REQUIRES: lock_ held.
  bool RoomLocked() const { return uncreated_count_ > held_after_recycle_; }
  Result<PageId> AllocateSlow(GroupId group, PageId* recycled);
  // Creates one physical page (and exports it, with export_fds) outside the
  // lock; on an export failure the page is released again.
  struct NewPage {
    gpu::PageHandle handle;
    int fd = -1;
  };
  Result<NewPage> MakePage();
  // Releases a page's handle and closes its fd.
  Status DropPage(gpu::PageHandle handle, int fd);
  // Creates pages until the reserve is full or capacity is reached.
  Status FillReserve();
  void RefillLoop();
  void WakeRefill();
  Status BadId(const char* call, PageId id) const;
  Status NotGranted(const char* call, PageId id, SlotState state) const;
  Status NotHeldBack(const char* call, PageId id, SlotState state) const;
  Status NotGroupFree(PageId id, GroupId group, SlotState state, GroupId owner) const;
  Status NoGroup(const char* call) const;
  Status Exhausted(uint32_t granted, uint32_t held_after_recycle) const;
  Status CreateError(const Status& cause, PageId id, uint32_t created) const;

  gpu::Backend& backend_;  // must remain live while the pool exists
  const int device_;
  const size_t page_bytes_;
  const uint32_t capacity_;
  const uint32_t reserve_;
  const bool export_fds_;

  // The hot state, guarded by lock_ and kept on the lock's cache line.
  alignas(64) mutable SpinLock lock_;
  uint32_t free_count_ = 0;  // size of the free stack
  uint32_t granted_ = 0;
  uint32_t group_free_ = 0;   // pages on the group free lists, all groups
  uint32_t group_count_ = 0;  // entries of group_heads_
  bool refill_active_ = false;          // refill thread woken, not yet idle again
  std::unique_ptr<PageId[]> free_ids_;  // free stack, capacity_ entries
  std::unique_ptr<Slot[]> slots_;       // indexed by PageId
  // By group: the newest page of its free list, kNoPage when empty. Grown
  // (doubling) by EnsureGroupList, never shrunk.
  std::unique_ptr<PageId[]> group_heads_;
  // The cold state, also guarded by lock_.
  std::unique_ptr<PageId[]> uncreated_ids_;  // stack of ids with no page yet
  uint32_t uncreated_count_ = 0;
  uint32_t creating_ = 0;  // CreatePage calls in flight (claimed ids)
  uint32_t created_ = 0;
  uint64_t background_creates_ = 0;
  uint64_t sync_creates_ = 0;
  uint64_t create_failures_ = 0;
  uint64_t recycles_ = 0;
  uint32_t held_back_ = 0;
  uint32_t held_after_recycle_ = 0;  // see Stats::held_after_recycle_pages

  // Only to wake and stop the refill thread.
  std::mutex refill_mu_;
  std::condition_variable refill_cv_;
  bool wake_ = false;  // guarded by refill_mu_
  bool stop_ = false;  // guarded by refill_mu_
  std::thread refill_thread_;
  StillHeld still_held_;  // set before use, read on the recycle path only
};

// ---- The group free lists: inline, as Allocate and Free use them. ----

inline void PagePool::PushGroupFreeLocked(PageId id) {
  Slot& slot = slots_[id];
  const PageId head = group_heads_[slot.group];
  slot.state = SlotState::kGroupFree;
  slot.prev = kNoPage;
  slot.next = head;
  if (head != kNoPage) slots_[head].prev = id;
  group_heads_[slot.group] = id;
  ++group_free_;
}

inline void PagePool::UnlinkGroupFreeLocked(PageId id) {
  Slot& slot = slots_[id];
  if (slot.prev == kNoPage) {
    group_heads_[slot.group] = slot.next;
  } else {
    slots_[slot.prev].next = slot.next;
  }
  if (slot.next != kNoPage) slots_[slot.next].prev = slot.prev;
  --group_free_;
}

inline PageId PagePool::PopGroupFreeLocked(GroupId group) {
  // The head has no prev: only the next page's link changes.
  const PageId id = group_heads_[group];
  Slot& slot = slots_[id];
  group_heads_[group] = slot.next;
  if (slot.next != kNoPage) slots_[slot.next].prev = kNoPage;
  slot.state = SlotState::kGranted;  // its links mean nothing from here on
  --group_free_;
  ++granted_;
  return id;
}

inline void PagePool::UncreateRecycledLocked(PageId id) {
  Slot& slot = slots_[id];
  slot.handle = {};
  slot.adopted = false;
  slot.group = kNoGroup;
  slot.state = SlotState::kUncreated;
  uncreated_ids_[uncreated_count_++] = id;
  --created_;
  --granted_;
}

inline void PagePool::RegrantGroupFreeLocked(PageId id) {
  UnlinkGroupFreeLocked(id);
  slots_[id].state = SlotState::kGranted;
  ++granted_;
}

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_NODE_PAGE_POOL_H_
