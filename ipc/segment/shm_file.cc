#include "ipc/segment/shm_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/kvd_identity.h"
#include "base/naming.h"
#include "base/run_dir.h"
#include "ipc/segment/process_identity.h"
#include "ipc/segment/seqlock.h"

namespace nanokv::ipc {
namespace {

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, value);
  return text;
}

std::string Owner(const struct stat& st) {
  return "owner " + DescribeUid(st.st_uid) + ", mode " + ModeText(st.st_mode);
}

}  // namespace

Status ValidateIpcName(std::string_view ipc_name) {
  // One rule for every file derived from the name (base/naming.h).
  if (ValidIpcName(ipc_name)) return Status::OK();
  return Status::InvalidArgument("IPC name \"" + std::string(ipc_name.substr(0, 64)) +
                                 "\" must be 1 to 48 characters of [A-Za-z0-9_.-], "
                                 "not starting with '.'");
}

std::string ShmName(std::string_view ipc_name) {
  return std::string(kShmPrefix) + std::string(ipc_name);
}

std::string ShmPath(std::string_view ipc_name) {
  return std::string(kShmDirectory) + "/" + ShmName(ipc_name);
}

Result<SegmentFile> SegmentFile::Open(const std::string& path) {
  // O_NONBLOCK: a FIFO planted at the name must not hang the reader.
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::NotFound("no segment " + path);
    struct stat st{};
    if (error == ELOOP && lstat(path.c_str(), &st) == 0) {
      return Status::PermissionDenied(path + " is a symbolic link (" + Owner(st) +
                                      "), not a segment");
    }
    if ((error == EACCES || error == EPERM) && lstat(path.c_str(), &st) == 0) {
      return Status(Code::kPermissionDenied,
                    path + ": permission denied (" + Owner(st) + ", group " +
                        DescribeGid(st.st_gid) +
                        "): kvd's config keys segment_mode and group say who may read it",
                    "open", strerrorname_np(error));
    }
    return Status::FromErrno("open", error, path);
  }
  struct stat st{};
  if (fstat(fd, &st) != 0) {
    Status failed = Status::FromErrno("fstat", errno, path);
    close(fd);
    return failed;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::InvalidArgument(path + " is not a regular file (" + Owner(st) + ")");
  }
  return SegmentFile(fd, st);
}

SegmentFile::SegmentFile(SegmentFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), stat_(other.stat_) {}

SegmentFile::~SegmentFile() {
  if (fd_ >= 0) close(fd_);
}

Result<size_t> SegmentFile::Read(void* out, size_t bytes, uint64_t offset) const {
  auto* dst = static_cast<char*>(out);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = pread(fd_, dst + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("pread", errno, "segment");
    if (n == 0) break;  // the end of the file, wherever its owner put it now
    done += static_cast<size_t>(n);
  }
  return done;
}

Result<bool> SegmentFile::TryReadStable(Segment* out) const {
  // seqlock.h: seq even, the copy, seq unchanged; ReadBarrier between.
  constexpr uint64_t kSeqOffset = kSeqWord * sizeof(uint64_t);
  uint64_t s1 = 0;
  uint64_t s2 = 0;
  NANOKV_ASSIGN_OR_RETURN(size_t got, Read(&s1, sizeof(s1), kSeqOffset));
  if (got < sizeof(s1)) {
    return Status::InvalidArgument("segment was truncated under the reader (it ends in its header)");
  }
  if ((s1 & 1) != 0) return false;
  ReadBarrier();
  NANOKV_ASSIGN_OR_RETURN(got, Read(out, sizeof(Segment), 0));
  if (got < sizeof(Segment)) {
    return Status::InvalidArgument("segment was truncated under the reader (" + std::to_string(got) +
                                   " of " + std::to_string(sizeof(Segment)) + " bytes)");
  }
  ReadBarrier();
  NANOKV_ASSIGN_OR_RETURN(got, Read(&s2, sizeof(s2), kSeqOffset));
  return got == sizeof(s2) && s1 == s2;
}

Result<SegmentProbe> ProbeFile(const SegmentFile& file) {
  SegmentProbe probe;
  probe.size_bytes = static_cast<size_t>(file.stat().st_size);
  probe.owner_uid = file.stat().st_uid;
  probe.mode = file.stat().st_mode;
  SegmentHeader prefix{};
  NANOKV_ASSIGN_OR_RETURN(size_t got, file.Read(&prefix, kFrozenPrefixBytes, 0));
  if (got < kFrozenPrefixBytes) return probe;
  // A writer stores magic last (release) and never changes the prefix after:
  // a pread that sees magic sees the rest of the prefix too.
  probe.magic = prefix.magic;
  probe.layout_version = prefix.layout_version;
  probe.total_bytes = prefix.total_bytes;
  probe.kvd_pid = prefix.kvd_pid;
  probe.kvd_start_ticks = prefix.kvd_start_ticks;
  return probe;
}

Result<SegmentProbe> ProbeSegment(const std::string& path) {
  NANOKV_ASSIGN_OR_RETURN(SegmentFile file, SegmentFile::Open(path));
  return ProbeFile(file);
}

std::string StaleReason(const SegmentProbe& probe) {
  if (probe.size_bytes < kFrozenPrefixBytes) {
    return "too small to be a nanokv segment (" + std::to_string(probe.size_bytes) + " bytes)";
  }
  if (probe.magic == 0) return "never initialised";
  if (probe.magic != kSegmentMagic) return "not a nanokv segment (magic " + Hex(probe.magic) + ")";
  const std::string who = "its kvd (pid " + std::to_string(probe.kvd_pid) + ")";
  if (!ProcessAlive(probe.kvd_pid, probe.kvd_start_ticks)) {
    auto ticks = ProcessStartTicks(probe.kvd_pid);
    if (ticks.ok() && *ticks != probe.kvd_start_ticks) return who + " is gone and the pid reused";
    return who + " is gone";
  }
  // Anyone may write a segment naming a live process; a kvd writes its own
  // segment, so the process must run as the file's owner. Unverifiable
  // (hidepid) counts as a match: nothing live is ever declared stale.
  auto uid = ProcessUid(probe.kvd_pid);
  if (uid.ok() && *uid != probe.owner_uid) {
    return "forged: it names pid " + std::to_string(probe.kvd_pid) + ", a process of " +
           DescribeUid(*uid) + ", but belongs to " + DescribeUid(probe.owner_uid);
  }
  // A live process of another uid may name itself in a segment of its own:
  // still not a kvd's unless its uid is one that kvd runs as.
  if (!IsTrustedKvdUid(probe.owner_uid)) {
    return "not a kvd's: it belongs to " + DescribeUid(probe.owner_uid) + " (pid " +
           std::to_string(probe.kvd_pid) + "), and kvd runs as " + TrustedKvdUidsText();
  }
  return "";
}

Status CheckReadable(const SegmentProbe& probe, std::string_view ipc_name) {
  const std::string what = "segment " + ShmPath(ipc_name);
  if (probe.size_bytes < kFrozenPrefixBytes) {
    return Status::InvalidArgument(what + " is " + std::to_string(probe.size_bytes) +
                                   " bytes, too small to be a nanokv segment");
  }
  if (probe.magic != kSegmentMagic) {
    return Status::InvalidArgument(what + " is not a nanokv segment (magic " + Hex(probe.magic) +
                                   ", expected " + Hex(kSegmentMagic) + ")");
  }
  if (probe.layout_version != kSegmentLayoutVersion) {
    return Status::Unsupported(what + " has layout version " +
                               std::to_string(probe.layout_version) + "; this build reads version " +
                               std::to_string(kSegmentLayoutVersion));
  }
  if (probe.total_bytes != sizeof(Segment)) {
    return Status::InvalidArgument(what + " says it is " + std::to_string(probe.total_bytes) +
                                   " bytes; layout version " +
                                   std::to_string(kSegmentLayoutVersion) + " is " +
                                   std::to_string(sizeof(Segment)));
  }
  if (probe.size_bytes < sizeof(Segment)) {
    return Status::InvalidArgument(what + " is truncated to " + std::to_string(probe.size_bytes) +
                                   " bytes");
  }
  return Status::OK();
}

Status RemoveShm(const std::string& shm_name) {
  const std::string path = std::string(kShmDirectory) + "/" + shm_name;
  if (unlink(path.c_str()) == 0) return Status::OK();
  return Status::FromErrno("unlink", errno, path);
}

}  // namespace nanokv::ipc
