// What kvd will need at full use, and whether this machine allows it
// (`kvd --check-limits`, and one line of kvd's start-up log).
//
// Full use: every page of every pool created and exported (each keeps its fds,
// daemon/server/fd_budget.h), every connection kvd serves open. The fds are
// counted exactly as kvd budgets them; kvd's RSS is an estimate from the
// figures in docs/BENCHMARKS.md ("kvd at full size"); /dev/shm holds the
// state segment. kvd raises its soft open-file limit to the hard one at
// start, so the hard limit is what must hold the fds; no LimitNOFILE= can go
// past fs.nr_open.
#ifndef NANOKV_DAEMON_SERVER_LIMITS_CHECK_H_
#define NANOKV_DAEMON_SERVER_LIMITS_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/config/config.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct DeviceNeed {
  int device = 0;
  std::string name;
  uint64_t device_bytes = 0;    // the device's memory (host: host_device_memory)
  uint64_t capacity_pages = 0;  // what kvd's pool on it may create
};

struct LimitsNeed {
  std::string backend;
  uint64_t page_bytes = 0;
  std::vector<DeviceNeed> devices;
  // At rest: host 1 (the page is a memfd), cuda and hip 0 (a driver handle,
  // exported only to be sent). Pages created ahead keep their export until
  // their first grant: reserve_fds.
  uint64_t fds_per_page = 0;
  uint64_t reserve_fds = 0;   // reserve_pages per device
  uint64_t connections = 0;   // max_connections, else its default
  uint64_t base_fds = 0;      // kvd's own: logs, socket, segment, journal, epoll...
  uint64_t headroom_fds = 0;  // one adopt's fds and the controller's children

  uint64_t pages() const;
  uint64_t fds() const;
  uint64_t rss_bytes() const;         // kvd's own memory at full use: an estimate
  uint64_t host_page_bytes() const;   // host backend: the pages live in host memory
  uint64_t shm_bytes() const;         // /dev/shm: the state segment
};

// The device ordinals kvd serves: the config's `devices`, else all the
// backend has; kNotFound naming the key for one the backend does not have.
Result<std::vector<int>> ServedDevices(const KvdConfig& config, const gpu::Backend& backend);

// What kvd needs for `config` on `backend`, opened as kvd opens it, holding
// `own_fds` fds now besides any page's. Errors: a device the config names
// that the backend does not have.
Result<LimitsNeed> NeedsFor(const KvdConfig& config, gpu::Backend& backend, uint64_t own_fds);

struct MachineLimits {
  uint64_t nofile_soft = 0;
  uint64_t nofile_hard = 0;
  uint64_t nr_open = 0;         // /proc/sys/fs/nr_open: the most any LimitNOFILE= may be
  uint64_t shm_free_bytes = 0;  // statvfs("/dev/shm")
  uint64_t mem_available_bytes = 0;  // /proc/meminfo MemAvailable
};
MachineLimits ReadMachineLimits();

struct LimitsVerdict {
  bool fds_ok = false;
  bool memory_ok = false;
  bool shm_ok = false;
  bool devices_ok = false;     // each device's capacity fits its memory
  uint64_t limit_nofile = 0;   // LimitNOFILE= to set when !fds_ok
  bool ok() const { return fds_ok && memory_ok && shm_ok && devices_ok; }
};
LimitsVerdict Judge(const LimitsNeed& need, const MachineLimits& machine);

// The report kvd --check-limits prints: text for a person, or one JSON object.
std::string LimitsReport(const LimitsNeed& need, const MachineLimits& machine, const LimitsVerdict& verdict);
std::string LimitsReportJson(const LimitsNeed& need, const MachineLimits& machine,
                             const LimitsVerdict& verdict);
// The same in one line, for kvd's start-up log.
std::string LimitsLogLine(const LimitsNeed& need, const MachineLimits& machine, const LimitsVerdict& verdict);

// kvd --check-limits's exit code when a limit does not suffice (docs/OPERATIONS.md).
inline constexpr int kLimitsDoNotSuffice = 3;

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_SERVER_LIMITS_CHECK_H_
