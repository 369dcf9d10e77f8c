// libFuzzer target: bytes -> a v2 slab's announce ring as a hostile
// producer leaves it, then kvd's side of it (ipc/ring/announce_ring.h):
// Poll until nothing is read or the ring is poisoned. Input: the slab's
// payload bytes and header slots (8 + 4 bytes), then the records (320 bytes
// each, a ring of 8). Any input must give objects inside the slab, none
// overlapping, with a key of the store's bytes and its hash, or a
// kProtocolError; never a read outside the ring (ASan).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include <unistd.h>

#include "ipc/ring/announce_ring.h"
#include "nanokv/object_header.h"

namespace {

constexpr uint32_t kRecords = 8;

template <typename T>
T Take(const uint8_t*& data, size_t& size) {
  T value{};
  const size_t n = size < sizeof(T) ? size : sizeof(T);
  std::memcpy(&value, data, n);
  data += n;
  size -= n;
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nanokv::ipc::SlabBounds bounds;
  bounds.payload_bytes = Take<uint64_t>(data, size);
  bounds.header_slots = Take<uint32_t>(data, size) % 4096;  // kvd grants bounded slabs
  int fd = -1;
  auto ring = nanokv::ipc::AnnounceRing::Create(kRecords, bounds, &fd);
  if (!ring.ok()) std::abort();
  close(fd);
  const size_t room = size_t{kRecords} * sizeof(nanokv::device::AnnounceRecord);
  std::memcpy(ring->records(), data, size < room ? size : room);
  std::map<uint64_t, uint64_t> seen;
  for (int round = 0; round < 4; ++round) {
    auto got = ring->Poll(3);
    if (!got.ok()) break;
    for (const auto& o : *got) {
      if (o.header_slot >= bounds.header_slots || o.bytes == 0 || o.payload_offset > bounds.payload_bytes ||
          o.bytes > bounds.payload_bytes - o.payload_offset || o.key.empty() ||
          o.key.size() > nanokv::device::kMaxAnnouncedKeyBytes) {
        std::abort();
      }
      for (char c : o.key) {
        if (!nanokv::IsObjectKeyByte(c)) std::abort();
      }
      auto after = seen.upper_bound(o.payload_offset);
      if (after != seen.begin() && std::prev(after)->second > o.payload_offset) std::abort();
      if (after != seen.end() && after->first < o.payload_offset + o.bytes) std::abort();
      seen[o.payload_offset] = o.payload_offset + o.bytes;
    }
  }
  return 0;
}
