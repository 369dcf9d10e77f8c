// A reader kernel for the READY stress (ready_reader.cu): spins on each
// object's state with acquire, then checks every payload byte.
#ifndef NANOKV_TESTS_GPU_READY_READER_H_
#define NANOKV_TESTS_GPU_READY_READER_H_

#include <cstdint>

#include "nanokv/object_header.h"

namespace nanokv::testing {

struct ReaderCounts {
  unsigned long long objects_seen;  // READY seen, payload checked
  unsigned long long violations;    // bytes wrong after READY was seen
  unsigned long long timeouts;      // READY not seen within the spin budget
};

// Objects o = 0..n-1: header headers[o], payload pieces seg_ptr/seg_bytes in
// [first_seg[o], first_seg[o + 1]) holding PatternByte(seed_base + o, i) for
// the object's byte i. All arrays are device memory. Returns a cudaError_t.
int LaunchReadyReader(const ObjectHeader* headers, const char* const* seg_ptr,
                      const std::uint64_t* seg_bytes, const int* first_seg, int n_objects,
                      std::uint64_t seed_base, ReaderCounts* counts, int blocks, void* stream);

// The same for v2 slab puts, whose places the producer's kernel chose:
// slot s (0..slots-1) of `headers` is awaited READY at first_epoch + s,
// its object found by key hash among hashes[0..items), and its bytes_total
// and payload (at payload + payload_base - store_offset) checked against
// sizes[i] and PatternByte(seed_base + i, byte). Device memory but for the
// scalars. Returns a cudaError_t.
int LaunchSlabReader(const ObjectHeader* headers, const char* payload, std::uint64_t store_offset,
                     std::uint32_t first_epoch, int slots, const std::uint64_t* hashes, const std::uint64_t* sizes,
                     int items, std::uint64_t seed_base, ReaderCounts* counts, int blocks, void* stream);

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_GPU_READY_READER_H_
