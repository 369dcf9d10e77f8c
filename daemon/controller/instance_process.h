// Starting one engine process for the controller (daemon/controller/controller.h): its
// environment, its log file, and posix_spawn with nothing of kvd's leaking in.
//
// What a started instance gets:
//   - argv: the resolved command, then its args;
//   - the environment: kvd's, less the NANOKV_* variables kvd sets per
//     instance, plus the instance's `env`, plus ENABLE_NANOKV=1,
//     NANOKV_IPC_NAME, NANOKV_RUN_DIR, NANOKV_TENANT=<name>, and NANOKV_LIMIT,
//     NANOKV_GROUP, NANOKV_DEVICE where the instance sets them;
//   - stdin from /dev/null; stdout and stderr appended to its log file;
//   - no other fd of kvd's (kvd holds exported page fds: an engine must never
//     inherit one, docs/ARCHITECTURE.md invariant 2);
//   - default signal dispositions and an empty signal mask (kvd ignores
//     SIGPIPE, and ignored signals survive exec);
//   - its own process group, so that a stop reaches its children too.
#ifndef NANOKV_DAEMON_CONTROLLER_INSTANCE_PROCESS_H_
#define NANOKV_DAEMON_CONTROLLER_INSTANCE_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "daemon/config/config.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// Where the instances of one kvd attach.
struct InstanceSite {
  std::string ipc_name;
  std::string run_dir;
};

// "NAME=value" entries for `config`, over `base` (an environ-style array,
// nullptr-terminated; kvd's own `environ` in practice).
std::vector<std::string> InstanceEnvironment(const InstanceConfig& config, const InstanceSite& site,
                                             char** base);

// The log file of `config`: its `log`, else <run_dir>/<ipc_name>.<name>.log.
std::string InstanceLogPath(const InstanceConfig& config, const InstanceSite& site);

// Appends one line to `path` (created 0644 if missing); failures are logged.
void AppendLogLine(const std::string& path, const std::string& line);

struct SpawnedProcess {
  pid_t pid = -1;
  int pidfd = -1;  // readable once the process exits; the caller closes it
};

// Starts one life of the instance, its output appended to `log_path`.
// Errors: the open of the log, posix_spawn (an exec failure included: glibc
// reports it), or pidfd_open, each naming the call and the file.
Result<SpawnedProcess> SpawnInstance(const InstanceConfig& config, const InstanceSite& site,
                                     const std::string& log_path);

// Sends `signal` to the process group the instance leads (its children too).
// REQUIRES: the leader is not reaped yet (alive, or a zombie whose pidfd says
// it ended): until then its pid, which is the group's id, names no other
// process or group.
void SignalGroup(pid_t leader, int signal);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONTROLLER_INSTANCE_PROCESS_H_
