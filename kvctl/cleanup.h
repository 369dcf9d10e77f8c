// `kvctl cleanup`: removes what dead kvds left behind (a kvd killed with
// SIGKILL removes nothing). Every file kvd makes (base/naming.h): its
// /dev/shm segment, and in its run directory its socket, its lock, the
// private files of a start cut short, its page journal once the recovery
// window after its kvd stopped has passed (before that, a restarted kvd
// needs it to take back the pages engines still hold), and with --logs its
// instances' logs.
//
// Never touches a live kvd's: a segment goes only when it is stale (its kvd
// gone), or named and not a kvd's (its owner is no uid kvd runs as), and
// the files of a name in a run directory only while cleanup holds that
// name's lock there (so no kvd runs or starts from it meanwhile), or,
// without a lock file, when nothing listens on its socket. Run directories
// looked at: each stale segment's (it publishes its socket path), and
// --run-dir / $NANOKV_RUN_DIR, else this user's default.
#ifndef NANOKV_KVCTL_CLEANUP_H_
#define NANOKV_KVCTL_CLEANUP_H_

#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::kvctl {

struct Removal {
  std::string ipc_name;
  std::string kind;    // "segment", "socket", "lock", "journal", "partial" or "log"
  std::string path;
  std::string reason;  // why it was stale, or why it is kept
  Status status;       // OK if removed (or, in a dry run, removable)
  bool kept = false;   // left on purpose (a journal within its recovery window)
};

struct CleanupOptions {
  bool dry_run = false;  // say what would go, remove nothing
  bool logs = false;     // also the instance logs of kvds that are gone
  // Only these IPC names (empty: every kvd on the node). A named kvd that is
  // alive is reported as not removed (kFailedPrecondition), never touched.
  std::vector<std::string> only;
};

// Every stale file found, with what became of each.
Result<std::vector<Removal>> Cleanup(const CleanupOptions& options);

// The report: a line per file ("nothing to clean up" when none), or JSON.
std::string CleanupReport(const std::vector<Removal>& removals, const CleanupOptions& options,
                          bool json);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_CLEANUP_H_
