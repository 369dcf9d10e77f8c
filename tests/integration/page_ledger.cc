#include "tests/integration/page_ledger.h"

#include <unistd.h>

#include <algorithm>
#include <sstream>

namespace nanokv::testing {

void PageLedger::Attach(const std::string& tenant, const std::string& group) {
  // An engine that names no group gets its uid's own (issue 19 item 3).
  tenants_[tenant] = Holder{group.empty() ? "uid:" + std::to_string(geteuid()) : group, {}};
}

void PageLedger::Hold(const std::string& tenant, int device, std::span<const GrantedPage> pages) {
  std::vector<uint32_t> ids;
  for (const GrantedPage& page : pages) ids.push_back(page.id);
  Hold(tenant, device, ids);
}

void PageLedger::Hold(const std::string& tenant, int device, std::span<const uint32_t> ids) {
  Holder& holder = tenants_[tenant];
  for (uint32_t id : ids) {
    for (const auto& [name, other] : tenants_) {
      auto it = other.pages.find(device);
      if (name == tenant || other.group == holder.group || it == other.pages.end()) continue;
      if (it->second.count(id) != 0) {
        conflicts_.push_back("page " + std::to_string(id) + " of device " +
                             std::to_string(device) + " granted to '" + tenant + "' (group " +
                             holder.group + ") while '" + name + "' (group " + other.group +
                             ") holds it");
      }
    }
    if (!holder.pages[device].insert(id).second) {
      conflicts_.push_back("page " + std::to_string(id) + " of device " + std::to_string(device) +
                           " granted to '" + tenant + "', which already holds it");
    }
    highest_id_ = std::max(highest_id_, id);
  }
}

void PageLedger::Release(const std::string& tenant, int device, std::span<const uint32_t> ids) {
  auto& held = tenants_[tenant].pages[device];
  for (uint32_t id : ids) held.erase(id);
}

void PageLedger::Drop(const std::string& tenant) { tenants_.erase(tenant); }

std::vector<uint32_t> PageLedger::Held(const std::string& tenant, int device) const {
  auto t = tenants_.find(tenant);
  if (t == tenants_.end()) return {};
  auto d = t->second.pages.find(device);
  if (d == t->second.pages.end()) return {};
  return {d->second.begin(), d->second.end()};
}

size_t PageLedger::HeldPages(int device) const {
  std::set<uint32_t> all;
  for (const auto& [name, holder] : tenants_) {
    auto it = holder.pages.find(device);
    if (it != holder.pages.end()) all.insert(it->second.begin(), it->second.end());
  }
  return all.size();
}

std::string PageLedger::Diff(const ipc::Snapshot& s, const std::set<std::string>& others,
                             const std::map<int, uint64_t>& others_pages) const {
  std::ostringstream out;
  for (const std::string& conflict : conflicts_) out << conflict << "\n";
  const ipc::Segment& seg = s.segment;
  const uint64_t page_bytes = seg.header.page_bytes;
  std::set<std::string> listed;
  for (uint32_t i = 0; i < seg.header.tenant_count; ++i) {
    const ipc::TenantRow& row = seg.tenants[i];
    std::string name(ipc::ReadString(row.name));
    listed.insert(name);
    if (others.count(name) != 0) continue;
    auto t = tenants_.find(name);
    if (t == tenants_.end()) {
      out << "kvd lists tenant '" << name << "', which the ledger says holds nothing and left\n";
      continue;
    }
    if (ipc::ReadString(row.group) != t->second.group) {
      out << "tenant '" << name << "': group '" << ipc::ReadString(row.group) << "', ledger '"
          << t->second.group << "'\n";
    }
    uint64_t total = 0;
    for (uint32_t d = 0; d < seg.header.device_count; ++d) {
      int device = seg.devices[d].device;
      auto it = t->second.pages.find(device);
      uint64_t want = it == t->second.pages.end() ? 0 : it->second.size();
      total += want;
      if (row.used_pages[d] != want) {
        out << "tenant '" << name << "' device " << device << ": kvd counts " << row.used_pages[d]
            << " pages, the ledger " << want << "\n";
      }
    }
    if (row.used_bytes != total * page_bytes) {
      out << "tenant '" << name << "': kvd counts " << row.used_bytes << " bytes used, the ledger "
          << total * page_bytes << "\n";
    }
  }
  for (const auto& [name, holder] : tenants_) {
    if (listed.count(name) == 0) out << "tenant '" << name << "' is not listed by kvd\n";
  }
  for (const std::string& name : others) {
    if (listed.count(name) == 0) out << "tenant '" << name << "' is not listed by kvd\n";
  }
  for (uint32_t d = 0; d < seg.header.device_count; ++d) {
    const ipc::DeviceRow& row = seg.devices[d];
    auto extra = others_pages.find(row.device);
    uint64_t want = HeldPages(row.device) + (extra == others_pages.end() ? 0 : extra->second);
    if (row.granted_pages != want) {
      out << "device " << row.device << ": kvd counts " << row.granted_pages
          << " pages granted, the ledger " << want << "\n";
    }
    // Old pages engines keep after a recycle are memory too (issue 19 item 8).
    if (row.created_pages + row.held_after_recycle_pages > row.capacity_pages) {
      out << "device " << row.device << ": created " << row.created_pages
          << " + held after recycle " << row.held_after_recycle_pages << " > capacity "
          << row.capacity_pages << "\n";
    }
    if (row.free_pages + row.granted_pages != row.created_pages) {
      out << "device " << row.device << ": free " << row.free_pages << " + granted "
          << row.granted_pages << " != created " << row.created_pages << "\n";
    }
  }
  return out.str();
}

}  // namespace nanokv::testing
