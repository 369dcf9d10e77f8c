#include "ipc/segment/segment_reader.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "ipc/segment/process_identity.h"
#include "ipc/segment/seqlock.h"
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

}  // namespace

Result<Snapshot> ReadSegment(std::string_view ipc_name) {
  NANOKV_RETURN_IF_ERROR(ValidateIpcName(ipc_name));
  auto mapping = ShmMapping::OpenReadOnly(ShmName(ipc_name));
  if (!mapping.ok()) {
    if (mapping.status().code() == Code::kNotFound) {
      return Status::NotFound("no segment " + ShmPath(ipc_name) + " (is kvd running?)");
    }
    return mapping.status();
  }
  const SegmentProbe probe = ProbeMapping(**mapping);
  NANOKV_RETURN_IF_ERROR(CheckReadable(probe, ipc_name));

  Snapshot snapshot;
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    if (SeqlockTryRead((*mapping)->data(), &snapshot.segment)) {
      NANOKV_RETURN_IF_ERROR(CheckCopy(snapshot.segment, ipc_name));
      snapshot.kvd_alive =
          ProcessAlive(snapshot.segment.header.kvd_pid, snapshot.segment.header.kvd_start_ticks);
      return snapshot;
    }
    BackOff(attempt);
  }
  const bool alive = ProcessAlive(probe.kvd_pid, probe.kvd_start_ticks);
  return Status::Unavailable("segment " + ShmPath(ipc_name) + " busy: no stable copy in " +
                             std::to_string(kReadAttempts) + " tries (kvd pid " +
                             std::to_string(probe.kvd_pid) + (alive ? ", alive" : ", dead") +
                             ", stopped mid-publish?)");
}

Result<std::vector<std::string>> ListSegments() {
  const std::string directory(kShmDirectory);
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) return Status::FromErrno("opendir", errno, directory);
  std::vector<std::string> names;
  while (dirent* entry = readdir(dir)) {
    std::string_view file = entry->d_name;
    if (!file.starts_with(kShmPrefix)) continue;
    std::string_view ipc_name = file.substr(kShmPrefix.size());
    if (!ValidateIpcName(ipc_name).ok()) continue;
    auto probe = ProbeSegment(std::string(file));
    if (!probe.ok()) {
      // Gone since readdir, or not ours to read: not a segment we can show.
      spdlog::debug("ListSegments: skipping {}: {}", file, probe.status().ToString());
      continue;
    }
    if (probe->magic == kSegmentMagic && probe->layout_version == kSegmentLayoutVersion) {
      names.emplace_back(ipc_name);
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

Status RemoveStaleSegment(std::string_view ipc_name) {
  NANOKV_RETURN_IF_ERROR(ValidateIpcName(ipc_name));
  const std::string shm_name = ShmName(ipc_name);
  // Under the lock, so a kvd still initialising (magic 0) is not taken for dead.
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<ShmDirectoryLock> lock, ShmDirectoryLock::Acquire());
  NANOKV_ASSIGN_OR_RETURN(SegmentProbe probe, ProbeSegment(shm_name));
  std::string stale = StaleReason(probe);
  if (stale.empty()) {
    return Status::FailedPrecondition("kvd (pid " + std::to_string(probe.kvd_pid) +
                                      ") is alive and serves IPC name " + std::string(ipc_name));
  }
  NANOKV_RETURN_IF_ERROR(RemoveShm(shm_name));
  spdlog::info("segment {}: removed stale segment: {}", ShmPath(ipc_name), stale);
  return Status::OK();
}

}  // namespace nanokv::ipc
