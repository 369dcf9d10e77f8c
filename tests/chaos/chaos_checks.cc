#include "tests/chaos/chaos_checks.h"

#include <map>
#include <set>
#include <utility>

namespace nanokv::chaos {
namespace {

std::string PageName(int device, uint32_t id) {
  return "device " + std::to_string(device) + " page " + std::to_string(id);
}

// free + granted == created <= capacity on every device.
void CheckCounts(const ipc::Segment& s, Findings* f) {
  for (uint32_t d = 0; d < s.header.device_count; ++d) {
    const ipc::DeviceRow& row = s.devices[d];
    uint64_t accounted = row.free_pages + row.granted_pages;
    if (accounted != row.created_pages) {
      uint64_t diff = accounted > row.created_pages ? accounted - row.created_pages
                                                     : row.created_pages - accounted;
      f->lost_pages += diff;
      f->notes.push_back("device " + std::to_string(row.device) + ": free " +
                         std::to_string(row.free_pages) + " + granted " +
                         std::to_string(row.granted_pages) + " != created " +
                         std::to_string(row.created_pages));
    }
    if (row.created_pages > row.capacity_pages) {
      f->notes.push_back("device " + std::to_string(row.device) + ": created " +
                         std::to_string(row.created_pages) + " > capacity " +
                         std::to_string(row.capacity_pages));
      ++f->accounting_errors;
    }
  }
}

}  // namespace

Findings CheckBarrier(const ipc::Segment& s, const std::vector<EngineView>& engines,
                      const std::string& probe) {
  Findings f;
  CheckCounts(s, &f);
  const uint32_t devices = s.header.device_count;

  // Every tenant row is the probe or a live engine (same name and pid).
  std::map<std::string, const ipc::TenantRow*> rows;
  for (uint32_t t = 0; t < s.header.tenant_count; ++t) {
    const ipc::TenantRow& row = s.tenants[t];
    std::string name(ipc::ReadString(row.name));
    if (name == probe) continue;
    bool live = false;
    for (const EngineView& e : engines) {
      live |= e.name == name && e.report.attached && e.report.pid == row.pid;
    }
    if (!live) {
      ++f.dead_tenants;
      f.notes.push_back("tenant '" + name + "' (pid " + std::to_string(row.pid) +
                        ") is still attached in kvd but its process is gone; it holds " +
                        std::to_string(row.used_bytes) + " bytes");
      continue;
    }
    rows[name] = &row;
  }

  // kvd's count of each tenant's pages against the engine's own list.
  for (const EngineView& e : engines) {
    if (!e.report.attached) continue;
    auto it = rows.find(e.name);
    std::vector<uint64_t> held(devices, 0);
    for (const HeldPage& p : e.report.pages) {
      for (uint32_t d = 0; d < devices; ++d) held[d] += s.devices[d].device == p.device ? 1 : 0;
    }
    for (uint32_t d = 0; d < devices; ++d) {
      uint64_t counted = it == rows.end() ? 0 : it->second->used_pages[d];
      if (counted != held[d]) {
        ++f.accounting_errors;
        f.notes.push_back("tenant '" + e.name + "' on device " + std::to_string(s.devices[d].device) +
                          ": kvd counts " + std::to_string(counted) + " pages, the engine holds " +
                          std::to_string(held[d]));
      }
    }
  }

  // Page by page: one group, at most one grantee, sharers see the owner's bytes.
  struct Holder {
    const EngineView* engine;
    const HeldPage* page;
  };
  std::map<std::pair<int, uint32_t>, std::vector<Holder>> pages;
  for (const EngineView& e : engines) {
    for (const HeldPage& p : e.report.pages) pages[{p.device, p.id}].push_back({&e, &p});
  }
  for (const auto& [key, holders] : pages) {
    std::string page = PageName(key.first, key.second);
    std::set<int> groups;
    const Holder* owner = nullptr;
    int owners = 0;
    for (const Holder& h : holders) {
      groups.insert(h.engine->group);
      if (h.page->owned) {
        ++owners;
        owner = &h;
      }
    }
    if (groups.size() > 1 || owners > 1) {
      ++f.double_grants;
      std::string who;
      for (const Holder& h : holders) {
        who += " " + h.engine->name + "(group " + std::to_string(h.engine->group) + ", " +
               (h.page->owned ? "granted" : "shared") + ")";
      }
      f.notes.push_back(page + " is held by" + who);
      continue;
    }
    if (owner == nullptr) continue;
    for (const Holder& h : holders) {
      if (h.page->owned) continue;
      const PageContent& mine = h.page->content;
      const PageContent& theirs = owner->page->content;
      if (mine.kind != theirs.kind || mine.tag != theirs.tag) {
        ++f.pattern_failures;
        f.notes.push_back(page + ": " + h.engine->name + " (sharing) reads " + Describe(mine) +
                          ", its owner " + owner->engine->name + " wrote " + Describe(theirs));
      }
    }
  }

  // Distinct pages the engines hold against kvd's granted count.
  for (uint32_t d = 0; d < devices; ++d) {
    uint64_t distinct = 0;
    for (const auto& [key, holders] : pages) distinct += key.first == s.devices[d].device ? 1 : 0;
    uint64_t granted = s.devices[d].granted_pages;
    if (granted > distinct) {
      f.lost_pages += granted - distinct;
      f.notes.push_back("device " + std::to_string(s.devices[d].device) + ": kvd counts " +
                        std::to_string(granted) + " pages granted, live engines hold " +
                        std::to_string(distinct));
    } else if (distinct > granted) {
      f.double_grants += distinct - granted;
      f.notes.push_back("device " + std::to_string(s.devices[d].device) + ": live engines hold " +
                        std::to_string(distinct) + " pages, kvd counts " + std::to_string(granted) +
                        " granted");
    }
  }
  return f;
}

Findings CheckDrained(const ipc::Segment& s, const std::string& probe) {
  Findings f;
  CheckCounts(s, &f);
  for (uint32_t d = 0; d < s.header.device_count; ++d) {
    if (s.devices[d].granted_pages != 0) {
      f.lost_pages += s.devices[d].granted_pages;
      f.notes.push_back("device " + std::to_string(s.devices[d].device) + ": " +
                        std::to_string(s.devices[d].granted_pages) +
                        " pages still granted after every engine left");
    }
  }
  for (uint32_t t = 0; t < s.header.tenant_count; ++t) {
    std::string name(ipc::ReadString(s.tenants[t].name));
    if (name == probe) continue;
    ++f.dead_tenants;
    f.notes.push_back("tenant '" + name + "' is still attached after every engine left");
  }
  return f;
}

void CountDevices(const ipc::Segment& s, DeviceUses* uses) {
  for (uint32_t d = 0; d < s.header.device_count; ++d) (void)(*uses)[s.devices[d].device];
}

void CountHeld(const Report& report, DeviceUses* uses) {
  for (const HeldPage& p : report.pages) {
    DeviceUse& use = (*uses)[p.device];
    ++(p.owned ? use.granted_page_rounds : use.shared_page_rounds);
  }
}

void CountKill(const ipc::Segment& s, int pid, DeviceUses* uses) {
  for (uint32_t i = 0; i < s.header.tenant_count; ++i) {
    if (s.tenants[i].pid != pid) continue;
    for (uint32_t d = 0; d < s.header.device_count; ++d) {
      if (s.tenants[i].used_pages[d] > 0) ++(*uses)[s.devices[d].device].kills_holding;
    }
  }
}

}  // namespace nanokv::chaos
