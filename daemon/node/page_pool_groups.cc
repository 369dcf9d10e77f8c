// PagePool: pages changing hands off the hot path. A group's free page taken
// by id, the group lists grown, pages recycled (the one way a page moves
// between groups), and the ids a restarted kvd holds back.
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "daemon/node/page_pool.h"

namespace nanokv::kvd {
namespace {

// The group lists start this long: kvd has a few groups, rarely more.
constexpr uint32_t kMinGroupLists = 8;

}  // namespace

// ---- The group free lists. ----

Status PagePool::TakeGroupFree(PageId id, GroupId group) {
  if (id >= capacity_) return BadId("TakeGroupFree", id);
  SlotState state;
  GroupId owner;
  {
    std::lock_guard<SpinLock> guard(lock_);
    const Slot& slot = slots_[id];
    state = slot.state;
    owner = slot.group;
    if (state == SlotState::kGroupFree && owner == group) {
      RegrantGroupFreeLocked(id);
      return Status::OK();
    }
  }
  return NotGroupFree(id, group, state, owner);
}

PageId PagePool::FindOtherGroupsFreeLocked(GroupId group) const {
  for (GroupId other = 0; other < group_count_; ++other) {
    if (other != group && group_heads_[other] != kNoPage) return group_heads_[other];
  }
  return kNoPage;
}

void PagePool::EnsureGroupList(GroupId group) {
  assert(group != kNoGroup);
  for (;;) {
    uint32_t count;
    {
      std::lock_guard<SpinLock> guard(lock_);
      count = group_count_;
    }
    if (group < count) return;
    // Doubling, so a run of new groups costs O(1) each.
    const uint32_t grown = count > UINT32_MAX / 2 ? UINT32_MAX : count * 2;
    const uint32_t want = std::max({group + 1, grown, kMinGroupLists});
    std::unique_ptr<PageId[]> heads(new PageId[want]);
    std::fill(heads.get(), heads.get() + want, kNoPage);
    {
      std::lock_guard<SpinLock> guard(lock_);
      if (group_count_ == count) {
        std::copy(group_heads_.get(), group_heads_.get() + count, heads.get());
        group_heads_.swap(heads);
        group_count_ = want;
        return;  // the old array is freed here, after the lock is released
      }
    }
    // Another thread grew the lists meanwhile: look again.
  }
}

// ---- Recycling: release + fresh create under the same id. ----

Status PagePool::Recycle(PageId id) {
  if (id >= capacity_) return BadId("Recycle", id);
  gpu::PageHandle old;
  int old_fd = -1;
  SlotState state;
  {
    std::lock_guard<SpinLock> guard(lock_);
    Slot& slot = slots_[id];
    state = slot.state;
    if (state == SlotState::kGranted) {
      slot.state = SlotState::kRecycling;  // Free, handle and Recycle now refuse it
      old = slot.handle;
      old_fd = std::exchange(slot.fd, -1);
    }
  }
  if (state != SlotState::kGranted) return NotGranted("Recycle", id, state);
  return RecycleSlot(id, old, old_fd, kNoGroup, nullptr);
}

Status PagePool::RecycleSlot(PageId id, gpu::PageHandle old, int old_fd, GroupId back_to,
                             PageId* released, bool held) {
  // Release first: on a full device there may be no room for a second page.
  Status release = backend_.ReleasePage(old);
  if (!release.ok()) {
    // The old page is still held: put the id back as it was.
    {
      std::lock_guard<SpinLock> guard(lock_);
      Slot& slot = slots_[id];
      slot.fd = old_fd;
      if (back_to == kNoGroup) {
        slot.state = SlotState::kGranted;
      } else {
        slot.group = back_to;
        --granted_;
        PushGroupFreeLocked(id);
      }
    }
    return Status(release.code(),
                  "page pool on device " + std::to_string(device_) + ": recycling page id " +
                      std::to_string(id) + ", releasing the old page: " +
                      std::string(release.message()),
                  release.call(), release.error_name());
  }
  if (old_fd >= 0) close(old_fd);  // the old page's fd must not reach anyone again
  if (released != nullptr) *released = id;
  if (held) {
    // The old memory lives on in a holder: a fresh page now would be one
    // more than the capacity (the recycle charge, ARCHITECTURE.md "The page
    // pool"). The id waits, uncreated.
    uint32_t held_away;
    {
      std::lock_guard<SpinLock> guard(lock_);
      assert(slots_[id].state == SlotState::kRecycling);
      UncreateRecycledLocked(id);
      held_away = ++held_after_recycle_;
    }
    return Status::ResourceExhausted("device " + std::to_string(device_) + " is full: " + std::to_string(held_away) +
                                     " of its " + std::to_string(capacity_) +
                                     " pages are held after recycle (page id " + std::to_string(id) +
                                     " was recycled away from a group whose engines still hold it; they were told to "
                                     "forget it, and its room comes back once they have)")
        .WithHint(Hint::kRetryAfterForget);
  }
  Result<NewPage> fresh = MakePage();
  uint32_t created = 0;
  {
    std::lock_guard<SpinLock> guard(lock_);
    Slot& slot = slots_[id];
    assert(slot.state == SlotState::kRecycling);
    if (fresh.ok()) {
      slot.handle = fresh->handle;
      slot.fd = fresh->fd;
      slot.adopted = false;  // a page of kvd's own now: exportable
      slot.state = SlotState::kGranted;
      ++recycles_;
      return Status::OK();
    }
    // The old page is gone and no new one came: the id leaves the grant.
    UncreateRecycledLocked(id);
    ++create_failures_;
    created = created_;
  }
  Status error = CreateError(fresh.status(), id, created);
  return Status(error.code(),
                std::string(error.message()) + " (recycle: the old page was released, so id " +
                    std::to_string(id) + " is no longer granted)",
                error.call(), error.error_name());
}

size_t PagePool::ObtainableWithoutRecycle(GroupId group) const {
  std::lock_guard<SpinLock> guard(lock_);
  size_t pages = free_count_ + creating_;
  if (uncreated_count_ > held_after_recycle_) pages += uncreated_count_ - held_after_recycle_;
  if (group < group_count_) {
    for (PageId id = group_heads_[group]; id != kNoPage; id = slots_[id].next) ++pages;
  }
  return pages;
}

Status PagePool::DropHeldAfterRecycle(uint32_t pages) {
  bool wake = false;
  {
    std::lock_guard<SpinLock> guard(lock_);
    if (pages > held_after_recycle_) {
      return Status::FailedPrecondition(
          "page pool on device " + std::to_string(device_) + ": dropping " +
          std::to_string(pages) + " pages held after recycle of " +
          std::to_string(held_after_recycle_) + " counted");
    }
    held_after_recycle_ -= pages;
    // Room again: refill the reserve, as a grant's dip below it would.
    if (free_count_ < reserve_ && !refill_active_ && RoomLocked()) {
      refill_active_ = true;
      wake = true;
    }
  }
  if (wake) WakeRefill();
  return Status::OK();
}

// ---- Held-back ids (kvd restart). ----

Status PagePool::Adopt(PageId id, GroupId group, gpu::PageHandle handle, int fd) {
  if (id >= capacity_ || group == kNoGroup) {
    if (fd >= 0) close(fd);
    return id >= capacity_ ? BadId("Adopt", id) : NoGroup("Adopt");
  }
  EnsureGroupList(group);  // so that a Free of it finds its group's list
  SlotState state;
  {
    std::lock_guard<SpinLock> guard(lock_);
    Slot& slot = slots_[id];
    state = slot.state;
    if (state == SlotState::kHeldBack) {
      slot.handle = handle;
      slot.fd = fd;
      slot.adopted = true;
      slot.state = SlotState::kGranted;
      slot.group = group;
      --held_back_;
      ++created_;
      ++granted_;
      return Status::OK();
    }
  }
  if (fd >= 0) close(fd);
  return NotHeldBack("Adopt", id, state);
}

Status PagePool::ReleaseHeldBack(PageId id, bool still_held) {
  if (id >= capacity_) return BadId("ReleaseHeldBack", id);
  SlotState state;
  {
    std::lock_guard<SpinLock> guard(lock_);
    Slot& slot = slots_[id];
    state = slot.state;
    if (state == SlotState::kHeldBack) {
      slot.state = SlotState::kUncreated;
      uncreated_ids_[uncreated_count_++] = id;
      --held_back_;
      if (still_held) ++held_after_recycle_;
      return Status::OK();
    }
  }
  return NotHeldBack("ReleaseHeldBack", id, state);
}

}  // namespace nanokv::kvd
