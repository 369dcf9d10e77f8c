// Figures derived from segment rows, shared by the tables, the JSON and top:
// shares, ages, names of states, sort orders. Each is a pure function of a
// snapshot and the time, so every view shows the same figure the same way.
#ifndef NANOKV_KVCTL_FIGURES_H_
#define NANOKV_KVCTL_FIGURES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/segment/layout.h"
#include "nanokv/status.h"

namespace nanokv::kvctl {

// part / whole, 0 when whole is 0.
double Share(uint64_t part, uint64_t whole);
// "37.5%", or "-" when whole is 0.
std::string FormatPercent(uint64_t part, uint64_t whole);
// "now", "3s ago", "5m ago", "2h ago", "3d ago"; "-" for a zero time.
std::string FormatAge(uint64_t then_unix_ns, uint64_t now_unix_ns);

// "attached", "reclaiming", "detached", "dead"; "stale" for every tenant of
// a kvd that is gone (its rows are the last it published, not the truth).
std::string TenantStateName(const ipc::TenantRow& row, bool kvd_alive);
bool TenantReclaiming(const ipc::TenantRow& row);

// An engine instance kvd runs (its YAML `instances:`), as the views show it.
// Rows of a kvd that is gone and that had not ended (starting, running,
// restarting) are "stale": kvctl cannot know what became of them. Ended rows
// (exited, failed) keep their state: that part was final when published.
//
// The bare state: "starting", "running", "restarting", "exited", "failed",
// or "stale".
std::string InstanceStateName(const ipc::InstanceRow& row, bool kvd_alive);
// The state with how the instance ended, for tables: "exited (0)",
// "failed (3)", "killed (SIGKILL)" (exited by a signal), "failed (SIGKILL)";
// otherwise the bare state.
std::string InstanceStateText(const ipc::InstanceRow& row, bool kvd_alive);
// Whether exit_code says how a life ended: the instance is restarting,
// exited or failed, or has been restarted (a running instance's last life).
bool InstanceHasEnded(const ipc::InstanceRow& row);
// "SIGTERM", "SIGKILL", ... for the standard signals; "signal N" otherwise.
std::string SignalName(int signal);

// Ordinals of the devices a tenant holds pages on: "0", "0,1", or "-".
// Device ordinals, runs of three or more as ranges ("0-7", "0,2,4-6"); "-" for none.
std::string OrdinalList(const std::vector<int>& ordinals);
std::string TenantDevices(const ipc::Segment& segment, const ipc::TenantRow& row);
// Ordinals of a kvd's devices: "0,1".
std::string DeviceList(const ipc::Segment& segment);

uint64_t DeviceCapacityBytes(const ipc::DeviceRow& row);
uint64_t DeviceUsedBytes(const ipc::DeviceRow& row);  // granted + object pages

enum class SortKey { kName, kUsed, kLimit, kShare, kPid, kActivity };
inline constexpr SortKey kSortKeys[] = {SortKey::kUsed,  SortKey::kShare, SortKey::kLimit,
                                        SortKey::kName,  SortKey::kPid,   SortKey::kActivity};
const char* SortKeyName(SortKey key);  // "used", "share", ...
// kInvalidArgument naming the keys for anything else.
Result<SortKey> ParseSortKey(std::string_view name);
SortKey NextSortKey(SortKey key);  // the next in kSortKeys, cyclically

// The tenant rows of `segment`: by name ascending; by used, limit, share
// (used / limit) and activity descending (the biggest or most recent first);
// by pid ascending. Ties by name.
std::vector<const ipc::TenantRow*> SortedTenants(const ipc::Segment& segment, SortKey key);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_FIGURES_H_
