// Who a process is, across pid reuse. A pid alone is not an identity: after a
// kvd dies its pid may be handed to any new process, and a segment naming it
// would look served. (pid, start ticks) is: the kernel records when each process
// started, in clock ticks since boot (/proc/<pid>/stat field 22), and no two
// processes that share a pid share a start time.
//
// Caveat: pids are per pid namespace. kvd and whoever checks its liveness must
// see the same /proc (same pid namespace), as kvctl on the node does.
#ifndef NANOKV_IPC_SEGMENT_PROCESS_IDENTITY_H_
#define NANOKV_IPC_SEGMENT_PROCESS_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv::ipc {

struct ProcStat {
  char state;            // field 3: R, S, D, T, Z (zombie), X (dead), ...
  uint64_t start_ticks;  // field 22
};

// Parses one line of /proc/<pid>/stat. The comm field (2) is in parentheses and
// may itself hold spaces and parentheses ("(a) (b c)"), so the fields after it
// are found from the LAST ')'. kInvalidArgument if the line is malformed.
Result<ProcStat> ParseProcStat(std::string_view line);

// Field 22 of /proc/<pid>/stat. kNotFound if no such process, kInvalidArgument
// for pid <= 0.
Result<uint64_t> ProcessStartTicks(pid_t pid);

// True iff `pid` is a process that started at `start_ticks` and has not exited
// (a zombie, dead but not yet reaped, serves nothing: false). Where /proc hides
// the pid from us (hidepid) but kill(pid, 0) finds it, true: unverifiable is
// treated as alive, so nothing live is ever declared stale.
bool ProcessAlive(pid_t pid, uint64_t start_ticks);

// The uid a process runs as (the owner of /proc/<pid>). kNotFound if no such
// process, or if /proc hides it from us (hidepid).
Result<uid_t> ProcessUid(pid_t pid);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_PROCESS_IDENTITY_H_
