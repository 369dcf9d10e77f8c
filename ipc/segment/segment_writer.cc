#include "ipc/segment/segment_writer.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

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
  if (fstat(fd, &ours) != 0 || stat(path.c_str(), &named) != 0) return false;
  return ours.st_dev == named.st_dev && ours.st_ino == named.st_ino;
}

}  // namespace

Result<std::unique_ptr<SegmentWriter>> SegmentWriter::Create(const SegmentOptions& options) {
  NANOKV_RETURN_IF_ERROR(ValidateIpcName(options.ipc_name));
  const std::string shm_name = ShmName(options.ipc_name);
  const pid_t pid = getpid();
  NANOKV_ASSIGN_OR_RETURN(uint64_t start_ticks, ProcessStartTicks(pid));

  // Check-and-replace must be atomic with respect to other kvds and cleanups.
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<ShmDirectoryLock> lock, ShmDirectoryLock::Acquire());
  auto probe = ProbeSegment(shm_name);
  if (probe.ok()) {
    std::string stale = StaleReason(*probe);
    if (stale.empty()) {
      return Status::FailedPrecondition("another kvd (pid " + std::to_string(probe->kvd_pid) +
                                        ") serves IPC name " + options.ipc_name);
    }
    spdlog::warn("segment {}: replacing a stale segment: {}", ShmPath(options.ipc_name), stale);
    Status removed = RemoveShm(shm_name);
    if (!removed.ok() && removed.code() != Code::kNotFound) return removed;
  } else if (probe.status().code() != Code::kNotFound) {
    // Something holds the name that we cannot even read: not ours to replace.
    return Status(probe.status().code(),
                  "IPC name " + options.ipc_name + " is taken by a segment we cannot read: " +
                      std::string(probe.status().message()),
                  probe.status().call(), probe.status().error_name());
  }

  NANOKV_ASSIGN_OR_RETURN(
      std::unique_ptr<ShmMapping> mapping,
      ShmMapping::CreateReadWrite(shm_name, sizeof(Segment), options.mode, options.gid));

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
  header.page_bytes = options.page_bytes;
  // Everything but magic goes out under the seqlock; magic last, with release,
  // so whoever sees our magic (acquire) sees a complete header (layout.h
  // invariant 3) and an even seq.
  header.magic = 0;
  SeqlockPublish(mapping->data(), *staged);
  SharedWord(mapping->data(), kMagicWord).store(kSegmentMagic, std::memory_order_release);
  header.magic = kSegmentMagic;

  spdlog::info("segment {}: created ({} bytes, mode {:o}{})", ShmPath(options.ipc_name),
               sizeof(Segment), options.mode,
               options.gid ? ", gid " + std::to_string(*options.gid) : std::string());
  return std::unique_ptr<SegmentWriter>(
      new SegmentWriter(options.ipc_name, std::move(mapping), std::move(staged)));
}

SegmentWriter::SegmentWriter(std::string ipc_name, std::unique_ptr<ShmMapping> mapping,
                             std::unique_ptr<Segment> staged)
    : ipc_name_(std::move(ipc_name)), mapping_(std::move(mapping)), staged_(std::move(staged)) {}

SegmentWriter::~SegmentWriter() {
  Status status = Remove();
  if (!status.ok()) spdlog::error("segment {}: {}", ShmPath(ipc_name_), status.ToString());
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
  SeqlockPublish(mapping_->data(), *staged_);
}

uint64_t SegmentWriter::publish_count() const {
  std::lock_guard<std::mutex> guard(mu_);
  return staged_->header.publish_count;
}

Status SegmentWriter::Remove() {
  std::lock_guard<std::mutex> guard(mu_);
  if (removed_) return Status::OK();
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<ShmDirectoryLock> lock, ShmDirectoryLock::Acquire());
  const std::string path = ShmPath(ipc_name_);
  if (!SameObject(mapping_->fd(), path)) {
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
