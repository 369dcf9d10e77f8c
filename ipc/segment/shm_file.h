// What the segment writer and readers share below the seqlock: names, the
// segment file opened for reading, its frozen prefix, and the judgement "is
// this segment served by a live kvd?". Internal to ipc/segment/.
//
// /dev/shm is world-writable: anyone may put a file, a symlink or a forged
// segment at a segment's name before kvd starts, or truncate their own
// segment under a reader. So readers never map a segment (a truncation would
// SIGBUS them): they copy it with pread. Files are opened without following
// symlinks, and a segment counts as a live kvd's only if the process it
// names runs as the file's owner.
#ifndef NANOKV_IPC_SEGMENT_SHM_FILE_H_
#define NANOKV_IPC_SEGMENT_SHM_FILE_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/segment/layout.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// POSIX shared memory objects live here on Linux; ListSegments scans it.
inline constexpr std::string_view kShmDirectory = "/dev/shm";
inline constexpr std::string_view kShmPrefix = "nanokv_";

// OK iff `ipc_name` is 1..48 characters of [A-Za-z0-9_.-], not starting with
// '.' (base/naming.h's ValidIpcName); else kInvalidArgument.
Status ValidateIpcName(std::string_view ipc_name);
// "nanokv_" + ipc_name: the shared-memory object's name (no leading '/').
std::string ShmName(std::string_view ipc_name);
// "/dev/shm/nanokv_<ipc_name>".
std::string ShmPath(std::string_view ipc_name);

// A segment opened read-only, never mapped.
class SegmentFile {
 public:
  // kNotFound when nothing is there; kPermissionDenied for a symlink (naming
  // its owner) or a file we may not open; kInvalidArgument for anything that
  // is not a regular file.
  static Result<SegmentFile> Open(const std::string& path);
  SegmentFile(SegmentFile&& other) noexcept;
  SegmentFile& operator=(SegmentFile&&) = delete;
  SegmentFile(const SegmentFile&) = delete;
  ~SegmentFile();

  const struct stat& stat() const { return stat_; }
  // Up to `bytes` at `offset`; fewer only at the end of the file (which may
  // move: the owner can truncate it at any time). kIOError for a failed read.
  Result<size_t> Read(void* out, size_t bytes, uint64_t offset) const;
  // One attempt at a consistent copy of the whole segment under the seqlock
  // (seqlock.h): true if `out` holds one, false if a publish was in progress
  // (retry). kInvalidArgument if the file is shorter than a Segment.
  Result<bool> TryReadStable(Segment* out) const;

 private:
  SegmentFile(int fd, const struct stat& st) : fd_(fd), stat_(st) {}
  int fd_;
  struct stat stat_;
};

// The frozen prefix (layout.h invariant 3), and who owns the file.
struct SegmentProbe {
  size_t size_bytes = 0;  // of the file when probed
  uint64_t magic = 0;     // 0 when the file is smaller than the prefix
  uint32_t layout_version = 0;
  uint32_t total_bytes = 0;
  int32_t kvd_pid = 0;
  uint64_t kvd_start_ticks = 0;
  uid_t owner_uid = 0;
  mode_t mode = 0;
};
Result<SegmentProbe> ProbeFile(const SegmentFile& file);
// Opens and probes `path` (SegmentFile::Open's errors).
Result<SegmentProbe> ProbeSegment(const std::string& path);

// Empty if the segment is a nanokv segment (any layout version) whose kvd is
// alive and runs as the file's owner, a uid that counts as kvd
// (base/kvd_identity.h); otherwise why not, for the log. A segment naming a
// live process of another uid (pid 1, say) is forged; one of a uid that is
// not kvd's, naming a live process of its own, is not a kvd's.
std::string StaleReason(const SegmentProbe& probe);

// OK iff the prefix says this build can read the segment: our magic, our
// layout_version, our sizeof(Segment), and at least that many bytes.
// kUnsupported for another layout version, kInvalidArgument for anything else.
Status CheckReadable(const SegmentProbe& probe, std::string_view ipc_name);

// Unlinks /dev/shm/<shm_name>. kNotFound if there is none.
Status RemoveShm(const std::string& shm_name);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_SHM_FILE_H_
