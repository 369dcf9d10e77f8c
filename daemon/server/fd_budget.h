// How many connections kvd can serve without running out of file descriptors.
// A page costs an fd at rest only where it is one (host: a memfd); on cuda
// and hip it is a driver handle, exported only to be sent (PagePool::TakeFd),
// and only the pages created ahead keep an export until their first grant.
// Each connection costs up to kFdsPerConnection (its socket, the peer's
// pidfd, and its request ring's doorbell once it asks for a ring), and an
// adopt request brings up to ipc::kMaxFdsPerMessage more for a moment. Pages come
// first: the connection limit is what the open-file limit leaves after every
// page the pools may still create, never the other way round.
#ifndef NANOKV_DAEMON_SERVER_FD_BUDGET_H_
#define NANOKV_DAEMON_SERVER_FD_BUDGET_H_

#include <cstdint>
#include <string>

namespace nanokv::kvd {

inline constexpr uint64_t kFdsPerConnection = 3;

struct FdBudget {
  uint64_t limit = 0;          // RLIMIT_NOFILE, the soft limit kvd runs under
  uint64_t open_now = 0;       // fds open when measured
  uint64_t pages_to_come = 0;  // pages the pools may still create...
  uint64_t fds_per_page = 0;   // ...at this many fds each at rest (host 1: the memfd; cuda, hip 0)
  uint64_t headroom = 0;       // one adopt's fds, log files, the controller's children
  // What is left for connections at kFdsPerConnection each; 0 when nothing is.
  uint64_t connections() const;
  std::string ToString() const;
};

// Counts the fds open in this process (/proc/self/fd).
uint64_t CountOpenFds();

// The budget now, for pools that may still create `pages_to_come` pages of
// `fds_per_page` fds each (measured by kvd as it creates its first pages).
FdBudget MeasureFdBudget(uint64_t pages_to_come, uint64_t fds_per_page);

// The connection limit kvd applies: `configured` (0: kDefaultMaxConnections)
// capped by what the budget affords, but never below kMinConnections (a kvd
// that serves nobody is no use; the log says the limit is too low).
inline constexpr uint32_t kDefaultMaxConnections = 1024;
inline constexpr uint32_t kMinConnections = 8;
uint32_t ConnectionLimit(const FdBudget& budget, uint32_t configured);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_SERVER_FD_BUDGET_H_
