// Which kvds run on this node, read from their /dev/shm segments, and which
// one a command means. Segments are found by our magic and layout version
// (ipc::ListSegments), never by file size, and read without ever blocking or
// writing them, so every view works while a kvd is busy or hung.
#ifndef NANOKV_KVCTL_DISCOVERY_H_
#define NANOKV_KVCTL_DISCOVERY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/segment/segment_reader.h"
#include "nanokv/status.h"

namespace nanokv::kvctl {

// kvd publishes at least once a second (NodeServer::Run); a live kvd whose
// last publish is older than this is shown as hung.
inline constexpr uint64_t kHungAfterNs = 5'000'000'000;

enum class KvdState {
  kLive,        // its process is alive and it published recently
  kHung,        // its process is alive but has not published for kHungAfterNs
  kStale,       // its process is gone: the figures are the last it published
  kUnreadable,  // no stable copy (stopped mid-publish), truncated, or we may not read it
};
const char* KvdStateName(KvdState state);

// One kvd as a segment shows it.
struct Kvd {
  std::string ipc_name;
  KvdState state = KvdState::kUnreadable;
  std::optional<ipc::Snapshot> snapshot;  // set unless kUnreadable
  Status error;                           // kUnreadable: why
};

uint64_t NowUnixNs();
KvdState StateOf(const ipc::Snapshot& snapshot, uint64_t now_unix_ns);

// Totals over a snapshot's devices.
uint64_t CapacityBytes(const ipc::Segment& segment);
uint64_t UsedBytes(const ipc::Segment& segment);  // granted + object pages

// Every kvd segment on this node, sorted by IPC name; an unreadable one is
// listed with its error, not dropped. Segments whose owner is not a uid
// trusted as kvd's (base/kvd_identity.h) are never read: they go to
// *skipped, if given, for the caller to say so.
Result<std::vector<Kvd>> DiscoverKvds(uint64_t now_unix_ns,
                                      std::vector<ipc::SegmentEntry>* skipped = nullptr);

// One kvd's segment. kNotFound (no such segment, naming those that exist),
// kInvalidArgument (a malformed name), else ReadSegment's error.
Result<Kvd> ReadKvd(std::string_view ipc_name, uint64_t now_unix_ns);

// The kvd a command means: `given` if not empty, else $NANOKV_IPC_NAME (or
// kvcached's $KVCACHED_IPC_NAME), else the only live kvd on the node.
// kUnavailable when none is live, kInvalidArgument naming them when several
// are and none was named.
Result<std::string> ResolveIpcName(std::string_view given);

// For a command that needs kvd to answer: OK if `kvd` is live or hung
// (a hung kvd may still answer), else why not: kPermissionDenied when we may
// not read its segment (or do not trust its owner), kUnavailable otherwise.
Status RequireRunning(const Kvd& kvd);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_DISCOVERY_H_
