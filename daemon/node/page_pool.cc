#include "daemon/node/page_pool.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

namespace nanokv::kvd {
namespace {

// The refill thread's back-off after a CreatePage failure: doubling from the
// minimum, so a full device costs a few attempts per second, not a spin.
constexpr std::chrono::milliseconds kMinBackoff{1};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

}  // namespace

Result<std::unique_ptr<PagePool>> PagePool::Create(gpu::Backend& backend,
                                                   const PagePoolConfig& config) {
  NANOKV_ASSIGN_OR_RETURN(gpu::DeviceInfo info, backend.GetDeviceInfo(config.device));
  const std::string where = "page pool on device " + std::to_string(config.device) + " (" +
                            info.name + ")";
  if (config.page_bytes == 0 || info.granularity == 0 ||
      config.page_bytes % info.granularity != 0) {
    return Status::InvalidArgument(where + ": page size " + std::to_string(config.page_bytes) +
                                   " is not a non-zero multiple of the device's granularity " +
                                   std::to_string(info.granularity));
  }
  size_t capacity_bytes = config.capacity_bytes;
  std::string capacity_source = "capacity_bytes";
  if (capacity_bytes == 0) {
    // Written so that NaN fails too.
    if (!(config.gpu_utilization > 0.0 && config.gpu_utilization <= 1.0)) {
      return Status::InvalidArgument(where + ": gpu_utilization " +
                                     std::to_string(config.gpu_utilization) +
                                     " is not in (0, 1]");
    }
    capacity_bytes = static_cast<size_t>(static_cast<double>(info.total_bytes) *
                                         config.gpu_utilization);
    capacity_source = "gpu_utilization " + std::to_string(config.gpu_utilization) + " of " +
                      std::to_string(info.total_bytes) + " bytes";
  }
  const size_t pages = capacity_bytes / config.page_bytes;
  if (pages == 0) {
    return Status::InvalidArgument(where + ": capacity of " + std::to_string(capacity_bytes) +
                                   " bytes (" + capacity_source + ") holds no page of " +
                                   std::to_string(config.page_bytes) + " bytes");
  }
  if (pages > std::numeric_limits<PageId>::max()) {
    return Status::InvalidArgument(where + ": " + std::to_string(pages) +
                                   " pages do not fit a 32-bit page id; use larger pages");
  }
  const auto capacity = static_cast<uint32_t>(pages);
  const auto reserve = static_cast<uint32_t>(std::min<size_t>(config.reserve_pages, pages));
  std::vector<bool> seen(pages, false);
  for (PageId id : config.held_back) {
    if (id >= pages || seen[id]) {
      return Status::InvalidArgument(where + ": held-back page id " + std::to_string(id) +
                                     (id >= pages ? " is beyond the capacity of " +
                                                        std::to_string(pages) + " pages"
                                                  : " is listed twice"));
    }
    seen[id] = true;
  }

  std::unique_ptr<PagePool> pool(
      new PagePool(backend, config.device, config.page_bytes, capacity, reserve, config.export_fds,
                   config.held_back));
  // Synchronously, so the first grants find pages ready. On failure the
  // destructor releases what was made.
  Status filled = pool->FillReserve();
  if (!filled.ok()) {
    return Status(filled.code(),
                  "filling the reserve of " + std::to_string(reserve) + " pages: " +
                      std::string(filled.message()),
                  filled.call(), filled.error_name());
  }
  try {
    pool->refill_thread_ = std::thread(&PagePool::RefillLoop, pool.get());
  } catch (const std::system_error& e) {
    return Status::Internal(where + ": cannot start the refill thread: " + e.what());
  }
  // A name shows in top -H and in gdb; failure to set it changes nothing.
  pthread_setname_np(pool->refill_thread_.native_handle(), "nanokv-refill");
  spdlog::info("{}: {} pages of {} bytes ({}), reserve {}", where, capacity, config.page_bytes,
               capacity_source, reserve);
  return pool;
}

PagePool::PagePool(gpu::Backend& backend, int device, size_t page_bytes, uint32_t capacity,
                   uint32_t reserve, bool export_fds, const std::vector<PageId>& held_back)
    : backend_(backend),
      device_(device),
      page_bytes_(page_bytes),
      capacity_(capacity),
      reserve_(reserve),
      export_fds_(export_fds),
      free_ids_(new PageId[capacity]),
      slots_(new Slot[capacity]),
      uncreated_ids_(new PageId[capacity]) {
  for (PageId id : held_back) slots_[id].state = SlotState::kHeldBack;
  held_back_ = static_cast<uint32_t>(held_back.size());
  // Highest id at the bottom, so pages are created in id order 0, 1, 2...
  for (uint32_t i = 0; i < capacity; ++i) {
    const PageId id = capacity - 1 - i;
    if (slots_[id].state == SlotState::kUncreated) uncreated_ids_[uncreated_count_++] = id;
  }
}

PagePool::~PagePool() {
  {
    std::lock_guard<std::mutex> guard(refill_mu_);
    stop_ = true;
  }
  refill_cv_.notify_all();
  if (refill_thread_.joinable()) refill_thread_.join();

  size_t released = 0;
  size_t still_granted = 0;
  for (uint32_t id = 0; id < capacity_; ++id) {
    Slot& slot = slots_[id];
    if (slot.state == SlotState::kUncreated || slot.state == SlotState::kHeldBack) continue;
    if (slot.state != SlotState::kFree && slot.state != SlotState::kGroupFree &&
        slot.state != SlotState::kGranted) {
      // Only possible if a method still runs on another thread (a caller bug).
      spdlog::error("page pool on device {}: page id {} is mid-creation at teardown; left alone",
                    device_, id);
      continue;
    }
    if (slot.state == SlotState::kGranted) ++still_granted;
    Status status = DropPage(slot.handle, slot.fd);
    if (status.ok()) {
      ++released;
    } else {
      // Log, never abort: the rest of the pages must still be released.
      spdlog::error("page pool on device {}: releasing page id {}: {}", device_, id,
                    status.ToString());
    }
  }
  spdlog::debug("page pool on device {}: released {} pages ({} still granted)", device_,
                released, still_granted);
}

// ---- The hot path: a pop and a push under the spinlock. ----

// Inlined into Allocate: a call here would cost as much as the pop itself.
[[gnu::always_inline]] inline PageId PagePool::PopFreeLocked(GroupId group, bool* wake) {
  const PageId id = free_ids_[--free_count_];
  Slot& slot = slots_[id];
  assert(slot.state == SlotState::kFree && slot.group == kNoGroup);
  slot.state = SlotState::kGranted;
  slot.group = group;
  ++granted_;
  // Wake the refill thread once per dip below the reserve, not per grant:
  // refill_active_ stays set until the thread finds the reserve full again.
  if (free_count_ < reserve_ && !refill_active_ && uncreated_count_ > held_after_recycle_)
      [[unlikely]] {
    refill_active_ = true;
    *wake = true;
  }
  return id;
}

Result<PageId> PagePool::Allocate(GroupId group, PageId* recycled) {
  if (recycled != nullptr) *recycled = kNoPage;
  bool wake = false;
  lock_.lock();
  // A group with no list yet (its first grant) goes the slow way.
  if (group < group_count_) [[likely]] {
    if (group_heads_[group] != kNoPage) {
      const PageId own = PopGroupFreeLocked(group);
      lock_.unlock();
      return own;
    }
    if (free_count_ != 0) [[likely]] {
      const PageId id = PopFreeLocked(group, &wake);
      lock_.unlock();
      if (wake) [[unlikely]] WakeRefill();
      return id;
    }
  }
  lock_.unlock();
  return AllocateSlow(group, recycled);
}

Status PagePool::Free(PageId id) {
  if (id >= capacity_) [[unlikely]] return BadId("Free", id);
  SlotState state;
  {
    std::lock_guard<SpinLock> guard(lock_);
    state = slots_[id].state;
    if (state == SlotState::kGranted) [[likely]] {
      --granted_;
      PushGroupFreeLocked(id);  // a granted id's group always has a list
      return Status::OK();
    }
  }
  return NotGranted("Free", id, state);
}

// ---- Slow paths, out of line so the hot ones stay small. ----

[[gnu::noinline]] Result<PageId> PagePool::AllocateSlow(GroupId group, PageId* recycled) {
  if (group == kNoGroup) return NoGroup("Allocate");
  EnsureGroupList(group);
  for (;;) {
    bool wake = false;
    bool claimed = false;
    bool in_flight = false;
    PageId id = kNoPage;
    PageId other = kNoPage;  // another group's free page, to recycle
    GroupId other_group = kNoGroup;
    gpu::PageHandle old;
    int old_fd = -1;
    uint32_t granted = 0;
    lock_.lock();
    // Refilled or given back between our two looks.
    if (group_heads_[group] != kNoPage) {
      const PageId own = PopGroupFreeLocked(group);
      lock_.unlock();
      return own;
    }
    if (free_count_ > 0) {
      id = PopFreeLocked(group, &wake);
      lock_.unlock();
      if (wake) WakeRefill();
      return id;
    }
    if (RoomLocked()) {
      id = ClaimUncreatedLocked();
      claimed = true;
      // The reserve is empty: make sure the refill thread is on it too.
      if (reserve_ > 0 && !refill_active_ && RoomLocked()) {
        refill_active_ = true;
        wake = true;
      }
    } else if (creating_ == 0) {
      // Every page is created and none is free for this group: recycle the
      // free page of another group, its bytes released first (invariant 5).
      other = FindOtherGroupsFreeLocked(group);
      if (other != kNoPage) {
        Slot& slot = slots_[other];
        other_group = slot.group;
        UnlinkGroupFreeLocked(other);
        slot.state = SlotState::kRecycling;  // granted to `group` once fresh
        slot.group = group;
        ++granted_;
        old = slot.handle;
        old_fd = std::exchange(slot.fd, -1);
      }
    }
    in_flight = creating_ > 0;
    granted = granted_;
    const uint32_t held_away = held_after_recycle_;
    lock_.unlock();
    if (wake) WakeRefill();
    if (claimed) {
      NANOKV_RETURN_IF_ERROR(CreateClaimed(id, group));
      return id;
    }
    if (other != kNoPage) {
      // Outside the lock: the owner's model of who imported what.
      const bool held = still_held_ && still_held_(other);
      NANOKV_RETURN_IF_ERROR(RecycleSlot(other, old, old_fd, other_group, recycled, held));
      return other;
    }
    if (!in_flight) return Exhausted(granted, held_away);
    // Every id is created or being created and none is free: a CreatePage
    // in flight lands within microseconds (or fails and frees its id).
    std::this_thread::yield();
  }
}

PageId PagePool::ClaimUncreatedLocked() {
  assert(uncreated_count_ > 0);
  const PageId id = uncreated_ids_[--uncreated_count_];
  assert(slots_[id].state == SlotState::kUncreated);
  slots_[id].state = SlotState::kCreating;
  ++creating_;
  return id;
}

Result<PagePool::NewPage> PagePool::MakePage() {
  // Outside any lock: CreatePage (~13-18 us) and export (~36-58 us) are
  // driver calls. Exporting here, ahead of demand, keeps export off grants.
  NANOKV_ASSIGN_OR_RETURN(gpu::PageHandle handle, backend_.CreatePage(device_, page_bytes_));
  NewPage page{handle, -1};
  if (export_fds_) {
    auto fd = backend_.ExportPage(handle);
    if (!fd.ok()) {
      Status released = backend_.ReleasePage(handle);
      if (!released.ok()) spdlog::error("page pool: releasing an unexported page: {}", released.ToString());
      return fd.status();
    }
    page.fd = *fd;
  }
  return page;
}

Status PagePool::DropPage(gpu::PageHandle handle, int fd) {
  if (fd >= 0) close(fd);
  return backend_.ReleasePage(handle);
}

Status PagePool::CreateClaimed(PageId id, GroupId group) {
  Result<NewPage> page = MakePage();
  uint32_t created = 0;
  {
    std::lock_guard<SpinLock> guard(lock_);
    --creating_;
    Slot& slot = slots_[id];
    assert(slot.state == SlotState::kCreating);
    if (page.ok()) {
      assert(page->handle.valid());
      slot.handle = page->handle;
      slot.fd = page->fd;
      ++created_;
      if (group != kNoGroup) {
        slot.state = SlotState::kGranted;
        slot.group = group;
        ++granted_;
        ++sync_creates_;
      } else {
        slot.state = SlotState::kFree;
        free_ids_[free_count_++] = id;
        ++background_creates_;
      }
      return Status::OK();
    }
    slot.state = SlotState::kUncreated;
    uncreated_ids_[uncreated_count_++] = id;
    ++create_failures_;
    created = created_;
  }
  return CreateError(page.status(), id, created);
}

// ---- Background refill. ----

Status PagePool::FillReserve() {
  for (;;) {
    PageId id;
    {
      std::lock_guard<SpinLock> guard(lock_);
      if (free_count_ >= reserve_ || !RoomLocked()) {
        refill_active_ = false;  // the next dip below the reserve wakes us again
        return Status::OK();
      }
      id = ClaimUncreatedLocked();
    }
    // On failure refill_active_ stays set, so grants do not wake us during
    // the back-off; RefillLoop retries on its own.
    NANOKV_RETURN_IF_ERROR(CreateClaimed(id, /*group=*/kNoGroup));
  }
}

void PagePool::WakeRefill() {
  {
    std::lock_guard<std::mutex> guard(refill_mu_);
    wake_ = true;  // sticky, so a wake before the thread waits is not lost
  }
  refill_cv_.notify_one();
}

void PagePool::RefillLoop() {
  std::chrono::milliseconds backoff{0};
  uint64_t failures_in_row = 0;
  std::unique_lock<std::mutex> lock(refill_mu_);
  for (;;) {
    if (backoff.count() == 0) {
      refill_cv_.wait(lock, [this] { return wake_ || stop_; });
    } else {
      refill_cv_.wait_for(lock, backoff, [this] { return stop_; });
    }
    if (stop_) return;
    wake_ = false;
    lock.unlock();
    Status status = FillReserve();
    if (status.ok()) {
      if (failures_in_row > 0) {
        spdlog::info("page pool on device {}: refill recovered after {} failed attempts",
                     device_, failures_in_row);
      }
      failures_in_row = 0;
      backoff = std::chrono::milliseconds{0};
    } else {
      // Log the first failure of a run only: the back-off retries would flood.
      if (failures_in_row++ == 0) {
        spdlog::warn("page pool on device {}: refill failed, backing off: {}", device_,
                     status.ToString());
      }
      backoff = backoff.count() == 0 ? kMinBackoff : std::min(backoff * 2, kMaxBackoff);
    }
    lock.lock();
  }
}

// ---- Queries. ----

PagePool::Owner PagePool::owner(PageId id) const {
  if (id >= capacity_) return {};
  std::lock_guard<SpinLock> guard(lock_);
  const Slot& slot = slots_[id];
  if (slot.state == SlotState::kGranted) return {slot.group, false};
  if (slot.state == SlotState::kGroupFree) return {slot.group, true};
  return {};
}

gpu::PageHandle PagePool::handle(PageId id) const {
  if (id >= capacity_) return {};
  std::lock_guard<SpinLock> guard(lock_);
  const Slot& slot = slots_[id];
  return slot.state == SlotState::kGranted ? slot.handle : gpu::PageHandle{};
}

Result<int> PagePool::TakeFd(PageId id) {
  if (id >= capacity_) return BadId("TakeFd", id);
  gpu::PageHandle handle;
  {
    std::lock_guard<SpinLock> guard(lock_);
    Slot& slot = slots_[id];
    if (slot.state != SlotState::kGranted) return NotGranted("TakeFd", id, slot.state);
    if (slot.adopted && slot.fd >= 0) {
      int fd = fcntl(slot.fd, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) return Status::FromErrno("fcntl(F_DUPFD_CLOEXEC)", errno, "an adopted page's fd");
      return fd;
    }
    if (slot.fd >= 0) return std::exchange(slot.fd, -1);
    handle = slot.handle;
  }
  // A granted page's handle stays valid while it is granted, and only the
  // caller's thread (kvd's server) frees or recycles granted pages.
  return backend_.ExportPage(handle);
}

int PagePool::kept_fd(PageId id) const {
  if (id >= capacity_) return -1;
  std::lock_guard<SpinLock> guard(lock_);
  const Slot& slot = slots_[id];
  return slot.state == SlotState::kGranted ? slot.fd : -1;
}

size_t PagePool::kept_fds() const {
  std::lock_guard<SpinLock> guard(lock_);
  size_t n = 0;
  for (uint32_t id = 0; id < capacity_; ++id) n += slots_[id].fd >= 0;
  return n;
}

PagePool::Stats PagePool::stats() const {
  Stats out;
  out.capacity_pages = capacity_;
  out.page_bytes = page_bytes_;
  out.reserve_pages = reserve_;
  std::lock_guard<SpinLock> guard(lock_);
  out.created_pages = created_;
  out.free_pages = free_count_ + group_free_;
  out.group_free_pages = group_free_;
  out.granted_pages = granted_;
  out.creating_pages = creating_;
  out.background_creates = background_creates_;
  out.sync_creates = sync_creates_;
  out.create_failures = create_failures_;
  out.recycles = recycles_;
  out.held_back_pages = held_back_;
  out.held_after_recycle_pages = held_after_recycle_;
  return out;
}

}  // namespace nanokv::kvd
