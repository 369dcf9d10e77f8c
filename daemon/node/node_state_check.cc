// NodeState's invariant check (node_state.h, "Invariants"): out of line, and
// out of the file that holds the grant path.
#include <algorithm>
#include <string>

#include "daemon/node/node_state.h"

namespace nanokv::kvd {

Status NodeState::CheckInvariants() const {
  for (size_t d = 0; d < pools_.size(); ++d) {
    NANOKV_RETURN_IF_ERROR(pools_[d]->CheckInvariants());
    PagePool::Stats stats = pools_[d]->stats();
    const DeviceState& device = devices_[d];
    size_t held = 0, group_free = 0, recovering = 0, handleless = 0;
    for (PageId id = 0; id < device.pages.size(); ++id) {
      const PageInfo& page = device.pages[id];
      const PagePool::Owner owner = pools_[d]->owner(id);
      std::string where = "device " + std::to_string(pools_[d]->device()) + " page " +
                          std::to_string(id) + ": ";
      if (page.recovering) {
        ++recovering;
        if (!page.holders.empty() || owner.group != kNoGroup) {
          return Status::Internal(where + "held back for adoption, yet held, or granted or "
                                  "group-free in the pool");
        }
      }
      if (page.handleless) {
        // Adopted without a handle: held, while the pool keeps the id held
        // back (it has no page to grant or list as free).
        ++handleless;
        if (page.recovering || page.holders.empty() || page.group < 0 || owner.group != kNoGroup) {
          return Status::Internal(where + "adopted without a handle, yet held back for "
                                  "adoption, held by nobody, of no group, or in the pool");
        }
        ++held;
      } else if (!page.holders.empty()) {
        if (owner.group == kNoGroup || owner.free) {
          return Status::Internal(where + "held but not granted by the pool");
        }
        ++held;
      } else if (owner.group != kNoGroup) {
        if (!owner.free) return Status::Internal(where + "granted by the pool, held by no tenant");
        ++group_free;
      }
      if (owner.group != kNoGroup) {
        if (page.group < 0) return Status::Internal(where + "owned by no group");
        if (owner.group != static_cast<GroupId>(page.group)) {
          return Status::Internal(where + "owned by group " + std::to_string(page.group) +
                                  ", the pool says group " + std::to_string(owner.group) +
                                  (owner.free ? " (free list)" : " (granted)"));
        }
      }
      for (TenantId holder : page.holders) {
        const Tenant* tenant = FindTenant(holder);
        if (tenant == nullptr) return Status::Internal(where + "held by a gone tenant");
        if (tenant->group_index != page.group) {
          return Status::Internal(where + "held by tenant '" + tenant->name +
                                  "' outside its owner group");
        }
      }
    }
    if (held != device.held) return Status::Internal("held page count drifted");
    if (recovering != device.recovering || handleless != device.handleless ||
        recovering + handleless != stats.held_back_pages) {
      return Status::Internal("held-back page counts disagree (pages " +
                              std::to_string(recovering) + " held back and " +
                              std::to_string(handleless) + " adopted without a handle, device " +
                              std::to_string(device.recovering) + " and " +
                              std::to_string(device.handleless) + ", pool " +
                              std::to_string(stats.held_back_pages) + ")");
    }
    if (device.held_after_recycle.size() != stats.held_after_recycle_pages) {
      return Status::Internal("device " + std::to_string(pools_[d]->device()) + ": " +
                              std::to_string(device.held_after_recycle.size()) +
                              " pages held after recycle, the pool counts " +
                              std::to_string(stats.held_after_recycle_pages));
    }
    for (const auto& [page, holders] : device.held_after_recycle) {
      std::string where = "device " + std::to_string(pools_[d]->device()) + " page " +
                          std::to_string(page.first) + " (generation " +
                          std::to_string(page.second) + ", held after recycle): ";
      if (holders.empty()) return Status::Internal(where + "charged with no holder");
      for (TenantId holder : holders) {
        const Tenant* tenant = FindTenant(holder);
        if (tenant == nullptr) return Status::Internal(where + "held by a gone tenant");
        const auto& mine = tenant->held_after_recycle[d];
        if (std::count(mine.begin(), mine.end(), page) != 1) {
          return Status::Internal(where + "tenant '" + tenant->name + "' does not list it once");
        }
      }
    }
    if (group_free != stats.group_free_pages || held - handleless != stats.granted_pages) {
      return Status::Internal("device " + std::to_string(pools_[d]->device()) + ": held " +
                              std::to_string(held) + " (" + std::to_string(handleless) +
                              " adopted without a handle) and group free " +
                              std::to_string(group_free) + " pages, the pool grants " +
                              std::to_string(stats.granted_pages) + " and keeps " +
                              std::to_string(stats.group_free_pages) + " on group free lists");
    }
  }
  for (const auto& [id, tenant] : tenants_) {
    for (size_t d = 0; d < pools_.size(); ++d) {
      for (const auto& page : tenant.held_after_recycle[d]) {
        auto entry = devices_[d].held_after_recycle.find(page);
        if (entry == devices_[d].held_after_recycle.end() ||
            std::count(entry->second.begin(), entry->second.end(), id) != 1) {
          return Status::Internal("tenant '" + tenant.name + "' lists page " +
                                  std::to_string(page.first) +
                                  " as held after recycle; the device does not");
        }
      }
      uint32_t holding = 0;
      for (const auto& page : devices_[d].pages) {
        holding += std::count(page.holders.begin(), page.holders.end(), id) > 0 ? 1 : 0;
      }
      if (holding != tenant.used_pages[d]) {
        return Status::Internal("tenant '" + tenant.name + "' counts " +
                                std::to_string(tenant.used_pages[d]) + " pages, holds " +
                                std::to_string(holding));
      }
    }
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
