#include "tests/gpu/slab_producer.h"

#include <cuda_runtime.h>

#include "nanokv/device/slab.h"

namespace nanokv::testing {
namespace {

__global__ void SlabProducer(device::SlabCursor* cursor, device::AnnounceRing ring, const char* keys,
                             const std::uint32_t* key_bytes, const std::uint64_t* hashes, const std::uint64_t* bytes,
                             int per_thread, SlabProducerCounts* counts) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int n = 0; n < per_thread; ++n) {
    const int i = t * per_thread + n;
    device::SlabAllocation at{};
    device::SlabCode code;
    long spins = 0;
    while ((code = device::AllocateInSlab(cursor, ring, bytes[i], &at)) == device::SlabCode::kRingFull) {
      if (++spins > (1L << 24)) {
        atomicAdd(&counts->stalled, 1ULL);
        return;
      }
      __nanosleep(200);
    }
    if (code == device::SlabCode::kSlabFull) {
      atomicAdd(&counts->spent, 1ULL);
      return;
    }
    if (code != device::SlabCode::kOk) return;
    device::Announce(ring, *cursor, at, bytes[i], hashes[i], 1, keys + i * 32, key_bytes[i]);
    atomicAdd(&counts->announced, 1ULL);
  }
}

}  // namespace

int LaunchSlabProducer(device::SlabCursor* cursor, device::AnnounceRingHeader* header, device::AnnounceRecord* records,
                       const char* keys, const std::uint32_t* key_bytes, const std::uint64_t* hashes,
                       const std::uint64_t* bytes, int per_thread, int blocks, int threads, SlabProducerCounts* counts,
                       void* stream) {
  SlabProducer<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      cursor, device::AnnounceRing{header, records}, keys, key_bytes, hashes, bytes, per_thread, counts);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nanokv::testing
