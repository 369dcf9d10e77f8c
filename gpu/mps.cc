// The MPS probe (gpu/mps.h): a look at the control endpoint, no driver call.
#include "gpu/mps.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace nanokv::gpu {
namespace {

using Control = MpsState::Control;

// A named pipe has a listener when it can be opened for writing without
// blocking; ENXIO says no process has it open for reading.
Control ProbePipe(const std::string& path, std::string* detail) {
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return Control::kListening;
  }
  if (errno == ENXIO) return Control::kStale;
  *detail = std::strerror(errno);
  return Control::kUnreachable;
}

Control ProbeSocket(const std::string& path, std::string* detail) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    *detail = "path too long for a Unix socket";
    return Control::kUnreachable;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  // The socket's type is the daemon's: CUDA 13's control daemon listens on
  // SOCK_SEQPACKET (a stream connect there is EPROTOTYPE, found on an H200).
  int error = 0;
  for (int type : {SOCK_SEQPACKET, SOCK_STREAM}) {
    int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *detail = std::strerror(errno);
      return Control::kUnreachable;
    }
    int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    error = errno;
    ::close(fd);
    if (rc == 0) return Control::kListening;
    if (error == ECONNREFUSED) return Control::kStale;
    if (error != EPROTOTYPE) break;
  }
  *detail = std::strerror(error);
  return Control::kUnreachable;
}

}  // namespace

MpsState DetectMps(const char* pipe_directory_env) {
  MpsState state;
  state.from_environment = pipe_directory_env != nullptr && *pipe_directory_env != '\0';
  state.pipe_directory = state.from_environment ? pipe_directory_env : kDefaultMpsPipeDirectory;
  const std::string control = state.pipe_directory + "/control";
  struct stat st {};
  if (::lstat(control.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) {
      state.control = Control::kAbsent;
    } else {
      state.control = Control::kUnreachable;
      state.detail = std::strerror(errno);
    }
    return state;
  }
  if (S_ISFIFO(st.st_mode)) {
    state.control = ProbePipe(control, &state.detail);
  } else if (S_ISSOCK(st.st_mode)) {
    state.control = ProbeSocket(control, &state.detail);
  } else {
    state.control = Control::kNotAnEndpoint;
  }
  return state;
}

std::string DescribeMps(const MpsState& state) {
  const std::string control = state.pipe_directory + "/control";
  const std::string where = state.from_environment ? " (CUDA_MPS_PIPE_DIRECTORY)" : " (the default; "
                                                                                     "CUDA_MPS_PIPE_DIRECTORY unset)";
  switch (state.control) {
    case Control::kListening:
      return "MPS active: a control daemon listens at " + control + where +
             "; this process's CUDA work and that of engines started with the same CUDA_MPS_PIPE_DIRECTORY "
             "goes through its MPS server";
    case Control::kStale:
      return "MPS not active: " + control + where + " exists but no control daemon listens (one that ended)";
    case Control::kNotAnEndpoint:
      return "MPS not active: " + control + where + " is neither a named pipe nor a socket";
    case Control::kUnreachable:
      return "MPS unknown: " + control + where + " exists but cannot be probed: " + state.detail;
    case Control::kAbsent:
      break;
  }
  return "MPS not active: no control daemon at " + control + where;
}

}  // namespace nanokv::gpu
