// The readers' side of the /dev/shm state segment (kvctl, libkv, tests, the
// master's node agent later): take a consistent copy without ever blocking,
// writing or mapping the segment (a truncation under a mapping would kill
// the reader with SIGBUS), find the segments on this node, clean up those
// whose kvd died. Only segments of a uid the reader trusts as kvd's
// (base/kvd_identity.h) are read. The writer: segment_writer.h.
#ifndef NANOKV_IPC_SEGMENT_SEGMENT_READER_H_
#define NANOKV_IPC_SEGMENT_SEGMENT_READER_H_

#include <sys/types.h>

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
  // The kvd named in the header (pid and start ticks) is alive and runs as
  // the segment's owner. A false here means the figures are the last a
  // now-dead kvd published.
  bool kvd_alive = false;
  uid_t owner_uid = 0;  // of the segment file: the uid kvd runs as
};

// Reads /dev/shm/nanokv_<ipc_name>, read-only.
//   kInvalidArgument  a malformed name; not a nanokv segment (magic); a wrong
//                     total_bytes for its version; truncated (also while
//                     being read); counts past capacity
//   kUnsupported      another layout version (named in the message)
//   kNotFound         no such segment
//   kPermissionDenied we may not open it (its owner and mode are named), it is
//                     a symlink, or its owner is not a uid we trust as kvd's
//   kUnavailable      no stable copy after a bounded number of tries
//                     ("segment busy": a publish in progress every time,
//                     e.g. kvd stopped mid-publish)
// Retries take at most about 100 ms in all; the writer never waits on them.
Result<Snapshot> ReadSegment(std::string_view ipc_name);

// One /dev/shm/nanokv_<name> entry as a reader finds it.
struct SegmentEntry {
  enum class Kind {
    kReadable,    // a segment of our layout, of a trusted uid
    kUnreadable,  // of a trusted uid, but we may not open it (permission)
    kUntrusted,   // its owner is not a uid we trust as kvd's: not read at all
  };
  std::string ipc_name;
  Kind kind = Kind::kReadable;
  uid_t owner_uid = 0;
  mode_t mode = 0;
  Status why;  // kUnreadable, kUntrusted: what to tell the user
};

// Every nanokv_<valid ipc name> entry in /dev/shm, sorted by name: readable
// segments of our magic and layout version (judged by their header, never by
// size), unreadable ones, untrusted ones. Other files (other layouts, not
// segments, gone since the directory was read) are left out.
Result<std::vector<SegmentEntry>> ListSegments();

// Removes /dev/shm/nanokv_<ipc_name> if no live kvd serves it (see
// SegmentWriter::Create for what counts as stale), and only the very file it
// judged. kFailedPrecondition naming the pid if its kvd is alive, kNotFound
// if there is no such segment, kPermissionDenied if it is not ours to remove.
Status RemoveStaleSegment(std::string_view ipc_name);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_SEGMENT_READER_H_
