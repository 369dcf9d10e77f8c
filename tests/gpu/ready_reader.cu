// The reader side of the READY stress: the pattern a consumer kernel follows
// (nanokv/object_header.h): one thread acquires READY, the block syncs, then all read.
#include <cstdint>

#include "kernels/object_state.cuh"
#include "tests/gpu/pattern.h"
#include "tests/gpu/ready_reader.h"

namespace nanokv::testing {
namespace {

// One deadline for the whole kernel (not per object), so a writer that never
// commits costs 20 s, not 20 s per object.
constexpr std::uint64_t kDeadlineNs = 20'000'000'000ull;

__device__ inline std::uint64_t GlobalTimerNs() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void ReadyReader(const ObjectHeader* headers, const char* const* seg_ptr,
                            const std::uint64_t* seg_bytes, const int* first_seg, int n_objects,
                            std::uint64_t seed_base, ReaderCounts* counts) {
  __shared__ int ready;
  __shared__ std::uint64_t deadline;
  if (threadIdx.x == 0) deadline = GlobalTimerNs() + kDeadlineNs;
  for (int o = blockIdx.x; o < n_objects; o += gridDim.x) {
    if (threadIdx.x == 0) {
      std::uint32_t s;
      while ((s = kernels::LoadStateAcquire(&headers[o])) !=
             static_cast<std::uint32_t>(ObjectState::kReady)) {
        if (GlobalTimerNs() > deadline) break;
        __nanosleep(64);
      }
      ready = s == static_cast<std::uint32_t>(ObjectState::kReady);
      if (!ready) atomicAdd(&counts->timeouts, 1ull);
    }
    __syncthreads();
    if (ready) {
      unsigned long long bad = 0;
      std::uint64_t logical = 0;
      for (int g = first_seg[o]; g < first_seg[o + 1]; ++g) {
        const char* p = seg_ptr[g];
        for (std::uint64_t i = threadIdx.x; i < seg_bytes[g]; i += blockDim.x) {
          bad += static_cast<std::uint8_t>(p[i]) != PatternByte(seed_base + o, logical + i);
        }
        logical += seg_bytes[g];
      }
      if (bad) atomicAdd(&counts->violations, bad);
      if (threadIdx.x == 0) atomicAdd(&counts->objects_seen, 1ull);
    }
    __syncthreads();  // `ready` is rewritten for the next object
  }
}

__global__ void SlabReader(const ObjectHeader* headers, const char* payload, std::uint64_t store_offset,
                           std::uint32_t first_epoch, int slots, const std::uint64_t* hashes,
                           const std::uint64_t* sizes, int items, std::uint64_t seed_base, ReaderCounts* counts) {
  __shared__ int ready;
  __shared__ int item;
  __shared__ std::uint64_t deadline;
  if (threadIdx.x == 0) deadline = GlobalTimerNs() + kDeadlineNs;
  for (int s = blockIdx.x; s < slots; s += gridDim.x) {
    const ObjectHeader* h = &headers[s];
    if (threadIdx.x == 0) {
      // READY at this round's epoch, as one {state, epoch} word: an older
      // round's READY is not this one, and a state and an epoch read apart
      // may be two writes' (the old READY, the new WRITING's epoch).
      bool seen = false;
      std::uint64_t word = 0;
      while (!(seen = kernels::DeviceStateOfWord(word = kernels::LoadStateEpochAcquire(h)) ==
                          static_cast<std::uint32_t>(ObjectState::kReady) &&
                      kernels::DeviceEpochOfWord(word) == first_epoch + s)) {
        if (GlobalTimerNs() > deadline) break;
        __nanosleep(64);
      }
      ready = seen;
      item = -1;
      if (!seen) atomicAdd(&counts->timeouts, 1ull);
    }
    __syncthreads();
    if (ready) {
      const std::uint64_t hash = h->key_hash;
      for (int i = threadIdx.x; i < items; i += blockDim.x) {
        if (hashes[i] == hash) item = i;
      }
    }
    __syncthreads();
    if (ready && item < 0) {
      if (threadIdx.x == 0) atomicAdd(&counts->violations, 1ull);  // a hash no item has
    } else if (ready) {
      const std::uint64_t bytes = h->bytes_total;
      const char* p = payload + (h->payload_base - store_offset);
      unsigned long long bad = bytes != sizes[item] ? 1 : 0;
      for (std::uint64_t b = threadIdx.x; bad == 0 && b < bytes; b += blockDim.x) {
        bad += static_cast<std::uint8_t>(p[b]) != PatternByte(seed_base + item, b);
      }
      if (bad) atomicAdd(&counts->violations, bad);
      if (threadIdx.x == 0) atomicAdd(&counts->objects_seen, 1ull);
    }
    __syncthreads();  // `ready` and `item` are rewritten for the next slot
  }
}

}  // namespace

int LaunchSlabReader(const ObjectHeader* headers, const char* payload, std::uint64_t store_offset,
                     std::uint32_t first_epoch, int slots, const std::uint64_t* hashes, const std::uint64_t* sizes,
                     int items, std::uint64_t seed_base, ReaderCounts* counts, int blocks, void* stream) {
  SlabReader<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(headers, payload, store_offset, first_epoch, slots,
                                                                    hashes, sizes, items, seed_base, counts);
  return static_cast<int>(cudaGetLastError());
}

int LaunchReadyReader(const ObjectHeader* headers, const char* const* seg_ptr,
                      const std::uint64_t* seg_bytes, const int* first_seg, int n_objects,
                      std::uint64_t seed_base, ReaderCounts* counts, int blocks, void* stream) {
  ReadyReader<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      headers, seg_ptr, seg_bytes, first_seg, n_objects, seed_base, counts);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nanokv::testing
