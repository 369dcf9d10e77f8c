// Where a kvd lives, derived from its IPC name and its run directory: every
// file kvd makes is named here, so kvd, libkv and `kvctl cleanup` agree.
//
//   <run dir>/<ipc>.sock            the socket engines and kvctl connect to
//   <run dir>/<ipc>.lock            held (flock) by the kvd serving <ipc>
//   <run dir>/<ipc>.journal         the page journal (daemon/node/page_journal.h)
//   <run dir>/<ipc>.<instance>.log  an instance's output (daemon/controller/)
//   /dev/shm/nanokv_<ipc>           the state segment (ipc/segment/)
// and, for a moment while kvd starts, <ipc>.sock.new<pid> and
// <ipc>.journal.new<pid> beside them.
//
// An IPC name is 1-48 of [A-Za-z0-9_.-] (it becomes a file name several times).
#ifndef NANOKV_BASE_NAMING_H_
#define NANOKV_BASE_NAMING_H_

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace nanokv::ipc {

inline bool ValidIpcName(std::string_view name) {
  if (name.empty() || name.size() > 48 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The run directory when none is configured: one per user, so several users'
// kvds never contend for one directory (docs/ARCHITECTURE.md, "Security"):
// /run/nanokv for root (a system daemon's place, systemd's RuntimeDirectory),
// else $XDG_RUNTIME_DIR/nanokv where that directory is this user's, else
// /tmp/nanokv-<uid>.
inline std::string DefaultRunDir() {
  const uid_t uid = geteuid();
  if (uid == 0) return "/run/nanokv";
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  struct stat st{};
  if (xdg != nullptr && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == uid) {
    return std::string(xdg) + "/nanokv";
  }
  return "/tmp/nanokv-" + std::to_string(uid);
}

// The directory of kvd sockets: $NANOKV_RUN_DIR, else DefaultRunDir().
inline std::string RunDir() {
  const char* dir = std::getenv("NANOKV_RUN_DIR");
  return dir != nullptr && *dir != '\0' ? dir : DefaultRunDir();
}

inline std::string SocketPathIn(std::string_view run_dir, std::string_view ipc_name) {
  return std::string(run_dir) + "/" + std::string(ipc_name) + ".sock";
}
inline std::string LockPathIn(std::string_view run_dir, std::string_view ipc_name) {
  return std::string(run_dir) + "/" + std::string(ipc_name) + ".lock";
}
inline std::string JournalPathIn(std::string_view run_dir, std::string_view ipc_name) {
  return std::string(run_dir) + "/" + std::string(ipc_name) + ".journal";
}
// The object store's journal, and the page keeper's socket (a kvd restart
// takes the store's objects and pages back through them).
inline std::string ObjectJournalPathIn(std::string_view run_dir, std::string_view ipc_name) {
  return std::string(run_dir) + "/" + std::string(ipc_name) + ".objects";
}
inline std::string KeeperPathIn(std::string_view run_dir, std::string_view ipc_name) {
  return std::string(run_dir) + "/" + std::string(ipc_name) + ".keeper";
}

// <run dir>/<ipc name>.sock
inline std::string SocketPath(std::string_view ipc_name) {
  return SocketPathIn(RunDir(), ipc_name);
}

}  // namespace nanokv::ipc

#endif  // NANOKV_BASE_NAMING_H_
