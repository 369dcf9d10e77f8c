// Paged K/V append (vLLM's reshape_and_cache) for one layer: each new token's
// K and V rows go to (block, slot) of the paged cache. The 16-bit variant is a
// byte copy (fp16 and bf16 alike); the FP8 variant quantizes each (token,
// head) entry with its own scale. Valid CUDA and HIP (gpu_compat.h).
#include <cfloat>
#include <cstdint>

#include "kernels/fp8_e4m3.h"
#include "kernels/gpu_compat.h"
#include "kernels/kv_launch.h"

namespace nanokv::kernels::detail {
namespace {

constexpr int kCopyThreads = 128;
constexpr int kFp8Threads = 256;  // 8 groups of 32 lanes, one entry each

// The cache element offset of (block, head 0, offset in block, d = 0).
__device__ inline std::int64_t SlotBase(const AppendArgs& a, std::int64_t block,
                                        std::int64_t offset) {
  return block * a.block_stride + offset * a.head_dim;
}

// One block per token: every head's K and V row, 16 bytes at a time when the
// launcher found everything aligned (vec16), else 2 bytes at a time.
__global__ void AppendCopy16(AppendArgs a) {
  const std::int64_t t = blockIdx.x;
  const std::int64_t slot = a.slot_mapping[t];
  if (slot < 0) return;  // padding
  const std::int64_t block = slot / a.block_size;
  const std::int64_t offset = slot % a.block_size;
  if (block >= a.num_blocks) {
    if (threadIdx.x == 0 && a.bad_slots != nullptr) atomicAdd(a.bad_slots, 1);
    return;
  }
  const auto* k = static_cast<const std::uint16_t*>(a.key) + t * a.key_token_stride;
  const auto* v = static_cast<const std::uint16_t*>(a.value) + t * a.value_token_stride;
  auto* kc = static_cast<std::uint16_t*>(a.key_cache) + SlotBase(a, block, offset);
  auto* vc = static_cast<std::uint16_t*>(a.value_cache) + SlotBase(a, block, offset);
  if (a.vec16) {
    const int per_head = static_cast<int>(a.head_dim / 8);  // 16-byte chunks in a head row
    const int total = static_cast<int>(a.num_heads) * per_head;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
      const int h = i / per_head;
      const int c = i - h * per_head;
      const uint4 kx = gpu_compat::LoadStreaming(reinterpret_cast<const uint4*>(k + h * a.head_dim) + c);
      const uint4 vx = gpu_compat::LoadStreaming(reinterpret_cast<const uint4*>(v + h * a.head_dim) + c);
      reinterpret_cast<uint4*>(kc + h * a.head_stride)[c] = kx;
      reinterpret_cast<uint4*>(vc + h * a.head_stride)[c] = vx;
    }
  } else {
    const std::int64_t total = a.num_heads * a.head_dim;
    for (std::int64_t i = threadIdx.x; i < total; i += blockDim.x) {
      const std::int64_t h = i / a.head_dim;
      const std::int64_t d = i - h * a.head_dim;
      kc[h * a.head_stride + d] = k[i];
      vc[h * a.head_stride + d] = v[i];
    }
  }
}

__device__ inline float ToFloat(std::uint16_t x, bool bf16) {
  return bf16 ? fp8::Bf16ToFloat(x) : fp8::HalfToFloat(x);
}

// Quantizes one entry (head_dim values) with a group of 32 lanes; every lane
// of the group runs this (the shuffles need all 32).
__device__ inline void QuantizeEntry(const std::uint16_t* src, std::uint8_t* dst, float* scale_out,
                                     std::int64_t head_dim, bool bf16, int lane) {
  float amax = 0.0f;
  for (std::int64_t d = lane; d < head_dim; d += 32) {
    const float x = fabsf(ToFloat(src[d], bf16));
    if (x <= FLT_MAX) amax = fmaxf(amax, x);  // infinities and NaN stay out
  }
  for (int m = 16; m > 0; m >>= 1) amax = fmaxf(amax, gpu_compat::ShflXor32(amax, m));
  const float scale = amax > 0.0f ? amax / fp8::kE4M3Max : 1.0f;
  for (std::int64_t d = lane; d < head_dim; d += 32) {
    dst[d] = fp8::EncodeE4M3(ToFloat(src[d], bf16) / scale);
  }
  if (lane == 0) *scale_out = scale;
}

// One group of 32 lanes per (token, head) entry, K then V.
__global__ void AppendFp8(AppendArgs a) {
  const int lane = threadIdx.x & 31;
  const std::int64_t entry =
      static_cast<std::int64_t>(blockIdx.x) * (kFp8Threads / 32) + (threadIdx.x >> 5);
  if (entry >= a.num_tokens * a.num_heads) return;  // whole groups leave together
  const std::int64_t t = entry / a.num_heads;
  const std::int64_t h = entry - t * a.num_heads;
  const std::int64_t slot = a.slot_mapping[t];
  if (slot < 0) return;
  const std::int64_t block = slot / a.block_size;
  const std::int64_t offset = slot % a.block_size;
  if (block >= a.num_blocks) {
    if (lane == 0 && h == 0 && a.bad_slots != nullptr) atomicAdd(a.bad_slots, 1);
    return;
  }
  const bool bf16 = a.bf16 != 0;
  const std::int64_t cache = SlotBase(a, block, offset) + h * a.head_stride;
  const std::int64_t scale = (block * a.block_stride + h * a.head_stride) / a.head_dim + offset;
  QuantizeEntry(static_cast<const std::uint16_t*>(a.key) + t * a.key_token_stride + h * a.head_dim,
                static_cast<std::uint8_t*>(a.key_cache) + cache, a.key_scale + scale, a.head_dim,
                bf16, lane);
  QuantizeEntry(
      static_cast<const std::uint16_t*>(a.value) + t * a.value_token_stride + h * a.head_dim,
      static_cast<std::uint8_t*>(a.value_cache) + cache, a.value_scale + scale, a.head_dim, bf16,
      lane);
}

}  // namespace

int LaunchAppend16(const AppendArgs& args, void* stream) {
  if (args.num_tokens == 0) return 0;
  AppendCopy16<<<static_cast<unsigned>(args.num_tokens), kCopyThreads, 0,
                 static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

int LaunchAppendFp8(const AppendArgs& args, void* stream) {
  const std::int64_t entries = args.num_tokens * args.num_heads;
  if (entries == 0) return 0;
  const std::int64_t groups = kFp8Threads / 32;
  AppendFp8<<<static_cast<unsigned>((entries + groups - 1) / groups), kFp8Threads, 0,
              static_cast<cudaStream_t>(stream)>>>(args);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nanokv::kernels::detail
