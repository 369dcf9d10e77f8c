// Where a kvd lives, derived from its IPC name: its socket and its segment.
// An IPC name is 1-48 of [A-Za-z0-9_.-] (it becomes a file name twice).
#ifndef NANOKV_BASE_NAMING_H_
#define NANOKV_BASE_NAMING_H_

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

// The directory of kvd sockets: $NANOKV_RUN_DIR, else /tmp/nanokv.
inline std::string RunDir() {
  const char* dir = std::getenv("NANOKV_RUN_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp/nanokv";
}

// <run dir>/<ipc name>.sock
inline std::string SocketPath(std::string_view ipc_name) {
  return RunDir() + "/" + std::string(ipc_name) + ".sock";
}

}  // namespace nanokv::ipc

#endif  // NANOKV_BASE_NAMING_H_
