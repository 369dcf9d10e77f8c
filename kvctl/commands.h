// kvctl's commands that change a kvd: `limit` and `evict`. Both go through
// kvd's socket (OperatorChannel); what came back is then read from the
// segment, the same figures every view shows. Only root or kvd's own user
// may run them (kvd checks the peer's uid).
#ifndef NANOKV_KVCTL_COMMANDS_H_
#define NANOKV_KVCTL_COMMANDS_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "base/human_size.h"
#include "nanokv/status.h"

namespace nanokv::kvctl {

struct CommandOptions {
  bool json = false;
  // How long to wait for the tenant to give pages back (evict always waits;
  // limit only with `wait`).
  std::chrono::milliseconds timeout{10'000};
  bool wait = false;
  // How long kvd has to answer the request itself.
  std::chrono::milliseconds request_timeout{5'000};
};

// What a command printed, and the exit code it stands for (0, or
// kExitIncomplete when the tenant had not given everything back in time).
struct Report {
  std::string text;  // ends in '\n'
  int exit_code = 0;
};

// Sets `tenant`'s limit on kvd `ipc_name`. A share (30%) is of the kvd's
// capacity, all devices together. Below the tenant's use, kvd asks it to
// give pages back; with options.wait, waits until it is under the limit.
Result<Report> RunLimit(const std::string& ipc_name, const std::string& tenant,
                        const SizeOrShare& size, const CommandOptions& options);

// Asks `tenant` to give back `bytes` (rounded up to pages; 0: all it holds)
// without changing its limit, then waits until its use has dropped by that
// much, it left, or options.timeout passed, and reports what came back.
Result<Report> RunEvict(const std::string& ipc_name, const std::string& tenant, uint64_t bytes,
                        const CommandOptions& options);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_COMMANDS_H_
