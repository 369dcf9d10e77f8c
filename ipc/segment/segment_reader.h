// The readers' side of the /dev/shm state segment (kvctl, tests, the master's
// node agent later): take a consistent copy without ever blocking or writing
// the segment, find the segments on this node, clean up those whose kvd died.
// The writer: segment_writer.h.
#ifndef NANOKV_IPC_SEGMENT_SEGMENT_READER_H_
#define NANOKV_IPC_SEGMENT_SEGMENT_READER_H_

#include <string>
#include <string_view>
#include <vector>

#include "ipc/segment/layout.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// One stable copy of a segment: every row from the same publish
// (header.publish_count says which; header.update_unix_ns says when).
struct Snapshot {
  Segment segment;
  // The kvd named in the header (pid and start ticks) is alive. A false here
  // means the figures are the last a now-dead kvd published.
  bool kvd_alive = false;
};

// Reads /dev/shm/nanokv_<ipc_name>, read-only.
//   kInvalidArgument  a malformed name; not a nanokv segment (magic); a wrong
//                     total_bytes for its version; truncated; counts past capacity
//   kUnsupported      another layout version (named in the message)
//   kNotFound         no such segment
//   kUnavailable      still being created, or no stable copy after a bounded
//                     number of tries ("segment busy": a publish in progress
//                     every time, e.g. kvd stopped mid-publish)
// Retries take at most about 100 ms in all; the writer never waits on them.
Result<Snapshot> ReadSegment(std::string_view ipc_name);

// The IPC names of the /dev/shm/nanokv_* segments whose header holds our magic
// and layout version (not judged by size), sorted. Segments of dead kvds are
// listed too: ReadSegment's kvd_alive says which. Objects we may not open are
// skipped.
Result<std::vector<std::string>> ListSegments();

// Removes /dev/shm/nanokv_<ipc_name> if no live kvd serves it (see
// SegmentWriter::Create for what counts as stale). kFailedPrecondition naming
// the pid if its kvd is alive, kNotFound if there is no such segment.
Status RemoveStaleSegment(std::string_view ipc_name);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_SEGMENT_READER_H_
