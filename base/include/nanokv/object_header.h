// The object store's on-device header: one 64-byte record per object in the
// owner device's header arena (the nano_mooncake seed, section 5.1). Plain
// C++ with fixed-width fields and no CUDA headers, so kvd (host C++), the C
// ABI and the device kernels (kv_kernels.cu, as CUDA or HIP) share one layout.
//
// Who writes what:
//   kvd (host), open_for_write: every field in one synchronous copy, state
//     already WRITING (RESERVED is kvd's index only: nobody holds the plan
//     until that copy has landed), before the plan is handed out.
//   the producer: payload bytes only (kv_store_pages or its own kernels), then
//     state = READY with a release store at system scope (kv_commit_ready), or
//     kvd's commit() does the same store from the host after the producer's
//     stream has finished.
//   readers (get, device readers): state with an acquire load before touching
//     payload; last_access best effort (relaxed, may be lost, eviction hint).
//   kvd, remove/evict/reclaim: CAS READY -> DEAD (or RESERVED/WRITING -> DEAD
//     past write_timeout), then frees payload and header; epoch += 1 when the
//     header slot is reused (ABA guard: a plan carries the epoch it was made for).
//
// Memory orders (invariants):
//   1. An object is immutable once READY: no payload or header field other
//      than state (READY -> DEAD) and last_access changes afterwards.
//   2. READY is stored with release at system scope, after all payload stores
//      of the writer (same launch or earlier work on the same stream), so a
//      reader on any device or the host that sees READY with acquire sees
//      every payload byte.
//   3. state is only touched through 32-bit atomic operations; the other
//      fields are written before the release of WRITING and read after the
//      acquire of READY, so plain accesses suffice for them.
#ifndef NANOKV_OBJECT_HEADER_H_
#define NANOKV_OBJECT_HEADER_H_

#include <cstddef>
#include <cstdint>

namespace nanokv {

// 0 is "no object" so a zeroed header arena is all free slots. (The seed
// numbers RESERVED from 0; we shift by one for that reason.)
enum class ObjState : std::uint32_t {
  kFree = 0,
  kReserved = 1,  // header slot and payload allocated, plan not handed out
  kWriting = 2,   // the producer has the plan and writes payload
  kReady = 3,     // all bytes written; immutable; readable
  kDead = 4,      // removed, evicted or reclaimed; space about to be freed
};

struct alignas(64) ObjHeader {
  std::uint64_t key_hash;      // xxhash64(key), seed 0
  std::uint32_t n_pages;       // payload pages the object spans
  std::uint32_t page_bytes;     // bytes per payload page
  std::uint64_t payload_base;  // byte offset of the payload in the owner's store range
  std::uint64_t bytes_total;   // logical object bytes (<= n_pages * page_bytes)
  std::uint32_t state;         // an ObjState; atomic access only (invariant 3)
  std::uint32_t epoch;         // bumped when the slot is reused
  std::uint64_t last_access;   // steady-clock ns of the last get; a hint
  std::uint32_t flags;         // pins, policy bits (kvd's store defines them)
  std::uint32_t reserved0;     // zero
  std::uint64_t reserved1;     // zero; pads to 64 bytes
};

static_assert(sizeof(ObjHeader) == 64, "ObjHeader is one 64-byte record");
static_assert(alignof(ObjHeader) == 64, "ObjHeader is 64-byte aligned");
static_assert(offsetof(ObjHeader, key_hash) == 0);
static_assert(offsetof(ObjHeader, n_pages) == 8);
static_assert(offsetof(ObjHeader, page_bytes) == 12);
static_assert(offsetof(ObjHeader, payload_base) == 16);
static_assert(offsetof(ObjHeader, bytes_total) == 24);
static_assert(offsetof(ObjHeader, state) == 32);
static_assert(offsetof(ObjHeader, epoch) == 36);
static_assert(offsetof(ObjHeader, last_access) == 40);
static_assert(offsetof(ObjHeader, flags) == 48);

// What a device-side commit (kv_commit_ready) reports: {code, state seen}.
enum class CommitCode : std::uint32_t {
  kCommitted = 0,   // state was WRITING with the expected epoch; now READY
  kWrongEpoch = 1,  // header epoch != expected: the slot was reused, nothing stored
  kWrongState = 2,  // state was not WRITING (READY twice, DEAD after a timeout ...)
};

// Byte offset of state, for code that addresses it through a raw pointer.
inline constexpr std::size_t kObjHeaderStateOffset = offsetof(ObjHeader, state);

}  // namespace nanokv

#endif  // NANOKV_OBJECT_HEADER_H_
