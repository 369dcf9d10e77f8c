#include "kvctl/figures.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace nanokv::kvctl {

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

std::string FormatPercent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * Share(part, whole));
  return buf;
}

std::string FormatAge(uint64_t then_unix_ns, uint64_t now_unix_ns) {
  if (then_unix_ns == 0) return "-";
  if (now_unix_ns <= then_unix_ns) return "now";
  const uint64_t seconds = (now_unix_ns - then_unix_ns) / 1'000'000'000;
  if (seconds == 0) return "now";
  if (seconds < 120) return std::to_string(seconds) + "s ago";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + "m ago";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + "h ago";
  return std::to_string(seconds / 86400) + "d ago";
}

std::string TenantStateName(const ipc::TenantRow& row, bool kvd_alive) {
  if (!kvd_alive) return "stale";
  switch (static_cast<ipc::TenantState>(row.state)) {
    case ipc::TenantState::kAttached: return "attached";
    case ipc::TenantState::kReclaiming: return "reclaiming";
    case ipc::TenantState::kDetached: return "detached";
    case ipc::TenantState::kDead: return "dead";
  }
  return "unknown(" + std::to_string(row.state) + ")";
}

bool TenantReclaiming(const ipc::TenantRow& row) {
  return row.state == static_cast<uint32_t>(ipc::TenantState::kReclaiming);
}

std::string InstanceStateName(const ipc::InstanceRow& row, bool kvd_alive) {
  const auto state = static_cast<ipc::InstanceState>(row.state);
  const bool ended = state == ipc::InstanceState::kExited || state == ipc::InstanceState::kFailed;
  if (!kvd_alive && !ended) return "stale";
  if (const char* name = ipc::InstanceStateName(state)) return name;
  return kvd_alive ? "unknown(" + std::to_string(row.state) + ")" : "stale";
}

std::string InstanceStateText(const ipc::InstanceRow& row, bool kvd_alive) {
  std::string name = InstanceStateName(row, kvd_alive);
  if (name != "exited" && name != "failed") return name;
  if (row.exit_code >= 0) return name + " (" + std::to_string(row.exit_code) + ")";
  const std::string signal = SignalName(-row.exit_code);
  return (name == "exited" ? "killed" : name) + " (" + signal + ")";
}

bool InstanceHasEnded(const ipc::InstanceRow& row) {
  switch (static_cast<ipc::InstanceState>(row.state)) {
    case ipc::InstanceState::kRestarting:
    case ipc::InstanceState::kExited:
    case ipc::InstanceState::kFailed:
      return true;
    case ipc::InstanceState::kStarting:
    case ipc::InstanceState::kRunning:
      break;
  }
  return row.restarts > 0;
}

std::string SignalName(int signal) {
  // Our own table, not sigabbrev_np (glibc only), so every libc names them alike.
  static constexpr struct {
    int number;
    const char* name;
  } kSignals[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
                  {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                  {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
                  {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
                  {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"}};
  for (const auto& known : kSignals) {
    if (known.number == signal) return known.name;
  }
  return "signal " + std::to_string(signal);
}

std::string OrdinalList(const std::vector<int>& ordinals) {
  // Runs of three or more as ranges: 8 GPUs are "0-7", not fifteen characters.
  std::string out;
  for (size_t i = 0; i < ordinals.size();) {
    size_t end = i;
    while (end + 1 < ordinals.size() && ordinals[end + 1] == ordinals[end] + 1) ++end;
    if (!out.empty()) out += ",";
    if (end - i >= 2) {
      out += std::to_string(ordinals[i]) + "-" + std::to_string(ordinals[end]);
      i = end + 1;
    } else {
      out += std::to_string(ordinals[i]);
      ++i;
    }
  }
  return out.empty() ? "-" : out;
}

std::string TenantDevices(const ipc::Segment& segment, const ipc::TenantRow& row) {
  std::vector<int> used;
  for (uint32_t d = 0; d < segment.header.device_count; ++d) {
    if (row.used_pages[d] != 0) used.push_back(segment.devices[d].device);
  }
  return OrdinalList(used);
}

std::string DeviceList(const ipc::Segment& segment) {
  std::vector<int> all;
  for (uint32_t d = 0; d < segment.header.device_count; ++d) all.push_back(segment.devices[d].device);
  return OrdinalList(all);
}

uint64_t DeviceCapacityBytes(const ipc::DeviceRow& row) { return row.capacity_pages * row.page_bytes; }

uint64_t DeviceUsedBytes(const ipc::DeviceRow& row) {
  // Pages held after recycle are memory engines keep: used, though no grant.
  return (row.granted_pages + row.object_pages + row.held_after_recycle_pages) * row.page_bytes;
}

const char* SortKeyName(SortKey key) {
  switch (key) {
    case SortKey::kName: return "name";
    case SortKey::kUsed: return "used";
    case SortKey::kLimit: return "limit";
    case SortKey::kShare: return "share";
    case SortKey::kPid: return "pid";
    case SortKey::kActivity: return "activity";
  }
  return "?";
}

Result<SortKey> ParseSortKey(std::string_view name) {
  std::string known;
  for (SortKey key : kSortKeys) {
    if (name == SortKeyName(key)) return key;
    known += (known.empty() ? "" : ", ") + std::string(SortKeyName(key));
  }
  return Status::InvalidArgument("unknown sort key '" + std::string(name) + "' (one of " + known + ")");
}

SortKey NextSortKey(SortKey key) {
  constexpr size_t kCount = std::size(kSortKeys);
  for (size_t i = 0; i < kCount; ++i) {
    if (kSortKeys[i] == key) return kSortKeys[(i + 1) % kCount];
  }
  return kSortKeys[0];
}

std::vector<const ipc::TenantRow*> SortedTenants(const ipc::Segment& segment, SortKey key) {
  std::vector<const ipc::TenantRow*> rows;
  for (uint32_t i = 0; i < segment.header.tenant_count; ++i) rows.push_back(&segment.tenants[i]);
  auto name = [](const ipc::TenantRow* row) { return ipc::ReadString(row->name); };
  std::stable_sort(rows.begin(), rows.end(), [&](const ipc::TenantRow* a, const ipc::TenantRow* b) {
    switch (key) {
      case SortKey::kName:
        break;
      case SortKey::kUsed:
        if (a->used_bytes != b->used_bytes) return a->used_bytes > b->used_bytes;
        break;
      case SortKey::kLimit:
        if (a->limit_bytes != b->limit_bytes) return a->limit_bytes > b->limit_bytes;
        break;
      case SortKey::kShare: {
        double share_a = Share(a->used_bytes, a->limit_bytes);
        double share_b = Share(b->used_bytes, b->limit_bytes);
        if (share_a != share_b) return share_a > share_b;
        break;
      }
      case SortKey::kPid:
        if (a->pid != b->pid) return a->pid < b->pid;
        break;
      case SortKey::kActivity:
        if (a->last_activity_unix_ns != b->last_activity_unix_ns) {
          return a->last_activity_unix_ns > b->last_activity_unix_ns;
        }
        break;
    }
    return std::make_tuple(name(a), a->id) < std::make_tuple(name(b), b->id);
  });
  return rows;
}

}  // namespace nanokv::kvctl
