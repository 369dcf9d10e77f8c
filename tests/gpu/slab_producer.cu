#include "tests/gpu/slab_producer.h"

#include <cuda_runtime.h>

#include "nanokv/device/slab.h"
#include "nanokv/device/slab_publish.h"

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

__global__ void SlabBlockPuts(device::SlabCursor* cursor, device::AnnounceRing ring, device::SlabGeometry slab,
                              const char* src, const std::uint64_t* src_offset, const char* keys,
                              const std::uint32_t* key_bytes, const std::uint64_t* hashes, const std::uint64_t* bytes,
                              int items, SlabProducerCounts* counts) {
  for (int i = blockIdx.x; i < items; i += gridDim.x) {
    device::SlabCode code;
    long spins = 0;
    while ((code = device::PutInSlabBlock(cursor, ring, slab, src + src_offset[i], bytes[i], hashes[i], keys + i * 32,
                                          key_bytes[i])) == device::SlabCode::kRingFull) {
      if (++spins > (1L << 22)) break;
      __nanosleep(500);
    }
    if (threadIdx.x != 0) continue;
    if (code == device::SlabCode::kOk)
      atomicAdd(&counts->announced, 1ULL);
    else if (code == device::SlabCode::kRingFull)
      atomicAdd(&counts->stalled, 1ULL);
    else
      atomicAdd(&counts->spent, 1ULL);
  }
}

}  // namespace

int LaunchSlabBlockPuts(device::SlabCursor* cursor, device::AnnounceRingHeader* header, device::AnnounceRecord* records,
                        const device::SlabGeometry& slab, const char* src, const std::uint64_t* src_offset,
                        const char* keys, const std::uint32_t* key_bytes, const std::uint64_t* hashes,
                        const std::uint64_t* bytes, int items, int blocks, SlabProducerCounts* counts, void* stream) {
  SlabBlockPuts<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(cursor, device::AnnounceRing{header, records},
                                                                       slab, src, src_offset, keys, key_bytes, hashes,
                                                                       bytes, items, counts);
  return static_cast<int>(cudaGetLastError());
}

int LaunchSlabProducer(device::SlabCursor* cursor, device::AnnounceRingHeader* header, device::AnnounceRecord* records,
                       const char* keys, const std::uint32_t* key_bytes, const std::uint64_t* hashes,
                       const std::uint64_t* bytes, int per_thread, int blocks, int threads, SlabProducerCounts* counts,
                       void* stream) {
  SlabProducer<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      cursor, device::AnnounceRing{header, records}, keys, key_bytes, hashes, bytes, per_thread, counts);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nanokv::testing
