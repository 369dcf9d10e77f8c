// The public device API (libkv/include/nanokv/device/) compiled as the
// kernels are, CUDA and HIP (the CI's HIP stage), so a producer's kernel
// that includes it builds with either compiler. Nothing launches it.
#include "nanokv/device/slab.h"
#include "nanokv/device/slab_publish.h"

namespace nanokv::kernels::detail {

__global__ void DeviceApiCheck(device::SlabCursor* cursor, device::AnnounceRing ring, device::SlabGeometry slab,
                               const char* src, std::uint64_t bytes, std::uint64_t key_hash, const char* key,
                               std::uint32_t key_bytes, device::SlabCode* out) {
  const device::SlabCode code = device::PutInSlabBlock(cursor, ring, slab, src, bytes, key_hash, key, key_bytes);
  if (threadIdx.x == 0) *out = code;
}

}  // namespace nanokv::kernels::detail
