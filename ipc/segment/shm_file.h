// What the segment writer and readers share below the seqlock: names, the
// Boost.Interprocess shared-memory object and its mapping (exceptions turned
// into Status here and nowhere else), the lock that serializes creation and
// removal, and the judgement "is this segment served by a live kvd?".
// Internal to ipc/segment/.
#ifndef NANOKV_IPC_SEGMENT_SHM_FILE_H_
#define NANOKV_IPC_SEGMENT_SHM_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/interprocess/interprocess_fwd.hpp>

#include "nanokv/status.h"

namespace nanokv::ipc {

// POSIX shared memory objects live here on Linux (glibc's shm_open, and so
// Boost.Interprocess, use this directory); ListSegments scans it.
inline constexpr std::string_view kShmDirectory = "/dev/shm";
inline constexpr std::string_view kShmPrefix = "nanokv_";

// OK iff `ipc_name` is 1..48 characters of [A-Za-z0-9_.-], not starting with
// '.' (base/naming.h's ValidIpcName); else kInvalidArgument.
Status ValidateIpcName(std::string_view ipc_name);
// "nanokv_" + ipc_name: the shared-memory object's name (no leading '/').
std::string ShmName(std::string_view ipc_name);
// "/dev/shm/nanokv_<ipc_name>".
std::string ShmPath(std::string_view ipc_name);

// A shared-memory object and one mapping of all of it.
class ShmMapping {
 public:
  // Maps an existing object read-only. kNotFound if there is none.
  static Result<std::unique_ptr<ShmMapping>> OpenReadOnly(const std::string& shm_name);
  // Creates a new object (fails with kAlreadyExists if the name is taken) of
  // `bytes` zero bytes, with exactly `mode` (not reduced by the umask) and group
  // `gid` if given, and maps it read-write. Nothing is left behind on failure.
  static Result<std::unique_ptr<ShmMapping>> CreateReadWrite(const std::string& shm_name,
                                                             size_t bytes, mode_t mode,
                                                             std::optional<gid_t> gid);
  ~ShmMapping();
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  void* data() const;
  size_t size() const;  // the object's size when it was mapped
  int fd() const;

 private:
  ShmMapping(std::unique_ptr<boost::interprocess::shared_memory_object> object,
             std::unique_ptr<boost::interprocess::mapped_region> region);

  std::unique_ptr<boost::interprocess::shared_memory_object> object_;
  std::unique_ptr<boost::interprocess::mapped_region> region_;
};

// Unlinks the object's name; processes that have it mapped keep their mapping.
// kNotFound if there is no such object.
Status RemoveShm(const std::string& shm_name);

// Serializes the create-or-replace of a segment and every removal among nanokv
// processes, so two kvds starting at once cannot both take one name, and a
// cleanup cannot remove a segment that a kvd is still initialising. It is a
// flock(2) on the /dev/shm directory itself: nothing to create or clean up, and
// released by the kernel if its holder dies. Held for a few milliseconds, never
// while publishing; readers never take it.
class ShmDirectoryLock {
 public:
  // Waits up to about two seconds, then kUnavailable naming the directory.
  static Result<std::unique_ptr<ShmDirectoryLock>> Acquire();
  ~ShmDirectoryLock();
  ShmDirectoryLock(const ShmDirectoryLock&) = delete;
  ShmDirectoryLock& operator=(const ShmDirectoryLock&) = delete;

 private:
  explicit ShmDirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

// The frozen prefix of a segment (layout.h invariant 3), read outside the
// seqlock: these fields never change once magic is set, and magic is stored
// last with release, so an acquire load of magic makes the others valid.
struct SegmentProbe {
  size_t size_bytes = 0;  // of the shared-memory object
  uint64_t magic = 0;     // 0 when the object is smaller than the prefix
  uint32_t layout_version = 0;
  uint32_t total_bytes = 0;
  int32_t kvd_pid = 0;
  uint64_t kvd_start_ticks = 0;
};
SegmentProbe ProbeMapping(const ShmMapping& mapping);
// Opens and probes the object called `shm_name`. kNotFound if there is none.
Result<SegmentProbe> ProbeSegment(const std::string& shm_name);

// Empty if the segment is a nanokv segment (any layout version) whose kvd is
// alive; otherwise why it is stale, for the log. REQUIRES: the directory lock
// is held, so a magic of 0 means a creator died, not one still at work.
std::string StaleReason(const SegmentProbe& probe);

// OK iff the prefix says this build can read the segment: our magic, our
// layout_version, our sizeof(Segment), and at least that many bytes mapped.
// kUnavailable while magic is still 0 (being created), kUnsupported for another
// layout version, kInvalidArgument for anything else.
Status CheckReadable(const SegmentProbe& probe, std::string_view ipc_name);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_SHM_FILE_H_
