#include "daemon/server/limits_check.h"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/human_size.h"
#include "daemon/server/fd_budget.h"
#include "ipc/segment/layout.h"

namespace nanokv::kvd {
namespace {

// kvd's fds besides pages and connections that exist only once it serves
// (listener, epoll, the spare fd, journal, lock, eventfds): measured at 13 on
// host with no page (docs/BENCHMARKS.md); rounded up.
constexpr uint64_t kServingFds = 16;
// kvd's RSS: 15.4 MB idle with one small device, 82 bytes a page not yet
// created and about 150 a page created and granted (docs/BENCHMARKS.md, "kvd
// at full size"), rounded up.
constexpr uint64_t kBaseRssBytes = 16u << 20;
constexpr uint64_t kRssBytesPerPage = 160;
// LimitNOFILE= is rounded up to this, so a small change of the config does
// not need a new unit file each time.
constexpr uint64_t kNofileStep = 1024;

uint64_t ReadUint(const std::string& path) {
  std::ifstream in(path);
  uint64_t value = 0;
  in >> value;
  return value;
}

uint64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string Yes(bool ok) { return ok ? "suffices" : "DOES NOT SUFFICE"; }

std::string Num(uint64_t value) { return std::to_string(value); }

}  // namespace

uint64_t LimitsNeed::pages() const {
  uint64_t total = 0;
  for (const DeviceNeed& d : devices) total += d.capacity_pages;
  return total;
}

uint64_t LimitsNeed::fds() const {
  return base_fds + reserve_fds + pages() * fds_per_page + kFdsPerConnection * connections +
         headroom_fds;
}

uint64_t LimitsNeed::rss_bytes() const { return kBaseRssBytes + pages() * kRssBytesPerPage; }

uint64_t LimitsNeed::host_page_bytes() const { return backend == "host" ? pages() * page_bytes : 0; }

uint64_t LimitsNeed::shm_bytes() const { return sizeof(ipc::Segment); }

Result<std::vector<int>> ServedDevices(const KvdConfig& config, const gpu::Backend& backend) {
  std::vector<int> devices = config.devices;
  if (devices.empty()) {
    for (int d = 0; d < backend.device_count(); ++d) devices.push_back(d);
  }
  for (int device : devices) {
    if (device >= backend.device_count()) {
      return Status::NotFound(config.Origin("devices") + ": device " + std::to_string(device) +
                              " is not present (the " + std::string(backend.name()) + " backend sees " +
                              std::to_string(backend.device_count()) + ")");
    }
  }
  return devices;
}

Result<LimitsNeed> NeedsFor(const KvdConfig& config, gpu::Backend& backend, uint64_t own_fds) {
  LimitsNeed need;
  need.backend = std::string(backend.name());
  need.page_bytes = config.page_bytes;
  NANOKV_ASSIGN_OR_RETURN(std::vector<int> devices, ServedDevices(config, backend));
  for (int device : devices) {
    NANOKV_ASSIGN_OR_RETURN(gpu::DeviceInfo info, backend.GetDeviceInfo(device));
    // As the pool sizes itself (daemon/node/page_pool.cc).
    const uint64_t capacity = config.capacity.Resolve(info.total_bytes);
    need.devices.push_back({device, info.name, info.total_bytes, capacity / config.page_bytes});
  }
  // The pages' fds as kvd counts them at start (main.cc measures them there).
  need.fds_per_page = need.backend == "host" ? 1 : 0;
  need.reserve_fds = uint64_t{config.reserve_pages} * devices.size();
  need.connections = config.max_connections != 0 ? config.max_connections : kDefaultMaxConnections;
  need.base_fds = own_fds + kServingFds;
  need.headroom_fds = MeasureFdBudget(0, 1).headroom;
  return need;
}

MachineLimits ReadMachineLimits() {
  MachineLimits machine;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    machine.nofile_soft = limit.rlim_cur;
    machine.nofile_hard = limit.rlim_max;
  }
  machine.nr_open = ReadUint("/proc/sys/fs/nr_open");
  struct statvfs shm{};
  if (statvfs("/dev/shm", &shm) == 0) machine.shm_free_bytes = uint64_t{shm.f_bavail} * shm.f_frsize;
  machine.mem_available_bytes = MemAvailableBytes();
  return machine;
}

LimitsVerdict Judge(const LimitsNeed& need, const MachineLimits& machine) {
  LimitsVerdict verdict;
  const uint64_t fds = need.fds();
  verdict.fds_ok = fds <= machine.nofile_hard;  // kvd raises the soft limit to the hard one
  if (!verdict.fds_ok) verdict.limit_nofile = (fds + kNofileStep - 1) / kNofileStep * kNofileStep;
  verdict.memory_ok = need.rss_bytes() + need.host_page_bytes() <= machine.mem_available_bytes;
  verdict.shm_ok = need.shm_bytes() <= machine.shm_free_bytes;
  verdict.devices_ok = !need.devices.empty();
  for (const DeviceNeed& d : need.devices) {
    verdict.devices_ok &= d.capacity_pages > 0 && d.capacity_pages * need.page_bytes <= d.device_bytes;
  }
  return verdict;
}

std::string LimitsReport(const LimitsNeed& need, const MachineLimits& machine, const LimitsVerdict& verdict) {
  std::ostringstream out;
  out << "kvd at full use (backend " << need.backend << ", pages of " << FormatBytes(need.page_bytes) << "):\n";
  out << "  devices: " << need.devices.size() << ": " << Yes(verdict.devices_ok) << "\n";
  for (const DeviceNeed& d : need.devices) {
    out << "    device " << d.device << " (" << d.name << ", " << FormatBytes(d.device_bytes) << "): "
        << d.capacity_pages << " pages, " << FormatBytes(d.capacity_pages * need.page_bytes) << "\n";
  }
  out << "  fds: " << need.fds() << " = " << need.pages() << " pages x " << need.fds_per_page << " at rest + "
      << need.reserve_fds << " for pages created ahead + " << need.connections << " connections x "
      << kFdsPerConnection << " + "
      << need.headroom_fds << " headroom + " << need.base_fds << " kvd's own\n";
  out << "    open-file limit (RLIMIT_NOFILE): soft " << machine.nofile_soft << ", hard " << machine.nofile_hard
      << " (kvd raises the soft to the hard); fs.nr_open " << machine.nr_open << ": " << Yes(verdict.fds_ok)
      << "\n";
  if (!verdict.fds_ok) {
    out << "    set in kvd's systemd unit ([Service]):\n      LimitNOFILE=" << verdict.limit_nofile << "\n";
    if (verdict.limit_nofile > machine.nr_open) {
      out << "    and first raise fs.nr_open (no limit may pass it): sysctl -w fs.nr_open="
          << verdict.limit_nofile << "\n";
    }
    out << "    or lower capacity, max_connections or the devices in kvd's config\n";
  }
  out << "  memory: kvd's RSS about " << FormatBytes(need.rss_bytes());
  if (need.host_page_bytes() > 0) out << " + host pages " << FormatBytes(need.host_page_bytes());
  out << "; available " << FormatBytes(machine.mem_available_bytes) << ": " << Yes(verdict.memory_ok) << "\n";
  out << "  /dev/shm: " << FormatBytes(need.shm_bytes()) << " (the state segment); free "
      << FormatBytes(machine.shm_free_bytes) << ": " << Yes(verdict.shm_ok) << "\n";
  out << (verdict.ok() ? "this machine's limits suffice\n"
                       : "this machine's limits do not suffice (exit " + Num(kLimitsDoNotSuffice) + ")\n");
  return out.str();
}

std::string LimitsReportJson(const LimitsNeed& need, const MachineLimits& machine,
                             const LimitsVerdict& verdict) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const DeviceNeed& d : need.devices) {
    devices.push_back({{"device", d.device},
                       {"name", d.name},
                       {"device_bytes", d.device_bytes},
                       {"capacity_pages", d.capacity_pages}});
  }
  nlohmann::ordered_json fds = {{"needed", need.fds()},
                                {"pages", need.pages()},
                                {"fds_per_page", need.fds_per_page},
                                {"reserve", need.reserve_fds},
                                {"connections", need.connections},
                                {"headroom", need.headroom_fds},
                                {"kvd_own", need.base_fds},
                                {"soft_limit", machine.nofile_soft},
                                {"hard_limit", machine.nofile_hard},
                                {"nr_open", machine.nr_open},
                                {"ok", verdict.fds_ok}};
  if (!verdict.fds_ok) fds["limit_nofile"] = verdict.limit_nofile;
  const nlohmann::ordered_json report = {
      {"ok", verdict.ok()},
      {"backend", need.backend},
      {"page_bytes", need.page_bytes},
      {"devices", std::move(devices)},
      {"devices_ok", verdict.devices_ok},
      {"fds", std::move(fds)},
      {"memory",
       {{"rss_bytes", need.rss_bytes()},
        {"host_page_bytes", need.host_page_bytes()},
        {"available_bytes", machine.mem_available_bytes},
        {"ok", verdict.memory_ok}}},
      {"shm", {{"bytes", need.shm_bytes()}, {"free_bytes", machine.shm_free_bytes}, {"ok", verdict.shm_ok}}}};
  // A device name is the driver's bytes: invalid UTF-8 becomes U+FFFD, never an exception.
  return report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string LimitsLogLine(const LimitsNeed& need, const MachineLimits& machine, const LimitsVerdict& verdict) {
  std::string line = "limits at full use: " + Num(need.fds()) + " fds (" + Num(need.pages()) + " pages x " +
                     Num(need.fds_per_page) + ", " + Num(need.connections) + " connections x " +
                     Num(kFdsPerConnection) + ", " +
                     Num(need.reserve_fds + need.headroom_fds + need.base_fds) +
                     " kvd's own) against a hard limit of " +
                     Num(machine.nofile_hard) + ", RSS about " + FormatBytes(need.rss_bytes()) + " of " +
                     FormatBytes(machine.mem_available_bytes) + " available, " + Num(need.devices.size()) +
                     " device(s): ";
  if (verdict.ok()) return line + "the machine's limits suffice";
  line += "they do not suffice:";
  if (!verdict.fds_ok) line += " set LimitNOFILE=" + Num(verdict.limit_nofile) + " in kvd's systemd unit;";
  if (!verdict.memory_ok) line += " memory;";
  if (!verdict.shm_ok) line += " /dev/shm;";
  if (!verdict.devices_ok) line += " a device's capacity;";
  return line + " kvd --check-limits says more";
}

}  // namespace nanokv::kvd
