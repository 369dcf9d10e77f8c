// The page journal's fixed header (daemon/node/page_journal.h owns the file
// and its entries): here, below kvd, because `kvctl cleanup` reads it too, to
// tell when a dead kvd's journal is nobody's any more.
#ifndef NANOKV_IPC_SEGMENT_JOURNAL_HEADER_H_
#define NANOKV_IPC_SEGMENT_JOURNAL_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ipc/segment/layout.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// "NKVPJ002" read as a little-endian uint64.
inline constexpr uint64_t kJournalMagic = 0x3230304A50564B4EULL;
inline constexpr uint32_t kJournalVersion = 3;  // 3: a kvd's-own bit per entry (page_journal.h)
inline constexpr size_t kJournalGroupNameBytes = 64;
inline constexpr int kJournalMaxGroups = 1024;
// Pages per device a journal may list (8 TiB of 2 MiB pages): a bound on what
// a file can make kvd allocate, far above any GPU's page count.
inline constexpr uint32_t kJournalMaxPagesPerDevice = 1u << 22;

struct JournalHeader {
  uint64_t magic;  // stored last, with release: a journal without it is ignored
  uint32_t version;
  uint32_t device_count;  // 1..kMaxDevices
  uint64_t page_bytes;
  uint64_t total_bytes;   // of the whole file
  int32_t ordinals[kMaxDevices];
  uint32_t capacities[kMaxDevices];  // pages per device: its entries
  uint64_t recovery_window_ms;       // of the kvd that wrote it
  uint64_t stopped_unix_ns;          // when it stopped with pages held; 0 while it ran
};
static_assert(sizeof(JournalHeader) == 176);

inline constexpr size_t kJournalGroupTableOffset = sizeof(JournalHeader);
inline constexpr size_t kJournalEntriesOffset =
    kJournalGroupTableOffset + kJournalMaxGroups * kJournalGroupNameBytes;

// What `kvctl cleanup` needs of a journal without decoding it: its kvd's
// recovery window and when that kvd stopped (0: it did not say: killed).
struct JournalStamp {
  uint64_t recovery_window_ms = 0;
  uint64_t stopped_unix_ns = 0;
  uint64_t modified_unix_ns = 0;  // the file's mtime
};
// kNotFound without a file; kInvalidArgument for one that is not a journal of
// this version (a symlink is not followed: kPermissionDenied).
Result<JournalStamp> ReadJournalStamp(const std::string& path);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_JOURNAL_HEADER_H_
