#include "ipc/segment/segment_reader.h"

#include <dirent.h>
#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "base/kvd_identity.h"
#include "ipc/segment/shm_file.h"

namespace nanokv::ipc {
namespace {

// A publish holds seq odd for the time it takes to copy 68 KiB (microseconds),
// so the first tries only yield; later ones back off exponentially to 1 ms, so
// a kvd stopped mid-publish costs a reader about 100 ms, then an error.
constexpr int kReadAttempts = 100;
constexpr int kYieldingAttempts = 8;

void BackOff(int attempt) {
  if (attempt < kYieldingAttempts) {
    sched_yield();
    return;
  }
  int shift = std::min(attempt - kYieldingAttempts, 10);
  std::this_thread::sleep_for(std::chrono::microseconds(std::min(1 << shift, 1000)));
}

// A stable copy can still be one a buggy or hostile writer made: re-check what
// the reader will index by.
Status CheckCopy(const Segment& segment, std::string_view ipc_name) {
  const SegmentHeader& header = segment.header;
  if (header.magic != kSegmentMagic || header.layout_version != kSegmentLayoutVersion ||
      header.total_bytes != sizeof(Segment)) {
    return Status::InvalidArgument("segment " + ShmPath(ipc_name) + ": header changed after creation");
  }
  if (header.device_count > kMaxDevices || header.tenant_count > kMaxTenants ||
      header.instance_count > kMaxInstances) {
    return Status::InvalidArgument("segment " + ShmPath(ipc_name) + ": row counts past capacity (" +
                                   std::to_string(header.device_count) + " devices, " +
                                   std::to_string(header.tenant_count) + " tenants, " +
                                   std::to_string(header.instance_count) + " instances)");
  }
  return Status::OK();
}

Status Untrusted(const std::string& path, uid_t owner) {
  return Status::PermissionDenied(path + " belongs to " + DescribeUid(owner) + ", not to " +
                                  TrustedKvdUidsText() + ": not taken for a kvd's (set " +
                                  kKvdUidVariable + "=" + std::to_string(owner) +
                                  " if kvd runs as that user)");
}

}  // namespace

Result<Snapshot> ReadSegment(std::string_view ipc_name) {
  NANOKV_RETURN_IF_ERROR(ValidateIpcName(ipc_name));
  const std::string path = ShmPath(ipc_name);
  auto file = SegmentFile::Open(path);
  if (!file.ok()) {
    if (file.status().code() == Code::kNotFound) {
      return Status::NotFound("no segment " + path + " (is kvd running?)");
    }
    return file.status();
  }
  if (!IsTrustedKvdUid(file->stat().st_uid)) return Untrusted(path, file->stat().st_uid);
  NANOKV_ASSIGN_OR_RETURN(SegmentProbe probe, ProbeFile(*file));
  NANOKV_RETURN_IF_ERROR(CheckReadable(probe, ipc_name));

  Snapshot snapshot;
  snapshot.owner_uid = probe.owner_uid;
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    NANOKV_ASSIGN_OR_RETURN(bool stable, file->TryReadStable(&snapshot.segment));
    if (stable) {
      NANOKV_RETURN_IF_ERROR(CheckCopy(snapshot.segment, ipc_name));
      snapshot.kvd_alive = StaleReason(probe).empty();
      return snapshot;
    }
    BackOff(attempt);
  }
  const bool alive = StaleReason(probe).empty();
  return Status::Unavailable("segment " + path + " busy: no stable copy in " +
                             std::to_string(kReadAttempts) + " tries (kvd pid " +
                             std::to_string(probe.kvd_pid) + (alive ? ", alive" : ", dead") +
                             ", stopped mid-publish?)");
}

Result<std::vector<SegmentEntry>> ListSegments() {
  const std::string directory(kShmDirectory);
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return Status::FromErrno("opendir", errno, directory);
  std::vector<SegmentEntry> entries;
  while (dirent* entry = readdir(dir)) {
    std::string_view file = entry->d_name;
    if (!file.starts_with(kShmPrefix)) continue;
    std::string_view ipc_name = file.substr(kShmPrefix.size());
    if (!ValidateIpcName(ipc_name).ok()) continue;
    const std::string path = directory + "/" + std::string(file);
    struct stat st{};
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // gone, or no segment
    SegmentEntry listed;
    listed.ipc_name = std::string(ipc_name);
    listed.owner_uid = st.st_uid;
    listed.mode = st.st_mode;
    if (!IsTrustedKvdUid(st.st_uid)) {
      listed.kind = SegmentEntry::Kind::kUntrusted;
      listed.why = Untrusted(path, st.st_uid);
      entries.push_back(std::move(listed));
      continue;
    }
    auto probe = ProbeSegment(path);
    if (!probe.ok()) {
      if (probe.status().code() != Code::kPermissionDenied) {
        spdlog::debug("ListSegments: skipping {}: {}", file, probe.status().ToString());
        continue;  // gone since readdir, or replaced by something else
      }
      listed.kind = SegmentEntry::Kind::kUnreadable;
      listed.why = probe.status();
      entries.push_back(std::move(listed));
      continue;
    }
    if (probe->magic == kSegmentMagic && probe->layout_version == kSegmentLayoutVersion) {
      entries.push_back(std::move(listed));
    }
  }
  closedir(dir);
  std::sort(entries.begin(), entries.end(),
            [](const SegmentEntry& a, const SegmentEntry& b) { return a.ipc_name < b.ipc_name; });
  return entries;
}

Status RemoveStaleSegment(std::string_view ipc_name) {
  NANOKV_RETURN_IF_ERROR(ValidateIpcName(ipc_name));
  const std::string path = ShmPath(ipc_name);
  NANOKV_ASSIGN_OR_RETURN(SegmentFile file, SegmentFile::Open(path));
  NANOKV_ASSIGN_OR_RETURN(SegmentProbe probe, ProbeFile(file));
  std::string stale = StaleReason(probe);
  if (stale.empty()) {
    return Status::FailedPrecondition("kvd (pid " + std::to_string(probe.kvd_pid) +
                                      ") is alive and serves IPC name " + std::string(ipc_name));
  }
  // Only the file judged: a kvd that replaced it meanwhile keeps its own.
  struct stat named{};
  if (lstat(path.c_str(), &named) != 0) return Status::NotFound("no segment " + path);
  if (named.st_dev != file.stat().st_dev || named.st_ino != file.stat().st_ino) {
    return Status::FailedPrecondition("segment " + path + " was replaced while being judged");
  }
  NANOKV_RETURN_IF_ERROR(RemoveShm(ShmName(ipc_name)));
  spdlog::info("segment {}: removed stale segment: {}", path, stale);
  return Status::OK();
}

}  // namespace nanokv::ipc
