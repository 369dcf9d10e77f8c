// The copy every object kernel makes (kv_objects.cu, slab_puts.cu): a
// span of bytes by the threads of a grid's row, 16-byte vectors where
// source and destination agree mod 16. Valid CUDA and HIP.
#ifndef NANOKV_KERNELS_COPY_BYTES_CUH_
#define NANOKV_KERNELS_COPY_BYTES_CUH_

#include <cstdint>

#include "kernels/gpu_compat.h"

namespace nanokv::kernels::detail {

constexpr int kCopyThreads = 256;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

// Copies `bytes` from src to dst with the threads of blocks [0, nblocks) of
// this segment's row of the grid. 16-byte accesses when src and dst agree
// mod 16 (a byte head and tail around them), bytes otherwise.
__device__ inline void CopyBytes(char* dst, const char* src, std::uint64_t bytes, std::uint64_t tid,
                                 std::uint64_t nthreads) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  if (((d ^ s) & 15u) != 0) {
    for (std::uint64_t i = tid; i < bytes; i += nthreads) dst[i] = src[i];
    return;
  }
  std::uint64_t head = (16u - (d & 15u)) & 15u;
  if (head > bytes) head = bytes;
  if (tid < head) dst[tid] = src[tid];
  const std::uint64_t n16 = (bytes - head) / 16;
  const auto* s4 = reinterpret_cast<const uint4*>(src + head);
  auto* d4 = reinterpret_cast<uint4*>(dst + head);
  std::uint64_t i = tid;
  for (; i + (kUnroll - 1) * nthreads < n16; i += kUnroll * nthreads) {
    uint4 x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = gpu_compat::LoadStreaming(s4 + i + u * nthreads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) d4[i + u * nthreads] = x[u];
  }
  for (; i < n16; i += nthreads) d4[i] = gpu_compat::LoadStreaming(s4 + i);
  const std::uint64_t done = head + n16 * 16;
  if (tid < bytes - done) dst[done + tid] = src[done + tid];
}

}  // namespace nanokv::kernels::detail

#endif  // NANOKV_KERNELS_COPY_BYTES_CUH_
