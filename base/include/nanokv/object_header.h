// The object store's words that device code shares with kvd and engines, once:
// the on-device header (one 64-byte record per object in the owner device's
// header arena, the nano_mooncake seed, section 5.1), an object's states, its
// pins, what a device commit reports, and the key rules. Plain C++ with
// fixed-width fields, no CUDA headers and no std::string or containers, so
// kvd (host C++), libkv, the C ABI and the device kernels (kernels/*.cu, as
// CUDA or HIP) compile one copy. The records kvd and engines exchange (plans,
// listings) are in nanokv/object_types.h.
//
// Who writes what (kvd writes nothing on the device while it serves: a
// device write from kvd's process costs the engines on that GPU a context
// switch, ~150 us each way on an H100):
//   the producer, on its own stream (kv_store_pages) or by libkv's copies:
//     first the {state, epoch} pair as one 64-bit CAS from any older epoch
//     of the slot (any state) to {WRITING, epoch}, then the other fields;
//     then the payload; then state = READY with a CAS of {WRITING,
//     epoch} -> {READY, epoch}, a release at system scope (kv_commit_ready),
//     or libkv's 4-byte copy after its payload copies; then Commit to kvd.
//   readers (get, device readers): {state, epoch} with an acquire load before
//     touching payload, READY at their plan's epoch; last_access best effort
//     (relaxed, may be lost, eviction hint).
//   kvd: zeroes the arena once at start; remove, evict and reclaim are
//     decided in its index only. A slot's epochs only grow, so a writer
//     stalled past write_timeout fails its CAS once the slot's next object
//     has begun instead of clobbering it; a removed object's header still says
//     READY at its old epoch until the slot is reused, which is why a device
//     reader holds a lease while it reads (the lease keeps the space).
//
// Memory orders (invariants):
//   1. An object is immutable once READY: no payload or header field other
//      than last_access changes afterwards, until its slot is reused.
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
// numbers RESERVED from 0; we shift by one for that reason.) The same values
// travel in the wire's ObjectPlan.state and ObjectEntry.state.
enum class ObjectState : std::uint32_t {
  kFree = 0,
  kReserved = 1,  // header slot and payload allocated, plan not handed out
  kWriting = 2,   // the producer has the plan and writes payload
  kReady = 3,     // all bytes written; immutable; readable
  kDead = 4,      // removed, evicted or reclaimed; space about to be freed
};
inline constexpr ObjectState kLastObjectState = ObjectState::kDead;

// "READY", ... as kvd's errors and kvctl print them; "?" for a value no state has.
constexpr const char* ObjectStateName(ObjectState state) {
  switch (state) {
    case ObjectState::kFree: return "FREE";
    case ObjectState::kReserved: return "RESERVED";
    case ObjectState::kWriting: return "WRITING";
    case ObjectState::kReady: return "READY";
    case ObjectState::kDead: return "DEAD";
  }
  return "?";
}

// What keeps a READY object from eviction (kvd's index holds it): soft pins
// go only when nothing unpinned can, hard pins never. The wire's pin fields
// carry these values.
enum class ObjectPin : std::uint32_t { kNone = 0, kSoft = 1, kHard = 2 };
inline constexpr ObjectPin kLastObjectPin = ObjectPin::kHard;

// Keys are 1..kMaxObjectKeyBytes bytes of printable ASCII without space
// (kFirstObjectKeyByte..kLastObjectKeyByte), so they print safely in kvctl
// and logs. kvd refuses others (kInvalidArgument), the wire codec too.
inline constexpr std::size_t kMaxObjectKeyBytes = 256;
inline constexpr char kFirstObjectKeyByte = 0x21;  // '!'
inline constexpr char kLastObjectKeyByte = 0x7e;   // '~'
constexpr bool IsObjectKeyByte(char c) { return c >= kFirstObjectKeyByte && c <= kLastObjectKeyByte; }

struct alignas(64) ObjectHeader {
  std::uint64_t key_hash;      // xxhash64(key), seed 0
  std::uint32_t n_pages;       // payload pages the object spans
  std::uint32_t page_bytes;     // bytes per payload page
  std::uint64_t payload_base;  // byte offset of the payload in the owner's store range
  std::uint64_t bytes_total;   // logical object bytes (<= n_pages * page_bytes)
  std::uint32_t state;         // an ObjectState; atomic access only (invariant 3)
  std::uint32_t epoch;         // bumped when the slot is reused
  std::uint64_t last_access;   // steady-clock ns of the last get; a hint
  std::uint32_t flags;         // the ObjectPin the header was written with
  std::uint32_t reserved0;     // zero
  std::uint64_t store_blocks;  // kv_put_object's block count while WRITING: {epoch << 32 | blocks done}; readers ignore it
};

static_assert(sizeof(ObjectHeader) == 64, "ObjectHeader is one 64-byte record");
static_assert(alignof(ObjectHeader) == 64, "ObjectHeader is 64-byte aligned");
static_assert(offsetof(ObjectHeader, key_hash) == 0);
static_assert(offsetof(ObjectHeader, n_pages) == 8);
static_assert(offsetof(ObjectHeader, page_bytes) == 12);
static_assert(offsetof(ObjectHeader, payload_base) == 16);
static_assert(offsetof(ObjectHeader, bytes_total) == 24);
static_assert(offsetof(ObjectHeader, state) == 32);
static_assert(offsetof(ObjectHeader, epoch) == 36);
static_assert(offsetof(ObjectHeader, last_access) == 40);
static_assert(offsetof(ObjectHeader, flags) == 48);

// What a device-side begin (kv_begin_write: {code, epoch seen}) or commit
// (kv_commit_ready: {code, state seen}) reports.
enum class CommitCode : std::uint32_t {
  kCommitted = 0,   // done: WRITING (begin) or READY (commit) at the expected epoch
  kWrongEpoch = 1,  // the slot's epoch is not the plan's (or the one before it): nothing stored
  kWrongState = 2,  // state was not WRITING (READY twice ...)
};

// Byte offset of state, for code that addresses it through a raw pointer.
inline constexpr std::size_t kObjectHeaderStateOffset = offsetof(ObjectHeader, state);
// {state, epoch} as one 64-bit word at kObjectHeaderStateOffset (8-aligned):
// little-endian on every target (x86, NVIDIA and AMD GPUs), state low.
constexpr std::uint64_t StateEpochWord(ObjectState state, std::uint32_t epoch) {
  return (std::uint64_t{epoch} << 32) | static_cast<std::uint32_t>(state);
}
constexpr std::uint32_t EpochOfWord(std::uint64_t word) { return static_cast<std::uint32_t>(word >> 32); }
constexpr std::uint32_t StateOfWord(std::uint64_t word) { return static_cast<std::uint32_t>(word); }
// Whether epoch `a` came after `b` in the same header slot: serial-number
// order, so it holds across the 32-bit wrap (epochs come from one counter
// per device; 2^31 opens is further than any header lags).
constexpr bool EpochIsNewer(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) > 0;
}

}  // namespace nanokv

#endif  // NANOKV_OBJECT_HEADER_H_
