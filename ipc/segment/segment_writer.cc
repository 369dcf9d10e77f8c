#include "ipc/segment/segment_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "base/kvd_identity.h"
#include "base/run_dir.h"
#include "ipc/segment/process_identity.h"
#include "ipc/segment/seqlock.h"
#include "ipc/segment/shm_file.h"

namespace nanokv::ipc {
namespace {

uint64_t UnixNanos() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// Rows at or past `count` hold nothing: zero them so no old row lingers.
template <typename Row, size_t N>
void ZeroRowsFrom(Row (&rows)[N], uint32_t count) {
  if (count < N) std::memset(&rows[count], 0, sizeof(Row) * (N - count));
}

// True iff `path` still names the object open as `fd` (same inode), so Remove
// never unlinks a segment that another kvd created under our old name.
bool SameObject(int fd, const std::string& path) {
  struct stat ours {};
  struct stat named {};
  if (fstat(fd, &ours) != 0 || lstat(path.c_str(), &named) != 0) return false;
  return ours.st_dev == named.st_dev && ours.st_ino == named.st_ino;
}

// A new, unnamed segment file in /dev/shm of `mode` (exactly: fchmod beats
// the umask) and group `gid`, sized and mapped. Nothing to clean up on
// failure but the fd: it has no name yet.
Status MakeUnnamed(const SegmentOptions& options, int* fd_out, void** shared_out) {
  const std::string directory(kShmDirectory);
  int fd = open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open(O_TMPFILE)", errno, directory);
  Status failed;
  void* shared = MAP_FAILED;
  if (fchmod(fd, options.mode) != 0) {
    failed = Status::FromErrno("fchmod", errno, "segment " + ShmPath(options.ipc_name));
  } else if (options.gid && fchown(fd, static_cast<uid_t>(-1), *options.gid) != 0) {
    failed = Status::FromErrno("fchown", errno,
                               "segment " + ShmPath(options.ipc_name) + " to gid " +
                                   std::to_string(*options.gid));
  } else if (ftruncate(fd, sizeof(Segment)) != 0) {
    failed = Status::FromErrno("ftruncate", errno, "segment " + ShmPath(options.ipc_name));
  } else {
    shared = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED) failed = Status::FromErrno("mmap", errno, "segment");
  }
  if (!failed.ok()) {
    close(fd);
    return failed;
  }
  *fd_out = fd;
  *shared_out = shared;
  return Status::OK();
}

// Something holds the segment's name: a live kvd's segment (refused), or
// anything else, which is removed if we may. kUnavailable: gone already.
Status ClearName(const std::string& path, const std::string& ipc_name) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::OK();
    return Status::FromErrno("lstat", errno, path);
  }
  std::string what;
  if (S_ISLNK(st.st_mode)) {
    what = "a symbolic link";
  } else if (!S_ISREG(st.st_mode)) {
    what = "not a regular file";
  } else {
    auto probe = ProbeSegment(path);
    if (!probe.ok()) {
      if (probe.status().code() == Code::kNotFound) return Status::OK();
      what = "a file we cannot read (" + std::string(probe.status().message()) + ")";
    } else {
      what = StaleReason(*probe);
      if (what.empty()) {
        return Status::FailedPrecondition(
            "another kvd (pid " + std::to_string(probe->kvd_pid) + ", " +
            DescribeUid(probe->owner_uid) + ") serves IPC name " + ipc_name + " (" + path + ")");
      }
    }
  }
  const std::string owner = "owner " + DescribeUid(st.st_uid) + ", mode " + ModeText(st.st_mode);
  if (unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::OK();
    const int error = errno;
    return Status(Code::kPermissionDenied,
                  "IPC name " + ipc_name + " is taken: " + path + " is " + what + " (" + owner +
                      "), which this kvd (" + DescribeUid(geteuid()) +
                      ") may not remove; remove it as root, or choose another ipc_name",
                  "unlink", strerrorname_np(error));
  }
  spdlog::warn("segment {}: removed what held the name: {} ({})", path, what, owner);
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<SegmentWriter>> SegmentWriter::Create(const SegmentOptions& options) {
  NANOKV_RETURN_IF_ERROR(ValidateIpcName(options.ipc_name));
  if (options.socket_path.size() >= kSocketPathBytes) {
    return Status::InvalidArgument("socket path " + options.socket_path + " is over " +
                                   std::to_string(kSocketPathBytes - 1) + " bytes");
  }
  const std::string path = ShmPath(options.ipc_name);
  const pid_t pid = getpid();
  NANOKV_ASSIGN_OR_RETURN(uint64_t start_ticks, ProcessStartTicks(pid));

  int fd = -1;
  void* shared = nullptr;
  NANOKV_RETURN_IF_ERROR(MakeUnnamed(options, &fd, &shared));
  auto staged = std::make_unique<Segment>();  // value-initialized: all zero
  SegmentHeader& header = staged->header;
  header.layout_version = kSegmentLayoutVersion;
  header.total_bytes = sizeof(Segment);
  header.kvd_pid = pid;
  header.kvd_start_ticks = start_ticks;
  header.start_unix_ns = UnixNanos();
  header.update_unix_ns = header.start_unix_ns;
  CopyString(header.ipc_name, options.ipc_name);
  CopyString(header.backend, options.backend);
  CopyString(header.socket_path, options.socket_path);
  header.page_bytes = options.page_bytes;
  // Everything but magic goes out under the seqlock; magic last, with release,
  // so whoever sees our magic (acquire) sees a complete header (layout.h
  // invariant 3) and an even seq.
  header.magic = 0;
  SeqlockPublish(shared, *staged);
  SharedWord(shared, kMagicWord).store(kSegmentMagic, std::memory_order_release);
  header.magic = kSegmentMagic;

  // Named only now, whole. A name held by anything but a live kvd's segment
  // is cleared; a few turns, in case it is taken again meanwhile.
  const std::string proc_path = "/proc/self/fd/" + std::to_string(fd);
  Status named = Status::Unavailable("IPC name " + options.ipc_name + ": " + path +
                                     " was taken again each time it was cleared");
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (linkat(AT_FDCWD, proc_path.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) {
      named = Status::OK();
      break;
    }
    if (errno != EEXIST) {
      named = Status::FromErrno("linkat", errno, path);
      break;
    }
    Status cleared = ClearName(path, options.ipc_name);
    if (!cleared.ok()) {
      named = cleared;
      break;
    }
  }
  if (!named.ok()) {
    munmap(shared, sizeof(Segment));
    close(fd);
    return named;
  }
  spdlog::info("segment {}: created ({} bytes, mode {}{})", path, sizeof(Segment),
               ModeText(options.mode),
               options.gid ? ", gid " + std::to_string(*options.gid) : std::string());
  return std::unique_ptr<SegmentWriter>(
      new SegmentWriter(options.ipc_name, fd, shared, std::move(staged)));
}

SegmentWriter::SegmentWriter(std::string ipc_name, int fd, void* shared,
                             std::unique_ptr<Segment> staged)
    : ipc_name_(std::move(ipc_name)), fd_(fd), shared_(shared), staged_(std::move(staged)) {}

SegmentWriter::~SegmentWriter() {
  Status status = Remove();
  if (!status.ok()) spdlog::error("segment {}: {}", ShmPath(ipc_name_), status.ToString());
  munmap(shared_, sizeof(Segment));
  close(fd_);
}

Status SegmentWriter::Publish(const std::function<void(Segment&)>& fill) {
  std::lock_guard<std::mutex> guard(mu_);
  const SegmentHeader identity = staged_->header;
  fill(*staged_);
  const uint32_t devices = staged_->header.device_count;
  const uint32_t tenants = staged_->header.tenant_count;
  const uint32_t instances = staged_->header.instance_count;
  // Identity is the writer's, whatever `fill` did to it.
  staged_->header = identity;
  if (devices > kMaxDevices || tenants > kMaxTenants || instances > kMaxInstances) {
    // The rows `fill` wrote stay in the private copy; the next fill sees them.
    return Status::InvalidArgument(
        "segment " + ipc_name_ + ": " + std::to_string(devices) + " devices, " +
        std::to_string(tenants) + " tenants, " + std::to_string(instances) +
        " instances; at most " + std::to_string(kMaxDevices) + ", " +
        std::to_string(kMaxTenants) + ", " + std::to_string(kMaxInstances));
  }
  staged_->header.device_count = devices;
  staged_->header.tenant_count = tenants;
  staged_->header.instance_count = instances;
  ZeroRowsFrom(staged_->devices, devices);
  ZeroRowsFrom(staged_->tenants, tenants);
  ZeroRowsFrom(staged_->instances, instances);
  PublishLocked();
  return Status::OK();
}

void SegmentWriter::PublishLocked() {
  staged_->header.update_unix_ns = UnixNanos();
  ++staged_->header.publish_count;
  SeqlockPublish(shared_, *staged_);
}

uint64_t SegmentWriter::publish_count() const {
  std::lock_guard<std::mutex> guard(mu_);
  return staged_->header.publish_count;
}

Status SegmentWriter::Remove() {
  std::lock_guard<std::mutex> guard(mu_);
  if (removed_) return Status::OK();
  const std::string path = ShmPath(ipc_name_);
  if (!SameObject(fd_, path)) {
    // Gone already, or a kvd that judged us dead replaced it: not ours to remove.
    spdlog::warn("segment {}: no longer names our segment; left alone", path);
    removed_ = true;
    return Status::OK();
  }
  Status status = RemoveShm(ShmName(ipc_name_));
  if (status.ok() || status.code() == Code::kNotFound) {
    removed_ = true;
    spdlog::info("segment {}: removed", path);
    return Status::OK();
  }
  return status;
}

}  // namespace nanokv::ipc
