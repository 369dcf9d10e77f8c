// The /dev/shm state segment: kvd's published view of itself, read by kvctl and
// tests from other processes (docs/ARCHITECTURE.md invariant 6: kvctl never lies, every
// figure carries a version and a timestamp).
//
// Glossary:
//   segment     the shared-memory object "/dev/shm/nanokv_<ipc name>", exactly
//               one `Segment` (below), created by one kvd and written by it alone.
//   ipc name    the name engines attach by (NANOKV_IPC_NAME); 1..48 characters
//               of [A-Za-z0-9_.-], no leading '.' (base/naming.h).
//   row         one device, tenant or instance record. Rows [0, count) are
//               valid; the writer zeroes the rest on every publish.
//   publish     one seqlock-protected rewrite of the whole segment.
//   seq         the seqlock word: odd while a publish is in progress.
//   start ticks field 22 of /proc/<pid>/stat: the clock tick a process started
//               at. (pid, start ticks) names a process; a pid alone may be reused.
//
// Invariants:
//   1. Exactly one writer: the kvd whose (kvd_pid, kvd_start_ticks) is in the
//      header. Creation and removal are serialized (see shm_file.h).
//   2. Readers never write, never block the writer, and accept a copy only if
//      seq was even and unchanged across it (seqlock.h), so no row is torn.
//   3. magic, layout_version, total_bytes, kvd_pid and kvd_start_ticks never
//      change after creation, and the frozen prefix (through kvd_start_ticks)
//      keeps its offsets in every future layout_version, so any version can
//      tell whether the kvd that owns a segment is still alive.
//   4. A reader trusts a segment only if magic, layout_version and total_bytes
//      all match this header's constants, never by its file size.
//
// Every struct is trivially copyable with no padding (unique object
// representations), so a Snapshot is a plain copy and the byte layout is the
// same for every compiler; offsets are pinned by static_asserts below. Why
// `seq` is a plain uint64_t, not std::atomic<uint64_t>: std::atomic is not
// trivially copyable (its copy constructor is deleted), so the segment could
// not be copied into a Snapshot; every access to it goes through
// std::atomic_ref instead, which is lock-free on 64-bit words (asserted).
#ifndef NANOKV_IPC_SEGMENT_LAYOUT_H_
#define NANOKV_IPC_SEGMENT_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace nanokv::ipc {

// "NKVSEG01" read as a little-endian uint64, so `hexdump -C` shows the name.
inline constexpr uint64_t kSegmentMagic = 0x3130474553564B4EULL;
inline constexpr uint32_t kSegmentLayoutVersion = 3;

inline constexpr uint32_t kMaxDevices = 16;
inline constexpr uint32_t kMaxTenants = 256;
inline constexpr uint32_t kMaxInstances = 64;
inline constexpr size_t kNameBytes = 64;     // every name field, NUL included
inline constexpr size_t kBackendBytes = 16;  // "host", "cuda", "hip"
inline constexpr size_t kSocketPathBytes = 112;  // sun_path's 108, rounded to words

enum class TenantState : uint32_t {
  kAttached = 1,    // connected, may hold pages
  kReclaiming = 2,  // over its limit (lowered, or evicted): asked to give pages
                    // back, and granted none until it is under again
  kDetached = 3,    // left cleanly, holds nothing (not published yet)
  kDead = 4,        // gone; its pages came back (not published yet)
};

enum class InstanceState : uint32_t {
  kStarting = 1,
  kRunning = 2,
  kRestarting = 3,
  kExited = 4,
  kFailed = 5,
};

// The word kvd logs and kvctl shows for a state; nullptr for a value no
// state has (a row from another layout, or scribbled).
constexpr const char* InstanceStateName(InstanceState state) {
  switch (state) {
    case InstanceState::kStarting: return "starting";
    case InstanceState::kRunning: return "running";
    case InstanceState::kRestarting: return "restarting";
    case InstanceState::kExited: return "exited";
    case InstanceState::kFailed: return "failed";
  }
  return nullptr;
}

struct SegmentHeader {
  // Frozen prefix (invariant 3): the same offsets in every layout_version.
  uint64_t magic;           // kSegmentMagic
  uint32_t layout_version;  // kSegmentLayoutVersion
  uint32_t total_bytes;     // sizeof(Segment) of the writer
  uint64_t seq;             // the seqlock word; only through std::atomic_ref
  int32_t kvd_pid;
  uint32_t reserved0;
  uint64_t kvd_start_ticks;  // /proc/<kvd_pid>/stat field 22
  // Version 1.
  uint64_t start_unix_ns;   // when kvd created the segment
  uint64_t update_unix_ns;  // when the last publish began
  uint64_t publish_count;   // publishes so far; 0 = nothing published yet
  char ipc_name[kNameBytes];
  char backend[kBackendBytes];
  uint64_t page_bytes;
  uint32_t device_count;    // <= kMaxDevices
  uint32_t tenant_count;    // <= kMaxTenants
  uint32_t instance_count;  // <= kMaxInstances
  uint32_t reserved1;
  // Version 2: where kvd listens, so kvctl and engines find a kvd whatever
  // its run_dir (a reader trusts it only in a segment of a uid it trusts,
  // and checks the peer it reaches there).
  char socket_path[kSocketPathBytes];
};

struct DeviceRow {
  int32_t device;
  char name[kNameBytes];
  // Old pages recycled away from a group whose engines may still hold them
  // (told to forget, not yet said they did): memory in use beyond
  // created_pages, counted against the capacity (the recycle charge). Was
  // reserved (always 0) before, so the layout version stays.
  uint32_t held_after_recycle_pages;
  uint64_t page_bytes;
  uint64_t device_bytes;
  uint64_t capacity_pages;
  uint64_t created_pages;
  uint64_t free_pages;
  uint64_t granted_pages;
  uint64_t reserve_pages;
  uint64_t object_pages;
};

struct TenantRow {
  uint32_t id;
  int32_t pid;
  uint32_t uid;
  char name[kNameBytes];
  char group[kNameBytes];
  uint32_t state;  // a TenantState
  uint64_t limit_bytes;
  uint64_t used_bytes;
  uint32_t used_pages[kMaxDevices];  // indexed like Segment::devices
  uint64_t attach_unix_ns;
  uint64_t last_activity_unix_ns;
  // Version 3: of used_bytes, what its engine keeps mapped ahead of need
  // (KVCache's reserve), as the engine reported it, capped by its use.
  uint64_t reserve_bytes;
};

// For the controller (engines launched from kvd's YAML).
struct InstanceRow {
  char name[kNameBytes];
  int32_t pid;
  uint32_t state;  // an InstanceState
  int32_t exit_code;  // of its last life: the exit status, or -N if signal N killed it
  uint32_t restarts;
  uint64_t since_unix_ns;  // when it entered `state`
};

struct Segment {
  SegmentHeader header;
  DeviceRow devices[kMaxDevices];
  TenantRow tenants[kMaxTenants];
  InstanceRow instances[kMaxInstances];
};

// Copies `src` into a fixed char field, truncating to N - 1 bytes, and zeroes
// the rest so no stale bytes follow the NUL (a published field is exact).
template <size_t N>
void CopyString(char (&dst)[N], std::string_view src) {
  static_assert(N > 0);
  size_t n = src.size() < N - 1 ? src.size() : N - 1;
  if (n > 0) std::memcpy(dst, src.data(), n);  // an empty view's data() may be null
  std::memset(dst + n, 0, N - n);
}

// The text of a fixed char field, up to its first NUL or its end, so a field
// from another process without a NUL cannot run past its array.
template <size_t N>
std::string_view ReadString(const char (&src)[N]) {
  const void* nul = std::memchr(src, '\0', N);
  return {src, nul ? static_cast<size_t>(static_cast<const char*>(nul) - src) : N};
}

// --- The layout is an ABI between processes: pin it. ---

template <typename T>
inline constexpr bool kIsPlainLayout = std::is_trivially_copyable_v<T> &&
                                       std::is_standard_layout_v<T> &&
                                       std::has_unique_object_representations_v<T>;  // no padding
static_assert(kIsPlainLayout<SegmentHeader> && kIsPlainLayout<DeviceRow> &&
              kIsPlainLayout<TenantRow> && kIsPlainLayout<InstanceRow> && kIsPlainLayout<Segment>);

static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
              "the seqlock needs lock-free 64-bit atomics (shared across processes)");
static_assert(alignof(Segment) >= std::atomic_ref<uint64_t>::required_alignment);
static_assert(offsetof(SegmentHeader, seq) % std::atomic_ref<uint64_t>::required_alignment == 0);

// The frozen prefix (invariant 3).
static_assert(offsetof(SegmentHeader, magic) == 0);
static_assert(offsetof(SegmentHeader, layout_version) == 8);
static_assert(offsetof(SegmentHeader, total_bytes) == 12);
static_assert(offsetof(SegmentHeader, seq) == 16);
static_assert(offsetof(SegmentHeader, kvd_pid) == 24);
static_assert(offsetof(SegmentHeader, kvd_start_ticks) == 32);
inline constexpr size_t kFrozenPrefixBytes = 40;

// Version 3 (1 had no socket_path, 2 no TenantRow::reserve_bytes).
static_assert(offsetof(SegmentHeader, ipc_name) == 64);
static_assert(offsetof(SegmentHeader, backend) == 128);
static_assert(offsetof(SegmentHeader, page_bytes) == 144);
static_assert(offsetof(SegmentHeader, device_count) == 152);
static_assert(offsetof(SegmentHeader, socket_path) == 168);
static_assert(sizeof(SegmentHeader) == 280);
static_assert(offsetof(DeviceRow, page_bytes) == 72 && sizeof(DeviceRow) == 136);
static_assert(offsetof(TenantRow, state) == 140 && offsetof(TenantRow, limit_bytes) == 144);
static_assert(offsetof(TenantRow, used_pages) == 160 && sizeof(TenantRow) == 248);
static_assert(offsetof(InstanceRow, since_unix_ns) == 80 && sizeof(InstanceRow) == 88);
static_assert(offsetof(Segment, devices) == 280);
static_assert(offsetof(Segment, tenants) == 280 + 16 * 136);
static_assert(offsetof(Segment, instances) == 280 + 16 * 136 + 256 * 248);
static_assert(sizeof(Segment) == 69528 + 256 * 8);
// The seqlock copies the segment as whole 64-bit words.
static_assert(sizeof(Segment) % sizeof(uint64_t) == 0);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_LAYOUT_H_
