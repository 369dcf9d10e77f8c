// slab_put_bench's producer kernel: block b puts objects b, b + blocks, ...
// of `bytes_each` from src + i * bytes_each with nanokv/device/
// slab_publish.h's PutInSlabBlock (allocation on the device, in a cursor of
// device memory), keyed by the host's keys (32 bytes a key).
#ifndef NANOKV_BENCH_SLAB_PUT_KERNEL_H_
#define NANOKV_BENCH_SLAB_PUT_KERNEL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "nanokv/device/slab_publish.h"

namespace nanokv::bench {

// What the kernel reads, in device memory.
struct SlabKernelArgs {
  device::SlabCursor* cursor = nullptr;
  char* keys = nullptr;
  std::uint32_t* key_bytes = nullptr;
  std::uint64_t* hashes = nullptr;
  unsigned long long* failed = nullptr;  // puts that did not answer kOk

  // Exits the process where a CUDA call fails.
  static SlabKernelArgs Upload(const device::SlabCursor& cursor, const std::vector<char>& keys,
                               const std::vector<std::uint32_t>& key_bytes, const std::vector<std::uint64_t>& hashes);
  long long Failed() const;
  void Free();
};

cudaError_t LaunchBlockPuts(const SlabKernelArgs& args, void* ring_device, const device::SlabGeometry& slab,
                            const char* src, int items, std::uint64_t bytes_each, cudaStream_t stream);

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_SLAB_PUT_KERNEL_H_
