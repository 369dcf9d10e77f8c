#include "daemon/node/node_state.h"

#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "ipc/segment/layout.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {
namespace {

constexpr char kDefaultGroup[] = "default";

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// The distinct ids of a request, sorted; kInvalidArgument naming `what` for
// a list that names a page twice (or is empty, unless allowed).
Result<std::vector<PageId>> SortedDistinct(std::span<const PageId> ids, const char* what,
                                           bool allow_empty) {
  std::vector<PageId> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty() && !allow_empty) return Status::InvalidArgument(std::string(what) + " of no pages");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return Status::InvalidArgument(std::string(what) + " lists a page twice");
  }
  return sorted;
}

}  // namespace

Result<std::unique_ptr<NodeState>> NodeState::Create(gpu::Backend& backend,
                                                     const NodeOptions& options) {
  if (options.pools.empty()) return Status::InvalidArgument("kvd serves no device");
  size_t page_bytes = options.pools.front().page_bytes;
  std::unique_ptr<NodeState> node(new NodeState(backend, page_bytes, options));
  std::vector<std::vector<RecoveredPage>> recovered = node->RecoveredByPool(options);
  for (size_t p = 0; p < options.pools.size(); ++p) {
    PagePoolConfig config = options.pools[p];
    if (config.page_bytes != page_bytes) {
      return Status::InvalidArgument("all devices must use one page size");
    }
    // Every page kvd makes is handed to another process: export it when it
    // is created, ahead of demand, not on the grant path.
    config.export_fds = true;
    for (const RecoveredPage& page : recovered[p]) config.held_back.push_back(page.id);
    NANOKV_ASSIGN_OR_RETURN(auto pool, PagePool::Create(backend, config));
    NodeState* self = node.get();
    pool->SetStillHeld([self, p](PageId id) { return self->StillHeld(p, id); });
    node->devices_.emplace_back();
    node->devices_.back().pages.resize(pool->capacity_pages());
    node->pools_.push_back(std::move(pool));
    node->ApplyRecovery(p, recovered[p]);
  }
  return node;
}

NodeState::NodeState(gpu::Backend& backend, size_t page_bytes, const NodeOptions& options)
    : backend_(backend),
      page_bytes_(page_bytes),
      default_limit_(options.default_limit_bytes),
      default_limit_fraction_(options.default_limit_fraction),
      limit_ceiling_(options.limit_ceiling_bytes),
      limit_ceiling_fraction_(options.limit_ceiling_fraction) {
  groups_.push_back({kDefaultGroup, false});
}

NodeState::~NodeState() = default;  // the pools release their pages and fds

uint64_t NodeState::capacity_bytes() const {
  uint64_t total = 0;
  for (const auto& pool : pools_) total += uint64_t{pool->capacity_pages()} * page_bytes_;
  return total;
}

Result<size_t> NodeState::DeviceIndex(int device) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i]->device() == device) return i;
  }
  return Status::NotFound("kvd does not serve device " + std::to_string(device));
}

Tenant* NodeState::MutableTenant(TenantId tenant) {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? nullptr : &it->second;
}

const Tenant* NodeState::FindTenant(TenantId tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? nullptr : &it->second;
}

const Tenant* NodeState::FindTenantByName(const std::string& name) const {
  for (const auto& [id, tenant] : tenants_) {
    if (tenant.name == name) return &tenant;
  }
  return nullptr;
}

std::vector<const Tenant*> NodeState::Tenants() const {
  std::vector<const Tenant*> out;
  for (const auto& [id, tenant] : tenants_) out.push_back(&tenant);
  return out;
}

int NodeState::GroupIndex(const std::string& name, bool kvd_owned) {
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i].name == name && groups_[i].kvd_owned == kvd_owned) return static_cast<int>(i);
  }
  groups_.push_back({name, kvd_owned});
  int index = static_cast<int>(groups_.size() - 1);
  if (journal_ != nullptr) journal_->SetGroup(index, name);
  return index;
}

uint64_t NodeState::UsedBytes(const Tenant& tenant) const {
  uint64_t pages = 0;
  for (uint32_t n : tenant.used_pages) pages += n;
  return pages * page_bytes_;
}

Result<TenantId> NodeState::Attach(const AttachParams& params, uint64_t now_unix_ns) {
  if (!wire::ValidName(params.name)) {
    return Status::InvalidArgument("tenant name '" + params.name.substr(0, 80) +
                                   "' is not 1-63 of [A-Za-z0-9_.:@-]");
  }
  std::string group = params.group.empty() ? kDefaultGroup : params.group;
  if (!wire::ValidName(group)) return Status::InvalidArgument("bad group name");
  if (FindTenantByName(params.name) != nullptr) {
    return Status::AlreadyExists("a tenant named '" + params.name + "' is already attached");
  }
  // One row each in the state segment and no more: a tenant past the table
  // would hold pages that kvctl and /metrics never show.
  if (tenants_.size() >= ipc::kMaxTenants) {
    return Status::ResourceExhausted(
        "kvd has " + std::to_string(tenants_.size()) + " tenants attached, the most its state "
        "segment's tenant table holds (" + std::to_string(ipc::kMaxTenants) +
        ", fixed by the segment's layout, not a config key): wait for one to detach");
  }
  // An engine never asks itself above the ceiling; the default limit is the
  // operator's, but the ceiling is the operator's too and the stricter word.
  // One the operator set on this name before stays, whoever attaches.
  uint64_t ceiling = ConfigCeiling();
  auto kept = params.kvd_owned ? operator_limits_.end() : operator_limits_.find(params.name);
  if (kept != operator_limits_.end()) {
    ceiling = std::min(kept->second.bytes, capacity_bytes());
    spdlog::info("kvd: tenant '{}' attaches under the operator's limit of {} bytes, set on uid {}'s tenant of "
                 "that name (kvctl limit {} 0 lifts it)", params.name, ceiling, kept->second.uid, params.name);
  }
  const uint64_t limit =
      std::min(ResolveLimit(params.name, params.limit_bytes, params.limit_fraction), ceiling);

  Tenant tenant;
  tenant.id = next_tenant_++;
  tenant.name = params.name;
  tenant.group = group;
  tenant.group_index = GroupIndex(group, params.kvd_owned);
  tenant.pid = params.pid;
  tenant.uid = params.uid;
  tenant.limit_bytes = limit;
  tenant.ceiling_bytes = ceiling;
  tenant.ceiling_by_operator = kept != operator_limits_.end();
  tenant.kvd_owned = params.kvd_owned;
  tenant.default_limit = !params.kvd_owned && params.limit_bytes == 0 && params.limit_fraction == 0;
  tenant.attach_unix_ns = now_unix_ns;
  tenant.last_activity_unix_ns = now_unix_ns;
  tenant.used_pages.assign(pools_.size(), 0);
  tenant.imported.resize(pools_.size());
  tenant.held_after_recycle.resize(pools_.size());
  tenant.reported_reserve_bytes.assign(pools_.size(), 0);
  TenantId id = tenant.id;
  tenants_.emplace(id, std::move(tenant));
  return id;
}

Status NodeState::Detach(TenantId tenant_id) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  for (size_t d = 0; d < devices_.size(); ++d) {
    for (PageId id = 0; id < devices_[d].pages.size(); ++id) {
      const auto& holders = devices_[d].pages[id].holders;
      if (std::find(holders.begin(), holders.end(), tenant_id) != holders.end()) {
        ReleaseHolder(d, id, tenant_id);
      }
    }
    // Its connection is gone: so is its word about pages recycled away
    // (invariant 5 ends with the connection), those its own releases just
    // uncreated (pages adopted without a handle) included.
    for (const auto& page : std::vector(tenant->held_after_recycle[d])) {
      DropHeldAfterRecycle(d, tenant_id, page);
    }
  }
  tenants_.erase(tenant_id);
  return Status::OK();
}

void NodeState::ReleaseHolder(size_t d, PageId id, TenantId tenant_id) {
  PageInfo& page = devices_[d].pages[id];
  page.holders.erase(std::find(page.holders.begin(), page.holders.end(), tenant_id));
  if (Tenant* tenant = MutableTenant(tenant_id)) --tenant->used_pages[d];
  if (page.holders.empty()) {
    --devices_[d].held;
    if (page.handleless) return UncreateHandleless(d, id);
    PutBack(d, id);
    Journal(d, id);
  }
}

size_t NodeState::Obtainable(size_t d) const {
  // Every page not held by a tenant can be had: the group's own free pages
  // at once, pool pages fresh, other groups' free pages after a recycle;
  // not the pages held back for a dead kvd's engines, nor the room of old
  // pages recycled away that engines still hold.
  return pools_[d]->capacity_pages() - devices_[d].held - devices_[d].recovering -
         devices_[d].held_after_recycle.size();
}

Result<PageId> NodeState::TakePage(size_t d, int group, bool* held) {
  PageId recycled = kNoPage;
  Result<PageId> id = pools_[d]->Allocate(static_cast<GroupId>(group), &recycled);
  *held = recycled != kNoPage && !id.ok() && id.status().code() == Code::kResourceExhausted;
  if (recycled != kNoPage) {
    ForgetOldPage(d, recycled);
    if (!id.ok()) {
      // The old page is gone and no new one came (none may while its old
      // group holds it, invariant 5): the pool took the id back as uncreated.
      devices_[d].pages[recycled].group = -1;
      Journal(d, recycled);
      if (id.status().code() != Code::kResourceExhausted) spdlog::warn("kvd: recycling page {} of device {} failed: {}", recycled,
                   pools_[d]->device(), id.status().ToString());
    }
  }
  if (!id.ok()) return id.status();
  devices_[d].pages[*id].group = group;
  return *id;
}

void NodeState::PutBack(size_t d, PageId id) {
  Status freed = pools_[d]->Free(id);
  // Only a granted page reaches here: a failure is a bug, kept visible.
  if (!freed.ok()) spdlog::error("kvd: giving page {} back: {}", id, freed.ToString());
}

bool NodeState::OnGroupFreeList(size_t d, PageId id, int group) const {
  const PagePool::Owner owner = pools_[d]->owner(id);
  return owner.free && owner.group == static_cast<GroupId>(group);
}

void NodeState::TakeGroupFree(size_t d, PageId id) {
  const auto group = static_cast<GroupId>(devices_[d].pages[id].group);
  Status taken = pools_[d]->TakeGroupFree(id, group);
  // Callers checked OnGroupFreeList first: a failure is a bug, kept visible.
  if (!taken.ok()) spdlog::error("kvd: {}", taken.ToString());
}

Status NodeState::CheckQuota(const Tenant& tenant, uint32_t count) const {
  uint64_t used = UsedBytes(tenant);
  // Old pages recycled away that it still holds are its memory too.
  const uint64_t kept = HeldAfterRecyclePages(tenant) * page_bytes_;
  if (tenant.state == TenantState::kReclaiming) {
    return Status::ResourceExhausted("tenant '" + tenant.name + "' uses " + Mib(used) +
                                     ", over its limit of " + Mib(tenant.limit_bytes) +
                                     ": no grant until it returns pages (reclaim pending)");
  }
  uint64_t asked = uint64_t{count} * page_bytes_;
  if (used + asked > tenant.limit_bytes) {
    return Status::ResourceExhausted("tenant '" + tenant.name + "' limit " +
                                     Mib(tenant.limit_bytes) + ": uses " + Mib(used) +
                                     ", asked " + std::to_string(count) + " pages (" +
                                     Mib(asked) + ")");
  }
  if (used + kept + asked > tenant.limit_bytes) {
    return Status::ResourceExhausted("tenant '" + tenant.name + "' limit " + Mib(tenant.limit_bytes) + ": uses " +
                                     Mib(used) + " and still holds " + Mib(kept) +
                                     " of pages recycled away (held after recycle: " +
                                     "told to forget them, it has not said it did), asked " + std::to_string(count) +
                                     " pages (" + Mib(asked) + ")")
        .WithHint(Hint::kRetryAfterForget);
  }
  return Status::OK();
}

void NodeState::AddHolder(size_t d, PageId id, Tenant& tenant, std::vector<PageGrant>* out) {
  PageInfo& page = devices_[d].pages[id];
  if (page.holders.empty()) ++devices_[d].held;
  page.holders.push_back(tenant.id);
  if (page.holders.size() == 1) Journal(d, id);  // before the reply says so
  ++tenant.used_pages[d];
  auto [it, inserted] = tenant.imported[d].try_emplace(id, page.generation);
  bool needs_fd = inserted || it->second != page.generation;
  it->second = page.generation;
  out->push_back({id, page.generation, needs_fd});
}

Result<std::vector<PageGrant>> NodeState::Grant(TenantId tenant_id, int device, uint32_t count,
                                                  uint64_t now_unix_ns) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  if (count == 0) return Status::InvalidArgument("grant of 0 pages");
  NANOKV_RETURN_IF_ERROR(CheckQuota(*tenant, count));
  size_t obtainable = Obtainable(d);
  if (obtainable < count) {
    const size_t kept = devices_[d].held_after_recycle.size();
    Status full = Status::ResourceExhausted(
        "device " + std::to_string(device) + " has " + std::to_string(obtainable) + " pages free of " +
        std::to_string(pools_[d]->capacity_pages()) + ", asked " + std::to_string(count) +
        (kept == 0 ? std::string()
                   : " (" + std::to_string(kept) + " are " + kHeldAfterRecycle + " by engines told to forget them)"));
    // Room comes back as those engines forget: worth asking again then.
    return kept == 0 ? full : std::move(full).WithHint(Hint::kRetryAfterForget);
  }
  NANOKV_ASSIGN_OR_RETURN(uint32_t recycles, RecyclesAllowed(d, *tenant, count));
  std::vector<PageId> taken;
  taken.reserve(count);
  Status waits;  // a recycle whose old page is still held (invariant 5)
  uint32_t held_recycles = 0;
  for (uint32_t i = 0; i < count; ++i) {
    bool held = false;
    auto id = TakePage(d, tenant->group_index, &held);
    if (id.ok()) {
      taken.push_back(*id);
    } else if (held) {
      // Recycle the rest too (up to what is needed), so their holders are
      // told at once and one round of forget answers serves it asked again.
      if (waits.ok()) waits = id.status();
      if (++held_recycles >= recycles) break;
    } else {
      if (waits.ok()) waits = id.status();
      break;
    }
  }
  if (!waits.ok()) {
    for (PageId back : taken) PutBack(d, back);
    return waits;
  }
  std::vector<PageGrant> out;
  out.reserve(count);
  for (PageId id : taken) AddHolder(d, id, *tenant, &out);
  tenant->last_activity_unix_ns = now_unix_ns;
  return out;
}

Result<std::vector<PageGrant>> NodeState::Share(TenantId tenant_id, int device,
                                                  std::span<const PageId> ids,
                                                  uint64_t now_unix_ns) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  NANOKV_ASSIGN_OR_RETURN(std::vector<PageId> sorted, SortedDistinct(ids, "share", false));
  NANOKV_RETURN_IF_ERROR(CheckQuota(*tenant, static_cast<uint32_t>(ids.size())));
  DeviceState& state = devices_[d];
  for (PageId id : sorted) {
    std::string which = "page " + std::to_string(id) + " of device " + std::to_string(device);
    if (id >= state.pages.size()) return Status::InvalidArgument(which + " does not exist");
    const PageInfo& page = state.pages[id];
    bool owned = !page.holders.empty() || OnGroupFreeList(d, id, page.group);
    if (!owned || page.group != tenant->group_index) {
      // Do not tell a tenant whether another group holds it: same answer.
      return Status::PermissionDenied(which + " is not owned by group '" + tenant->group + "'");
    }
    if (std::find(page.holders.begin(), page.holders.end(), tenant_id) != page.holders.end()) {
      return Status::FailedPrecondition(which + " is already held by this tenant");
    }
    if (page.handleless) {
      return Status::FailedPrecondition(
          which + " was handed back without an fd after a kvd restart: kvd has no handle of it "
                  "to send, so only its holders keep it (it is made anew once they return it)");
    }
  }
  std::vector<PageGrant> out;
  out.reserve(ids.size());
  for (PageId id : ids) {
    if (state.pages[id].holders.empty()) TakeGroupFree(d, id);
    AddHolder(d, id, *tenant, &out);
  }
  tenant->last_activity_unix_ns = now_unix_ns;
  return out;
}

Status NodeState::Return(TenantId tenant_id, int device, std::span<const PageId> ids,
                         uint64_t now_unix_ns) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  // All or none: check every id (and duplicates) before changing anything.
  NANOKV_ASSIGN_OR_RETURN(std::vector<PageId> sorted, SortedDistinct(ids, "return", true));
  for (PageId id : sorted) {
    if (id >= devices_[d].pages.size()) {
      return Status::InvalidArgument("return of page " + std::to_string(id) + ": device " +
                                     std::to_string(device) + " has " +
                                     std::to_string(devices_[d].pages.size()) + " pages");
    }
    const auto& holders = devices_[d].pages[id].holders;
    if (std::find(holders.begin(), holders.end(), tenant_id) == holders.end()) {
      return Status::FailedPrecondition("return of page " + std::to_string(id) +
                                        ", which tenant '" + tenant->name + "' does not hold");
    }
  }
  for (PageId id : sorted) ReleaseHolder(d, id, tenant_id);
  tenant->last_activity_unix_ns = now_unix_ns;
  MaybeEndReclaim(*tenant);
  return Status::OK();
}

void NodeState::MaybeEndReclaim(Tenant& tenant) {
  if (tenant.state == TenantState::kReclaiming && UsedBytes(tenant) <= tenant.limit_bytes) {
    tenant.state = TenantState::kAttached;
  }
}

Result<int> NodeState::PageFd(int device, PageId id) {
  NANOKV_ASSIGN_OR_RETURN(size_t d, DeviceIndex(device));
  if (id >= devices_[d].pages.size() || devices_[d].pages[id].holders.empty()) {
    return Status::FailedPrecondition("page " + std::to_string(id) + " is not granted");
  }
  return pools_[d]->TakeFd(id);
}

size_t NodeState::KeptFds() const {
  size_t n = 0;
  for (const auto& pool : pools_) n += pool->kept_fds();
  return n;
}

std::vector<Notice> NodeState::TakeNotices() {
  std::vector<Notice> out;
  out.swap(notices_);
  return out;
}

std::vector<DeviceCounts> NodeState::Counts() const {
  std::vector<DeviceCounts> out;
  for (size_t d = 0; d < pools_.size(); ++d) {
    PagePool::Stats stats = pools_[d]->stats();
    DeviceCounts c;
    c.device = pools_[d]->device();
    c.capacity_pages = stats.capacity_pages;
    // Pages adopted without a handle are memory in use too, held by engines.
    c.created_pages = stats.created_pages + devices_[d].handleless;
    c.reserve_pages = stats.reserve_pages;
    c.recovering_pages = devices_[d].recovering;
    c.handleless_pages = devices_[d].handleless;
    c.held_pages = devices_[d].held;
    c.free_pages = stats.free_pages;  // the group free lists included
    c.group_free_pages = stats.group_free_pages;
    c.held_after_recycle_pages = devices_[d].held_after_recycle.size();
    out.push_back(c);
  }
  return out;
}

}  // namespace nanokv::kvd
