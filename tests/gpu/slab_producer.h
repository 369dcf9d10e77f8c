// A producer kernel for the v2 slab's GPU test (slab_producer.cu): every
// thread allocates objects in one slab (nanokv/device/slab.h) and announces
// them into kvd's ring in host memory, while the host reads the ring.
#ifndef NANOKV_TESTS_GPU_SLAB_PRODUCER_H_
#define NANOKV_TESTS_GPU_SLAB_PRODUCER_H_

#include <cstdint>

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

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_GPU_SLAB_PRODUCER_H_
