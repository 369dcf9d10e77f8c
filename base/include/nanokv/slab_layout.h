// The words of a v2 slab (issue 34) that producers' device code, libkv and
// kvd share, once: the producer's cursor, the announce ring's header and
// records. The functions that use them are nanokv/device/slab.h (the
// producer's) and ipc/ring/announce_ring.h (kvd's); docs/ARCHITECTURE.md,
// "Device allocation", says why they are shaped so. Plain C++ with
// fixed-width fields, as nanokv/object_header.h.
#ifndef NANOKV_SLAB_LAYOUT_H_
#define NANOKV_SLAB_LAYOUT_H_

#include <cstddef>
#include <cstdint>

namespace nanokv::device {

inline constexpr std::uint32_t kMaxAnnouncedKeyBytes = 256;  // kMaxObjectKeyBytes

struct SlabCursor {
  std::uint64_t payload_next;   // payload bytes handed out (aligned bump)
  std::uint64_t payload_bytes;  // the slab's payload
  std::uint32_t headers_next;   // header slots handed out
  std::uint32_t header_slots;   // the slab's header slots
  std::uint64_t announce_next;  // ring records reserved, ever
  std::uint32_t ring_records;   // the ring's records (a power of two)
  std::uint32_t payload_align;  // a power of two (256: the kernels' 16-byte stores and more)
  std::uint64_t consumed_seen;  // the ring's `consumed` as last read: a bus read only when the ring looks full
};

enum class AnnounceKind : std::uint32_t {
  kUnwritten = 0,
  kObject = 1,  // an object READY in the slab
  kVoid = 2,    // a record reserved by an allocation that then failed
};

struct alignas(64) AnnounceRecord {
  std::uint64_t stamp;           // the record's position ever + 1; stored last (release)
  std::uint32_t kind;            // an AnnounceKind
  std::uint32_t header_slot;     // within the slab
  std::uint64_t payload_offset;  // within the slab's payload
  std::uint64_t bytes;
  std::uint64_t key_hash;  // xxhash64(key), seed 0 (ObjectHeader::key_hash)
  std::uint32_t epoch;     // the header's
  std::uint32_t key_bytes;
  char key[kMaxAnnouncedKeyBytes];
};
static_assert(sizeof(AnnounceRecord) == 320);

struct alignas(64) AnnounceRingHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t records;               // a power of two
  alignas(64) std::uint64_t consumed;  // records kvd has read, ever (kvd stores, release)
  // Of those, announces kvd dropped because their key was stored already
  // (objects are immutable): the producer's FlushSlabPuts says so.
  std::uint64_t dropped;  // kvd stores, release
};
static_assert(sizeof(AnnounceRingHeader) == 128, "dropped fits the header's padding");
inline constexpr std::uint64_t kAnnounceMagic = 0x314E4E414B564EULL;  // "NVKANN1"
inline constexpr std::uint32_t kAnnounceVersion = 1;

}  // namespace nanokv::device

#endif  // NANOKV_SLAB_LAYOUT_H_
