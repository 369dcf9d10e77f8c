#include "ipc/segment/process_identity.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

namespace nanokv::ipc {
namespace {

constexpr int kStartTicksField = 22;

// Reads the whole of a small /proc file (one read usually suffices; stat lines
// are a few hundred bytes).
Result<std::string> ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ESRCH) return Status::NotFound(path + ": no such process");
    return Status::FromErrno("open", err, path);
  }
  std::string text;
  char buffer[1024];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      // The process exited between open and read.
      if (err == ESRCH) return Status::NotFound(path + ": no such process");
      return Status::FromErrno("read", err, path);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace

Result<ProcStat> ParseProcStat(std::string_view line) {
  size_t close_paren = line.rfind(')');
  if (close_paren == std::string_view::npos || line.find('(') > close_paren) {
    return Status::InvalidArgument("/proc stat line without a (comm) field");
  }
  // After "pid (comm)" come fields 3, 4, ... separated by single spaces.
  std::string_view rest = line.substr(close_paren + 1);
  ProcStat stat{};
  int field = 2;
  while (field < kStartTicksField) {
    size_t begin = rest.find_first_not_of(' ');
    if (begin == std::string_view::npos) break;
    rest.remove_prefix(begin);
    size_t end = rest.find_first_of(" \n");
    std::string_view token = rest.substr(0, end);
    ++field;
    if (field == 3) {
      if (token.size() != 1) return Status::InvalidArgument("/proc stat: bad state field");
      stat.state = token[0];
    } else if (field == kStartTicksField) {
      auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), stat.start_ticks);
      if (ec != std::errc() || ptr != token.data() + token.size()) {
        return Status::InvalidArgument("/proc stat: bad starttime field");
      }
      return stat;
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  return Status::InvalidArgument("/proc stat line has fewer than 22 fields");
}

Result<uint64_t> ProcessStartTicks(pid_t pid) {
  if (pid <= 0) return Status::InvalidArgument("pid " + std::to_string(pid) + " names no process");
  NANOKV_ASSIGN_OR_RETURN(std::string line, ReadProcFile("/proc/" + std::to_string(pid) + "/stat"));
  NANOKV_ASSIGN_OR_RETURN(ProcStat stat, ParseProcStat(line));
  return stat.start_ticks;
}

bool ProcessAlive(pid_t pid, uint64_t start_ticks) {
  if (pid <= 0) return false;
  auto line = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  if (!line.ok()) {
    // /proc may hide other users' processes (mount option hidepid). If the pid
    // exists we cannot check its start time; say alive, because a false "dead"
    // would let a second kvd take a live kvd's segment.
    return kill(pid, 0) == 0 || errno == EPERM;
  }
  auto stat = ParseProcStat(*line);
  if (!stat.ok()) return false;
  return stat->start_ticks == start_ticks && stat->state != 'Z' && stat->state != 'X';
}

Result<uid_t> ProcessUid(pid_t pid) {
  if (pid <= 0) return Status::InvalidArgument("pid " + std::to_string(pid) + " names no process");
  const std::string path = "/proc/" + std::to_string(pid);
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return Status::NotFound(path + ": no such process we may see");
  return st.st_uid;
}

}  // namespace nanokv::ipc
