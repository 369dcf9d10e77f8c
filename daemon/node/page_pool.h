// The page pool of ONE device: physical pages created ahead of demand and
// granted by dense page id. kvd keeps one per GPU it owns.
//
// Invariants (CheckInvariants() walks the state and verifies each; tests call it):
//   1. free_pages + granted_pages == created_pages <= capacity_pages (the
//      pool's part of invariant 1, docs/ARCHITECTURE.md "Invariants"; the
//      object store's pages are granted pages, held by its own tenant).
//   2. Every page id is in exactly one state: uncreated (on the uncreated
//      stack), creating (claimed by one CreatePage in flight), free (on the
//      free stack, exactly once), granted, recycling (granted, its physical
//      page being replaced), or held back (a restarted kvd waits for the
//      engine holding it to hand it back: Adopt).
//   3. A created id (free, granted) holds a valid handle, never another id's;
//      an uncreated one holds none.
//   4. The pool never creates more than capacity_pages pages: an id must be
//      claimed from the uncreated stack before CreatePage is called for it.
//
// Threads: every method is safe to call from many threads. Pages are created
// outside any lock. The free stack is guarded by a spinlock held for a few
// instructions; a mutex and condition variable are used only to wake the
// refill thread, and only when the free count drops below the reserve.
//
// Room left for later (DESIGN.md): per-tenant-group free lists become one
// free stack per group, and a page that changes group goes through
// RecycleSlot (release + fresh create under the same id) so its old memory
// never reaches the new group (invariant 2 of DESIGN.md).
#ifndef NANOKV_DAEMON_NODE_PAGE_POOL_H_
#define NANOKV_DAEMON_NODE_PAGE_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/node/page_types.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::alloc {

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
  // handing a page to another process costs no export on the grant path.
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
    size_t free_pages = 0;
    size_t granted_pages = 0;
    size_t reserve_pages = 0;
    size_t creating_pages = 0;  // CreatePage calls in flight right now
    // Pages created ahead of demand: the initial fill and the refill thread.
    uint64_t background_creates = 0;
    // Pages Allocate had to create itself because the free stack was empty:
    // non-zero means the reserve is too small for the grant rate.
    uint64_t sync_creates = 0;
    uint64_t create_failures = 0;  // CreatePage errors, all paths
    uint64_t recycles = 0;         // successful Recycle calls
    size_t held_back_pages = 0;    // ids awaiting Adopt or ReleaseHeldBack
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

  // Grants a page. Hot path: pop an id from the free stack under the
  // spinlock; no syscall, no driver call, no allocation. Only when the free
  // count first drops below the reserve does it wake the refill thread (a
  // mutex and a futex wake, once per dip, not per grant).
  // If the free stack is empty it falls to an out-of-line slow path that
  // creates a page synchronously (counted in sync_creates).
  // Errors: kResourceExhausted when all capacity_pages are granted; the
  // backend's error (e.g. kOutOfMemory) when a needed page cannot be created.
  Result<PageId> Allocate();

  // Gives a granted page back (O(1), no syscall). The page keeps its memory
  // and contents: callers that need it clean must clear or Recycle it.
  // kInvalidArgument for an id outside the pool, kFailedPrecondition for an
  // id that is not granted (double free, never allocated, being recycled).
  Status Free(PageId id);

  // Replaces the physical page under a granted id with a freshly created one
  // (zero-filled by the driver or memfd) and keeps the id granted. The old
  // page is released first, so this works on a full device too; mappings of
  // the old page elsewhere keep the old memory alive (backend.h rule 3).
  // kInvalidArgument / kFailedPrecondition as Free. If the new page cannot be
  // created, the id is no longer granted (it returns to the uncreated set)
  // and the backend's error is returned.
  Status Recycle(PageId id);

  // Takes a held-back id into service as granted, with a page that already
  // exists: `handle` (imported from an engine's fd) and `fd` (an fd of it the
  // pool will hand out as exported_fd; owned by the pool from here on, also
  // on error). kFailedPrecondition if the id is not held back.
  Status Adopt(PageId id, gpu::PageHandle handle, int fd);
  // Gives up on a held-back id: it joins the uncreated ids, so a fresh page
  // is created under it when needed. kFailedPrecondition if not held back.
  Status ReleaseHeldBack(PageId id);

  // The handle of a granted page; an invalid handle (value 0) otherwise.
  gpu::PageHandle handle(PageId id) const;
  // With export_fds: the fd of a granted page, owned by the pool (callers
  // send or dup it, never close it); -1 otherwise. A Recycle replaces it.
  int exported_fd(PageId id) const;

  Stats stats() const;
  // OK, or kInternal naming the first invariant found broken.
  Status CheckInvariants() const;

  int device() const { return device_; }
  size_t page_bytes() const { return page_bytes_; }
  size_t capacity_pages() const { return capacity_; }

 private:
  enum class SlotState : uint8_t { kUncreated, kCreating, kFree, kGranted, kRecycling, kHeldBack };
  struct Slot {
    gpu::PageHandle handle;
    int fd = -1;  // exported fd, with export_fds
    SlotState state = SlotState::kUncreated;
  };

  PagePool(gpu::Backend& backend, int device, size_t page_bytes, uint32_t capacity,
           uint32_t reserve, bool export_fds, const std::vector<PageId>& held_back);

  // REQUIRES: lock_ held and free_count_ > 0. Sets *wake when the refill
  // thread must be woken (after lock_ is released).
  PageId PopFreeLocked(bool* wake);
  // Claims an uncreated id for one CreatePage. REQUIRES: lock_ held, one exists.
  PageId ClaimUncreatedLocked();
  // Creates the physical page of a claimed id outside the lock, then
  // publishes it as granted (sync path) or free (ahead of demand). On failure
  // the id goes back to the uncreated stack.
  Status CreateClaimed(PageId id, bool grant);
  // Releases the physical page of an id this caller holds in kRecycling
  // state (`old` is its handle) and creates a fresh one under the same id,
  // which ends granted. The building block for moving a page between tenant
  // groups. On a create failure the id goes back to the uncreated stack.
  Status RecycleSlot(PageId id, gpu::PageHandle old);
  Result<PageId> AllocateSlow();
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
  Status Exhausted(uint32_t granted) const;
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
  bool refill_active_ = false;          // refill thread woken, not yet idle again
  std::unique_ptr<PageId[]> free_ids_;  // free stack, capacity_ entries
  std::unique_ptr<Slot[]> slots_;       // indexed by PageId
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

  // Only to wake and stop the refill thread.
  std::mutex refill_mu_;
  std::condition_variable refill_cv_;
  bool wake_ = false;  // guarded by refill_mu_
  bool stop_ = false;  // guarded by refill_mu_
  std::thread refill_thread_;
};

}  // namespace nanokv::alloc

#endif  // NANOKV_DAEMON_NODE_PAGE_POOL_H_
