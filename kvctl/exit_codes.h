// kvctl's exit codes, documented in `kvctl --help` and docs/KVCTL.md. Scripts
// branch on them, so a code's meaning never changes; new ones are appended.
#ifndef NANOKV_KVCTL_EXIT_CODES_H_
#define NANOKV_KVCTL_EXIT_CODES_H_

#include "nanokv/status.h"

namespace nanokv::kvctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;          // anything not below
inline constexpr int kExitUsage = 2;          // bad arguments, or which kvd is meant is unclear
inline constexpr int kExitNotFound = 3;       // no such kvd (segment) or tenant
inline constexpr int kExitNotRunning = 4;     // kvd not running, stale, or not answering
inline constexpr int kExitPermission = 5;     // kvd or the OS refused, or not a uid trusted as kvd's
inline constexpr int kExitIncomplete = 6;     // evict/limit --wait: not all came back in time
inline constexpr int kExitNotEnabled = 7;     // the kvd runs without it (objects: no object store)

// The text of `kvctl --help`'s footer.
inline constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0  ok\n"
    "  1  error\n"
    "  2  usage: bad arguments, or several kvds run and none was named\n"
    "  3  no such kvd or tenant\n"
    "  4  kvd not running, stale, or not answering\n"
    "  5  permission denied: only root or kvd's user may limit, evict, clean up;\n"
    "     or this user may not read kvd's segment; or the socket's listener is not kvd\n"
    "  6  evict or limit --wait timed out before the tenant gave the pages back\n"
    "  7  not enabled: the kvd runs without what the command needs (objects: object_store.size is 0)";

// The exit code a failed command's Status stands for.
inline int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk:
      return kExitOk;
    case Code::kInvalidArgument:
      return kExitUsage;
    case Code::kNotFound:
      return kExitNotFound;
    case Code::kUnavailable:
      return kExitNotRunning;
    case Code::kPermissionDenied:
      return kExitPermission;
    default:
      return kExitError;
  }
}

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_EXIT_CODES_H_
