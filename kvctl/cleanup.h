// `kvctl cleanup`: removes what dead kvds left behind (a kvd killed with
// SIGKILL removes nothing): their /dev/shm segments and their sockets in the
// run directory. Never touches a live kvd's: a segment goes only when
// ipc::RemoveStaleSegment, under the creation lock, finds its kvd gone; a
// socket only when connecting to it is refused (nothing listens).
#ifndef NANOKV_KVCTL_CLEANUP_H_
#define NANOKV_KVCTL_CLEANUP_H_

#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::kvctl {

struct Removal {
  std::string ipc_name;
  std::string kind;    // "segment" or "socket"
  std::string path;
  std::string reason;  // why it was stale
  Status status;       // OK if removed (or, in a dry run, removable)
};

struct CleanupOptions {
  bool dry_run = false;  // say what would go, remove nothing
  // Only these IPC names (empty: every kvd on the node). A named kvd that is
  // alive is reported as not removed (kFailedPrecondition), never touched.
  std::vector<std::string> only;
};

// Every stale segment and socket found, with what became of each.
Result<std::vector<Removal>> Cleanup(const CleanupOptions& options);

// The report: a line per removal ("nothing to clean up" when none), or JSON.
std::string CleanupReport(const std::vector<Removal>& removals, const CleanupOptions& options,
                          bool json);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_CLEANUP_H_
