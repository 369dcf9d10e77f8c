// NodeState's limits (node_state.h): the ceiling the config sets, a
// tenant's limit resolved from bytes or a fraction, changes by an operator
// or the tenant itself, and eviction down to a limit.
#include "daemon/node/node_state.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace nanokv::kvd {

uint64_t NodeState::ConfigCeiling() const {
  const uint64_t capacity = capacity_bytes();
  uint64_t ceiling = limit_ceiling_;
  if (ceiling == 0 && limit_ceiling_fraction_ > 0) {
    ceiling = static_cast<uint64_t>(limit_ceiling_fraction_ * static_cast<double>(capacity));
  }
  return ceiling == 0 ? capacity : std::min(ceiling, capacity);
}

uint64_t NodeState::ResolveLimit(const std::string& tenant, uint64_t bytes, double fraction) const {
  const uint64_t capacity = capacity_bytes();
  const auto share = [capacity](double f) { return static_cast<uint64_t>(f * static_cast<double>(capacity)); };
  uint64_t limit = bytes;
  if (limit == 0 && fraction > 0) limit = share(fraction);
  if (limit == 0) limit = default_limit_ != 0 ? default_limit_ : share(default_limit_fraction_);
  if (limit == 0) return capacity;
  if (limit > capacity) {
    // Said, not silently done: the tenant asked for more than the node has.
    spdlog::warn("kvd: tenant '{}' asked for a limit of {} bytes, over the node's capacity of {}: "
                 "clamped to the capacity", tenant, limit, capacity);
    return capacity;
  }
  return limit;
}

Result<uint64_t> NodeState::SetLimit(TenantId tenant_id, uint64_t limit_bytes, LimitSetter by) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  // 0 is the default limit, as at attach; over the capacity is clamped, with a warning.
  uint64_t limit = ResolveLimit(tenant->name, limit_bytes, 0);
  if (by == LimitSetter::kOperator) {
    // The operator's word is the ceiling too; its 0 puts both back to the config's.
    tenant->ceiling_bytes = limit_bytes == 0 ? ConfigCeiling() : limit;
    tenant->ceiling_by_operator = limit_bytes != 0;
    if (limit_bytes == 0) {
      LiftOperatorLimit(tenant->name);
    } else {
      KeepOperatorLimit(*tenant, limit);
    }
    limit = std::min(limit, tenant->ceiling_bytes);
  } else if (limit_bytes == 0) {
    limit = std::min(limit, tenant->ceiling_bytes);  // the default is the operator's: held to the ceiling
  } else if (limit > tenant->ceiling_bytes) {
    // The ceiling is the operator's: an engine may lower its limit, never
    // raise it over what the operator allowed.
    return Status::PermissionDenied(
        "tenant '" + tenant->name + "' may not raise its limit to " + std::to_string(limit_bytes) +
        " bytes: its ceiling is " + std::to_string(tenant->ceiling_bytes) + " bytes, set by " +
        (tenant->ceiling_by_operator ? "the operator (kvctl limit)" : "kvd's config (limit_ceiling)") +
        "; the limit stays " + std::to_string(tenant->limit_bytes) + " bytes");
  }
  tenant->limit_bytes = limit;
  tenant->default_limit = limit_bytes == 0;
  uint64_t used = UsedBytes(*tenant);
  if (used > tenant->limit_bytes) {
    tenant->state = TenantState::kReclaiming;
    uint64_t excess = used - tenant->limit_bytes;
    auto pages = static_cast<uint32_t>((excess + page_bytes_ - 1) / page_bytes_);
    notices_.push_back({Notice::Kind::kReclaim, tenant_id, -1, pages, tenant->limit_bytes, {}});
  } else {
    tenant->state = TenantState::kAttached;
  }
  return tenant->limit_bytes;
}

void NodeState::KeepOperatorLimit(const Tenant& tenant, uint64_t bytes) {
  if (!operator_limits_.contains(tenant.name) && operator_limits_.size() >= kMaxOperatorLimits) {
    // Full: the oldest kept for a name not attached now goes (an attached
    // tenant keeps its ceiling in its row; tenants are far fewer than this).
    auto oldest = operator_limits_.end();
    for (auto it = operator_limits_.begin(); it != operator_limits_.end(); ++it) {
      if (FindTenantByName(it->first) == nullptr &&
          (oldest == operator_limits_.end() || it->second.order < oldest->second.order)) {
        oldest = it;
      }
    }
    if (oldest != operator_limits_.end()) {
      spdlog::warn("kvd: {} operator limits kept, the most kvd keeps: forgot the oldest, {} bytes for tenant '{}' "
                   "(not attached), so that '{}' keeps its", kMaxOperatorLimits, oldest->second.bytes,
                   oldest->first, tenant.name);
      operator_limits_.erase(oldest);
    }
  }
  operator_limits_[tenant.name] = {bytes, tenant.uid, next_limit_order_++};
}

bool NodeState::LiftOperatorLimit(const std::string& name) { return operator_limits_.erase(name) != 0; }

std::vector<std::string> NodeState::SetDefaultLimit(uint64_t bytes, double fraction) {
  default_limit_ = bytes;
  default_limit_fraction_ = fraction;
  std::vector<std::string> changed;
  for (auto& [id, tenant] : tenants_) {
    if (!tenant.default_limit) continue;
    const uint64_t before = tenant.limit_bytes;
    (void)SetLimit(id, 0);  // 0: the (new) default, held to its ceiling; it exists, so this cannot fail
    if (tenant.limit_bytes != before) changed.push_back(tenant.name);
  }
  return changed;
}

Status NodeState::Evict(TenantId tenant_id, uint32_t pages) {
  Tenant* tenant = MutableTenant(tenant_id);
  if (tenant == nullptr) return Status::NotFound("no tenant " + std::to_string(tenant_id));
  auto held = static_cast<uint32_t>(UsedBytes(*tenant) / page_bytes_);
  if (pages == 0 || pages > held) pages = held;
  if (pages > 0) {
    notices_.push_back({Notice::Kind::kReclaim, tenant_id, -1, pages, tenant->limit_bytes, {}});
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
