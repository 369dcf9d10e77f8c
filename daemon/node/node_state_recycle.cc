// NodeState: pages recycled away from a group (ForgetOldPage), and the
// charge their old memory keeps while the old group's engines may still hold
// it (invariant 5): an engine that keeps a page's fd after
// the forget notice keeps that memory alive, so it counts against the
// device's capacity and the engine's quota until the engine says it dropped
// it (ForgetDone, sent by libkv once it unmapped and closed it) or detaches.
// And what an engine says of its own held pages that no accounting uses:
// its reserve (ReportReserve), shown beside its use.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/node/node_state.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {

void NodeState::ForgetOldPage(size_t d, PageId id) {
  PageInfo& page = devices_[d].pages[id];
  ++page.generation;
  page.journaled = false;  // the dead kvd's journal listed the old page, not this one
  // Processes of the old group may still hold a handle of the old page: tell
  // them to drop it, so the old memory is freed once they do.
  for (auto& [tenant_id, tenant] : tenants_) {
    if (tenant.group_index != page.group) continue;
    auto it = tenant.imported[d].find(id);
    if (it == tenant.imported[d].end()) continue;
    if (!tenant.kvd_owned && it->second + 1 == page.generation) {
      // Charged until it says it dropped the old page (invariant 5); kvd's
      // own tenants drop theirs before they return a page.
      devices_[d].held_after_recycle[{id, it->second}].push_back(tenant_id);
      tenant.held_after_recycle[d].emplace_back(id, it->second);
    }
    tenant.imported[d].erase(it);
    QueueForget(tenant_id, pools_[d]->device(), id);
  }
  Journal(d, id);  // the new generation, still unheld
}

void NodeState::QueueForget(TenantId tenant, int device, PageId id) {
  // One notice per tenant and device, however many pages a grant recycles:
  // a message per page could fill the engine's socket and cost it its
  // connection. A notice stays within what one message may carry.
  for (Notice& notice : notices_) {
    if (notice.kind == Notice::Kind::kForget && notice.tenant == tenant &&
        notice.device == device && notice.page_ids.size() < wire::kMaxPagesPerRequest) {
      notice.page_ids.push_back(id);
      return;
    }
  }
  notices_.push_back({Notice::Kind::kForget, tenant, device, 0, 0, {id}});
}

bool NodeState::StillHeld(size_t d, PageId id) const {
  const PageInfo& page = devices_[d].pages[id];
  for (const auto& [tenant_id, tenant] : tenants_) {
    if (tenant.group_index != page.group || tenant.kvd_owned) continue;
    auto it = tenant.imported[d].find(id);
    if (it != tenant.imported[d].end() && it->second == page.generation) return true;
  }
  return false;
}

void NodeState::DropHeldAfterRecycle(size_t d, TenantId tenant_id,
                                     std::pair<PageId, uint32_t> page) {
  if (Tenant* tenant = MutableTenant(tenant_id)) {
    auto& mine = tenant->held_after_recycle[d];
    auto it = std::find(mine.begin(), mine.end(), page);
    if (it != mine.end()) mine.erase(it);
  }
  auto& ledger = devices_[d].held_after_recycle;
  auto entry = ledger.find(page);
  if (entry == ledger.end()) return;
  auto& holders = entry->second;
  holders.erase(std::remove(holders.begin(), holders.end(), tenant_id), holders.end());
  if (!holders.empty()) return;
  ledger.erase(entry);
  // Its last holder let go: the old memory is freed, its room may hold a page.
  Status dropped = pools_[d]->DropHeldAfterRecycle(1);
  if (!dropped.ok()) spdlog::error("kvd: {}", dropped.ToString());
}

Result<size_t> NodeState::ForgetDone(TenantId tenant_id, int device, std::span<const PageId> ids) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  size_t ended = 0;
  for (PageId id : ids) {
    // The oldest charge for the id: forgets are answered in the order sent.
    const auto& mine = tenant->held_after_recycle[d];
    auto it = std::find_if(mine.begin(), mine.end(), [id](const auto& p) { return p.first == id; });
    if (it == mine.end()) continue;
    DropHeldAfterRecycle(d, tenant_id, *it);
    ++ended;
  }
  return ended;
}

Status NodeState::ReportReserve(TenantId tenant_id, int device, uint64_t bytes) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  tenant->reported_reserve_bytes[d] = bytes;
  return Status::OK();
}

uint64_t NodeState::ReserveBytes(const Tenant& tenant) const {
  uint64_t total = 0;
  for (size_t d = 0; d < tenant.reported_reserve_bytes.size(); ++d) {
    total += std::min<uint64_t>(tenant.reported_reserve_bytes[d],
                                uint64_t{tenant.used_pages[d]} * page_bytes_);
  }
  return total;
}

Result<uint32_t> NodeState::RecyclesAllowed(size_t d, const Tenant& tenant, uint32_t count) const {
  const size_t kept = devices_[d].held_after_recycle.size();
  if (kept == 0) return count;
  const size_t without = pools_[d]->ObtainableWithoutRecycle(static_cast<GroupId>(tenant.group_index));
  const size_t needed = count > without ? count - without : 0;
  if (needed > 0 && needed <= kept) {
    return Status::ResourceExhausted("device " + std::to_string(pools_[d]->device()) + ": " + std::to_string(needed) +
                                     " of " + std::to_string(count) + " pages wait for room: " + std::to_string(kept) +
                                     " pages are " + kHeldAfterRecycle + " by engines told to forget them")
        .WithHint(Hint::kRetryAfterForget);
  }
  return static_cast<uint32_t>(needed > kept ? needed - kept : count);
}

size_t NodeState::HeldAfterRecyclePages(const Tenant& tenant) const {
  size_t pages = 0;
  for (const auto& device : tenant.held_after_recycle) pages += device.size();
  return pages;
}

}  // namespace nanokv::kvd
