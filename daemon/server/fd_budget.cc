#include "daemon/server/fd_budget.h"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>

#include "ipc/uds/fd_passing.h"

namespace nanokv::kvd {

uint64_t FdBudget::connections() const {
  uint64_t needed = open_now + pages_to_come * fds_per_page + headroom;
  return limit > needed ? (limit - needed) / kFdsPerConnection : 0;
}

std::string FdBudget::ToString() const {
  return "open-file limit " + std::to_string(limit) + ": " + std::to_string(open_now) +
         " open, " + std::to_string(pages_to_come * fds_per_page) + " for " + std::to_string(pages_to_come) +
         " pages still to create, " +
         std::to_string(headroom) + " headroom, room for " + std::to_string(connections()) +
         " connections";
}

uint64_t CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  uint64_t count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count > 0 ? count - 1 : 0;  // less the directory's own fd
}

FdBudget MeasureFdBudget(uint64_t pages_to_come, uint64_t fds_per_page) {
  FdBudget budget;
  rlimit limit{};
  budget.limit = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
  budget.open_now = CountOpenFds();
  budget.pages_to_come = pages_to_come;
  budget.fds_per_page = fds_per_page;
  budget.headroom = ipc::kMaxFdsPerMessage + 64;
  return budget;
}

uint32_t ConnectionLimit(const FdBudget& budget, uint32_t configured) {
  uint64_t wanted = configured != 0 ? configured : kDefaultMaxConnections;
  uint64_t affordable = std::max<uint64_t>(budget.connections(), kMinConnections);
  return static_cast<uint32_t>(std::min(wanted, affordable));
}

}  // namespace nanokv::kvd
