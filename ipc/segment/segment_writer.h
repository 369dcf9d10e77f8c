// kvd's side of the /dev/shm state segment: create it (refusing a name a live
// kvd serves, replacing a stale or forged one), publish the daemon's state
// under the seqlock, remove it on clean shutdown. Readers: segment_reader.h.
//
// The segment is made whole before it has a name: an unnamed file
// (O_TMPFILE) in /dev/shm, sized, moded and initialised, then linked to
// nanokv_<ipc> only if that name is free (linkat fails on any existing
// entry, symlinks included). So a reader never sees a half-made segment, and
// no lock on /dev/shm (which anyone could hold) is needed. Two kvds of one
// IPC name in one run directory exclude each other by its lock (base/run_dir.h).
#ifndef NANOKV_IPC_SEGMENT_SEGMENT_WRITER_H_
#define NANOKV_IPC_SEGMENT_SEGMENT_WRITER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ipc/segment/layout.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

struct SegmentOptions {
  std::string ipc_name;          // see base/naming.h; the object is "nanokv_" + this
  mode_t mode = 0640;            // applied exactly, whatever the umask
  std::optional<gid_t> gid;      // group to give the segment, if any
  std::string backend;           // "host", "cuda", "hip" (truncated to 15 bytes)
  uint64_t page_bytes = 0;
  std::string socket_path;       // published for kvctl and engines (at most 111 bytes)
};

class SegmentWriter {
 public:
  // Creates /dev/shm/nanokv_<ipc_name> owned by this process.
  //   kInvalidArgument    a malformed ipc_name, or a socket_path too long
  //   kFailedPrecondition a live kvd (pid alive with the recorded start time,
  //                       running as the segment's owner) serves the name;
  //                       its segment is left alone
  //   kPermissionDenied   the name is taken by something we may not remove
  //                       (another user's file: the message names its owner),
  //                       or the gid cannot be set
  //   kUnavailable        the name kept being taken again as we cleared it
  // Whatever else holds the name (a dead kvd's segment, a forged one naming
  // another uid's process, a symlink, a file that is no segment) is logged
  // with its owner and removed. The new segment holds the header and no rows,
  // publish_count 0, before Create returns.
  static Result<std::unique_ptr<SegmentWriter>> Create(const SegmentOptions& options);

  // Removes the segment (see Remove), logging a failure.
  ~SegmentWriter();
  SegmentWriter(const SegmentWriter&) = delete;
  SegmentWriter& operator=(const SegmentWriter&) = delete;

  // Publishes one consistent state. `fill` runs on the writer's private copy of
  // the segment, which still holds the previous publish, so it may change only
  // what changed; it sets rows [0, count) and the three counts. After it, the
  // identity fields (magic, versions, sizes, pid, start ticks, times, publish
  // count, ipc_name) are restored and rows at or past their count are zeroed,
  // so a reader never sees stale rows. The copy into shared memory then takes
  // a few microseconds under the seqlock; `fill` itself runs outside it, so
  // readers only ever retry for the copy. Publishes are serialized; thread-safe.
  // kInvalidArgument, and nothing published, if a count exceeds its capacity.
  // Publishing after Remove() is allowed and reaches only the processes that
  // still have the segment mapped.
  Status Publish(const std::function<void(Segment&)>& fill);

  // Unlinks the segment's name, if it still names our segment (a name another
  // kvd took over is left alone). Processes that have it mapped keep their copy.
  // Idempotent.
  Status Remove();

  const std::string& ipc_name() const { return ipc_name_; }
  // Publishes completed so far.
  uint64_t publish_count() const;

 private:
  SegmentWriter(std::string ipc_name, int fd, void* shared, std::unique_ptr<Segment> staged);
  // REQUIRES: mu_ held.
  void PublishLocked();

  const std::string ipc_name_;
  const int fd_;        // the segment file, open read-write
  void* const shared_;  // all of it, mapped read-write
  mutable std::mutex mu_;
  // Private copy of the segment: `fill` edits it, PublishLocked copies it out.
  // Its identity fields are set once in Create. GUARDED_BY(mu_)
  std::unique_ptr<Segment> staged_;
  bool removed_ = false;  // GUARDED_BY(mu_)
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_SEGMENT_WRITER_H_
