// A producer kernel for the v2 slab's GPU test (slab_producer.cu): every
// thread allocates objects in one slab (nanokv/device/slab.h) and announces
// them into kvd's ring in host memory, while the host reads the ring.
#ifndef NANOKV_TESTS_GPU_SLAB_PRODUCER_H_
#define NANOKV_TESTS_GPU_SLAB_PRODUCER_H_

#include <cstdint>

#include "nanokv/device/slab_publish.h"
#include "nanokv/slab_layout.h"

namespace nanokv::testing {

struct SlabProducerCounts {
  unsigned long long announced;  // allocated and announced
  unsigned long long spent;      // found the slab spent (a void record)
  unsigned long long stalled;    // the ring stayed full past the spin budget
};

// Thread t puts items [t * per_thread, (t + 1) * per_thread): item i's key is
// keys[i * 32 .. + key_bytes[i]), its hash hashes[i], its size bytes[i]. The
// cursor, keys, sizes, hashes and counts are device memory; header and
// records the ring's, mapped for the device. Returns a cudaError_t.
int LaunchSlabProducer(device::SlabCursor* cursor, device::AnnounceRingHeader* header, device::AnnounceRecord* records,
                       const char* keys, const std::uint32_t* key_bytes, const std::uint64_t* hashes,
                       const std::uint64_t* bytes, int per_thread, int blocks, int threads, SlabProducerCounts* counts,
                       void* stream);

// Whole puts by blocks (nanokv/device/slab_publish.h's PutInSlabBlock):
// block b puts items b, b + blocks, ...: item i's bytes[i] bytes from
// src + src_offset[i], keyed as above; the cursor and the slab's payload and
// headers (in `slab`) are device memory, the ring mapped for the device.
// A block spins while the ring is full. Returns a cudaError_t.
int LaunchSlabBlockPuts(device::SlabCursor* cursor, device::AnnounceRingHeader* header, device::AnnounceRecord* records,
                        const device::SlabGeometry& slab, const char* src, const std::uint64_t* src_offset,
                        const char* keys, const std::uint32_t* key_bytes, const std::uint64_t* hashes,
                        const std::uint64_t* bytes, int items, int blocks, SlabProducerCounts* counts, void* stream);

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_GPU_SLAB_PRODUCER_H_
