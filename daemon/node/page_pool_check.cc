// PagePool's invariant check and its error messages: out of line, and out of
// the file that holds the hot path.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "daemon/node/page_pool.h"

namespace nanokv::kvd {

Status PagePool::CheckInvariants() const {
  // Scratch is allocated before taking the spinlock, which must never be
  // held across an allocation.
  // 1: on the free stack, 2: on the uncreated one, 4: on a group free list.
  std::vector<uint8_t> listed(capacity_, 0);
  std::vector<uint64_t> handles;
  handles.reserve(capacity_);
  char error[256] = "";
  auto fail = [&error](const char* what, uint64_t a, uint64_t b) {
    if (error[0] == '\0') {
      std::snprintf(error, sizeof(error), "%s (%" PRIu64 ", %" PRIu64 ")", what, a, b);
    }
  };
  auto state_of = [this](PageId id) { return static_cast<uint64_t>(slots_[id].state); };
  {
    std::lock_guard<SpinLock> guard(lock_);
    for (uint32_t i = 0; i < free_count_; ++i) {
      const PageId id = free_ids_[i];
      if (id >= capacity_) {
        fail("free stack holds an id out of range (id, capacity)", id, capacity_);
        break;
      }
      if (listed[id] & 1) fail("id twice on the free stack (id, position)", id, i);
      if (slots_[id].state != SlotState::kFree) {
        fail("free stack holds a non-free id (id, state)", id, state_of(id));
      }
      listed[id] |= 1;
    }
    for (uint32_t i = 0; i < uncreated_count_; ++i) {
      const PageId id = uncreated_ids_[i];
      if (id >= capacity_) {
        fail("uncreated stack holds an id out of range (id, capacity)", id, capacity_);
        break;
      }
      if (listed[id] & 2) fail("id twice on the uncreated stack (id, position)", id, i);
      if (slots_[id].state != SlotState::kUncreated) {
        fail("uncreated stack holds a created id (id, state)", id, state_of(id));
      }
      listed[id] |= 2;
    }
    // Each group's list: ids of that group, linked both ways, no cycle (a
    // walk longer than the pool is one).
    uint32_t n_listed_group_free = 0;
    for (GroupId group = 0; group < group_count_; ++group) {
      PageId prev = kNoPage;
      uint32_t steps = 0;
      for (PageId id = group_heads_[group]; id != kNoPage; id = slots_[id].next) {
        if (id >= capacity_) {
          fail("group free list holds an id out of range (group, id)", group, id);
          break;
        }
        if (listed[id] & 4 || ++steps > capacity_) {
          fail("id twice on the group free lists, or a cycle (group, id)", group, id);
          break;
        }
        listed[id] |= 4;
        const Slot& slot = slots_[id];
        if (slot.state != SlotState::kGroupFree) {
          fail("group free list holds an id not group-free (id, state)", id, state_of(id));
        }
        if (slot.group != group) fail("id on another group's free list (id, group)", id, group);
        if (slot.prev != prev) fail("group free list links disagree (id, prev)", id, slot.prev);
        prev = id;
        ++n_listed_group_free;
      }
    }
    uint32_t n_uncreated = 0, n_creating = 0, n_free = 0, n_granted = 0, n_held_back = 0;
    uint32_t n_group_free = 0;
    for (uint32_t id = 0; id < capacity_; ++id) {
      const Slot& slot = slots_[id];
      switch (slot.state) {
        case SlotState::kUncreated: ++n_uncreated; break;
        case SlotState::kCreating: ++n_creating; break;
        case SlotState::kFree: ++n_free; break;
        case SlotState::kGranted:
        case SlotState::kRecycling: ++n_granted; break;
        case SlotState::kHeldBack: ++n_held_back; break;
        case SlotState::kGroupFree: ++n_group_free; break;
      }
      const bool created = slot.state == SlotState::kFree || slot.state == SlotState::kGranted ||
                           slot.state == SlotState::kGroupFree;
      const bool of_a_group = slot.state == SlotState::kGranted ||
                              slot.state == SlotState::kGroupFree ||
                              slot.state == SlotState::kRecycling;
      if (of_a_group && slot.group >= group_count_) {
        fail("id of a group that has no list (id, group)", id, slot.group);
      }
      if (!of_a_group && slot.group != kNoGroup) {
        fail("id of no group names a group (id, group)", id, slot.group);
      }
      if (created && !slot.handle.valid()) {
        fail("created id without a handle (id, state)", id, state_of(id));
      }
      if ((slot.state == SlotState::kUncreated || slot.state == SlotState::kHeldBack) &&
          slot.handle.valid()) {
        fail("uncreated or held-back id holds a handle (id, handle)", id, slot.handle.value);
      }
      if (created) handles.push_back(slot.handle.value);  // reserved: no allocation
    }
    // Each stack holds distinct ids of its state, so equal counts mean every
    // free id is on the free stack and every uncreated one on its stack.
    if (n_free != free_count_) fail("free ids vs free stack size", n_free, free_count_);
    if (n_uncreated != uncreated_count_) {
      fail("uncreated ids vs uncreated stack size", n_uncreated, uncreated_count_);
    }
    if (n_creating != creating_) fail("creating ids vs creations in flight", n_creating, creating_);
    if (n_granted != granted_) fail("granted ids vs granted count", n_granted, granted_);
    if (n_group_free != group_free_) fail("group-free ids vs count", n_group_free, group_free_);
    if (n_listed_group_free != group_free_) {
      fail("group free lists vs group-free count", n_listed_group_free, group_free_);
    }
    if (free_count_ + group_free_ + granted_ != created_) {
      fail("free + group free + granted != created", free_count_ + group_free_ + granted_,
           created_);
    }
    if (created_ > capacity_) fail("created > capacity", created_, capacity_);
    if (n_held_back != held_back_) fail("held-back ids vs held-back count", n_held_back, held_back_);
    if (held_after_recycle_ > uncreated_count_) {
      fail("held after recycle > uncreated: memory over the capacity", held_after_recycle_,
           uncreated_count_);
    }
    if (uncreated_count_ + creating_ + created_ + held_back_ != capacity_) {
      fail("uncreated + creating + created + held back != capacity",
           uncreated_count_ + creating_ + created_ + held_back_, capacity_);
    }
  }
  if (error[0] == '\0') {
    std::sort(handles.begin(), handles.end());
    auto dup = std::adjacent_find(handles.begin(), handles.end());
    if (dup != handles.end()) fail("two ids share one physical page (handle, 0)", *dup, 0);
  }
  if (error[0] != '\0') {
    return Status::Internal("page pool on device " + std::to_string(device_) +
                            ": invariant broken: " + error);
  }
  return Status::OK();
}

// ---- Errors, built out of line and outside the lock. ----

Status PagePool::BadId(const char* call, PageId id) const {
  return Status::InvalidArgument(std::string(call) + ": page id " + std::to_string(id) +
                                 " is outside the pool of device " + std::to_string(device_) +
                                 " [0, " + std::to_string(capacity_) + ")");
}

namespace {

const char* StateText(int state) {
  switch (state) {
    case 0: return "never created";
    case 1: return "being created";
    case 2: return "free (double free?)";
    case 3: return "granted";
    case 4: return "being recycled";
    case 5: return "held back for a restarted kvd's engines";
    case 6: return "free on its group's free list (double free?)";
  }
  return "unknown";
}

}  // namespace

Status PagePool::NotGranted(const char* call, PageId id, SlotState state) const {
  return Status::FailedPrecondition(std::string(call) + ": page id " + std::to_string(id) +
                                    " on device " + std::to_string(device_) +
                                    " is not granted: it is " +
                                    StateText(static_cast<int>(state)));
}

Status PagePool::NotHeldBack(const char* call, PageId id, SlotState state) const {
  return Status::FailedPrecondition(std::string(call) + ": page id " + std::to_string(id) +
                                    " on device " + std::to_string(device_) +
                                    " is not held back: it is " +
                                    StateText(static_cast<int>(state)));
}

Status PagePool::NotGroupFree(PageId id, GroupId group, SlotState state, GroupId owner) const {
  std::string is = state == SlotState::kGroupFree
                       ? "on the free list of group " + std::to_string(owner)
                       : StateText(static_cast<int>(state));
  return Status::FailedPrecondition("TakeGroupFree: page id " + std::to_string(id) +
                                    " on device " + std::to_string(device_) +
                                    " is not on the free list of group " +
                                    std::to_string(group) + ": it is " + is);
}

Status PagePool::NoGroup(const char* call) const {
  return Status::InvalidArgument(std::string(call) + " on device " + std::to_string(device_) +
                                 ": kNoGroup is not a group");
}

Status PagePool::Exhausted(uint32_t granted, uint32_t held_after_recycle) const {
  std::string held;
  if (held_after_recycle > 0) {
    held = "; " + std::to_string(held_after_recycle) +
           " more are held after recycle by engines told to forget them";
  }
  return Status::ResourceExhausted(
      "page pool on device " + std::to_string(device_) + " is exhausted: " +
      std::to_string(granted) + " of " + std::to_string(capacity_) + " pages granted (capacity " +
      std::to_string(static_cast<uint64_t>(capacity_) * page_bytes_) + " bytes, page size " +
      std::to_string(page_bytes_) + ")" + held);
}

Status PagePool::CreateError(const Status& cause, PageId id, uint32_t created) const {
  // Keep the backend's code, call and error name (greppable), add our context.
  return Status(cause.code(),
                "page pool on device " + std::to_string(device_) + ": creating page id " +
                    std::to_string(id) + " (" + std::to_string(page_bytes_) + " bytes; " +
                    std::to_string(created) + " of " + std::to_string(capacity_) +
                    " pages created): " + std::string(cause.message()),
                cause.call(), cause.error_name());
}

}  // namespace nanokv::kvd
