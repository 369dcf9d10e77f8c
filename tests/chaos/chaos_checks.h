// The chaos run's checks at a barrier: kvd's published state (the /dev/shm
// segment, taken after a publish that follows every engine's last request)
// against what every live engine reports holding. Pure logic, no processes.
#ifndef NANOKV_TESTS_CHAOS_CHAOS_CHECKS_H_
#define NANOKV_TESTS_CHAOS_CHAOS_CHECKS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ipc/segment/layout.h"
#include "tests/chaos/chaos_files.h"

namespace nanokv::chaos {

// One live engine at the barrier: its name (kvd's tenant name), group, and
// the report it wrote for this barrier (its pid is the live process's).
struct EngineView {
  std::string name;
  int group = 0;
  Report report;
};

struct Findings {
  // Pages kvd counts as held that no live engine holds, or that are in
  // neither its free nor its granted count.
  uint64_t lost_pages = 0;
  // Pages held by tenants of two groups, granted to two tenants, or held by
  // engines beyond what kvd counts as granted.
  uint64_t double_grants = 0;
  // A shared page whose bytes differ from what its owner wrote.
  uint64_t pattern_failures = 0;
  // A tenant's used pages in kvd differ from what the engine holds.
  uint64_t accounting_errors = 0;
  // Tenant rows of processes that are gone.
  uint64_t dead_tenants = 0;
  std::vector<std::string> notes;  // one line per finding

  bool clean() const {
    return lost_pages == 0 && double_grants == 0 && pattern_failures == 0 &&
           accounting_errors == 0 && dead_tenants == 0;
  }
};

// `probe` names the driver's own tenant (it holds nothing).
Findings CheckBarrier(const ipc::Segment& segment, const std::vector<EngineView>& engines,
                      const std::string& probe);

// After every engine left: nothing granted, no tenant but the probe, and
// free + granted == created on every device.
Findings CheckDrained(const ipc::Segment& segment, const std::string& probe);

// What the run did on each device (kvd's ordinal): the pages engines held
// at the barriers, as granted and as shared, and the kills of an engine kvd
// showed holding pages there. The proof that every device kvd serves was used.
struct DeviceUse {
  uint64_t granted_page_rounds = 0;
  uint64_t shared_page_rounds = 0;
  uint64_t kills_holding = 0;
};
using DeviceUses = std::map<int, DeviceUse>;

// A row for every device the segment lists (zero where nothing happens).
void CountDevices(const ipc::Segment& segment, DeviceUses* uses);
// The pages of one barrier report.
void CountHeld(const Report& report, DeviceUses* uses);
// A kill of `pid`: one on each device where the segment shows it holding pages.
void CountKill(const ipc::Segment& segment, int pid, DeviceUses* uses);

}  // namespace nanokv::chaos

#endif  // NANOKV_TESTS_CHAOS_CHAOS_CHECKS_H_
