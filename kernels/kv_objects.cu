// The object store's device side: a contiguous buffer to and from a list of
// page segments (kv_store_pages, kv_load_pages), the READY publish
// (kv_commit_ready) and an acquire read of the state. Valid CUDA and HIP.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/gpu_compat.h"
#if !defined(NANOKV_HIP)
#include <cuda.h>  // types of cuMemGetAccess, reached through the runtime (no libcuda link)
#endif
#include "kernels/copy_bytes.cuh"
#include "kernels/kv_launch.h"
#include "kernels/object_state.cuh"
#include "nanokv/object_header.h"

namespace nanokv::kernels::detail {
namespace {

// What the kernel gets: N segments by value. Launches of up to 8 segments
// (objects up to 16 MiB in 2 MiB pages) pass the small one: 200 bytes of
// parameters instead of 3 KiB, which is launch latency for small objects.
template <int N>
struct Segments {
  void* ptr[N];
  std::uint64_t bytes[N];
  std::uint64_t offset[N];
  int n;
};
constexpr int kSmallBatch = 8;

// Row y of the grid copies segment y.
template <int N>
__global__ void CopySegments(char* contiguous, Segments<N> batch, bool store) {
  const int seg = blockIdx.y;
  if (seg >= batch.n) return;
  char* page = static_cast<char*>(batch.ptr[seg]);
  char* linear = contiguous + batch.offset[seg];
  const std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t nthreads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  if (store) {
    CopyBytes(page, linear, batch.bytes[seg], tid, nthreads);
  } else {
    CopyBytes(linear, page, batch.bytes[seg], tid, nthreads);
  }
}

template <int N>
void Fill(Segments<N>& segs, const SegmentBatch& batch) {
  for (int i = 0; i < batch.n; ++i) {
    segs.ptr[i] = batch.ptr[i];
    segs.bytes[i] = batch.bytes[i];
    segs.offset[i] = batch.offset[i];
  }
  segs.n = batch.n;
}

template <int N>
int Launch(char* contiguous, const SegmentBatch& batch, bool store, dim3 grid, cudaStream_t stream) {
  Segments<N> segs;
  Fill(segs, batch);
  CopySegments<N><<<grid, kCopyThreads, 0, stream>>>(contiguous, segs, store);
  return static_cast<int>(cudaGetLastError());
}

// Row y of the grid copies pair y: several objects' loads in one launch
// (a batch get), where a launch each cost more host time than a small
// object's copy takes the GPU.
__global__ void CopyPairs(PairBatch batch) {
  const int row = blockIdx.y;
  if (row >= batch.n) return;
  const std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t nthreads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  CopyBytes(static_cast<char*>(batch.dst[row]), static_cast<const char*>(batch.src[row]), batch.bytes[row], tid,
            nthreads);
}

// kv_put_object in one launch: each block first makes sure the slot is
// this write's ({WRITING, epoch}: the first block's CAS begins it, the
// others find it begun), so a writer stalled past write_timeout stores
// nothing once the slot is given on; block (0, 0) writes the header's other
// fields; every block stores its share and counts itself, and the block
// that completes the count publishes READY. One launch where begin, store
// and commit took three: a launch and its gap cost about 5 µs on an H200,
// half a 1 MiB copy (BENCHMARKS.md). A v2 slab's put (stamp not nullptr)
// then stamps its announce record, after READY, from the same thread: kvd,
// which acquires the stamp, finds the object READY.
template <int N>
__global__ void PutObjectKernel(const char* contiguous, Segments<N> batch, ObjectHeader* header, ObjectHeader writing,
                                std::uint32_t* result, std::uint64_t* stamp, std::uint64_t stamp_value) {
  __shared__ std::uint32_t ours;
  if (threadIdx.x == 0) {
    std::uint32_t epoch_seen = 0;
    const std::uint32_t code = JoinWriteDevice(header, writing.epoch, &epoch_seen);
    ours = code == static_cast<std::uint32_t>(CommitCode::kCommitted);
    if (ours != 0 && blockIdx.x == 0 && blockIdx.y == 0) WriteHeaderFieldsDevice(header, writing);
  }
  __syncthreads();
  const int seg = blockIdx.y;
  if (ours != 0 && seg < batch.n) {
    const std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::uint64_t nthreads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    CopyBytes(static_cast<char*>(batch.ptr[seg]), contiguous + batch.offset[seg], batch.bytes[seg], tid, nthreads);
  }
  __syncthreads();  // the block's stores, seen by thread 0: its count's release carries them
  if (threadIdx.x != 0) return;
  if (ours == 0) {
    if (result != nullptr) {
      const std::uint64_t seen = LoadStateEpochAcquire(header);
      result[0] = static_cast<std::uint32_t>(DeviceEpochOfWord(seen) != writing.epoch ? CommitCode::kWrongEpoch
                                                                                       : CommitCode::kWrongState);
      result[1] = DeviceStateOfWord(seen);
    }
    return;
  }
  if (!CountStoreBlockDevice(header, writing.epoch, gridDim.x * gridDim.y)) return;
  std::uint32_t seen = 0;
  const std::uint32_t code = PublishReadyDevice(header, writing.epoch, &seen);
  if (stamp != nullptr && code == static_cast<std::uint32_t>(CommitCode::kCommitted)) {
    gpu_compat::StoreReleaseSystem(stamp, stamp_value);
  }
  if (result != nullptr) {
    result[0] = code;
    result[1] = seen;
  }
}

__global__ void BeginWriteKernel(ObjectHeader* header, ObjectHeader writing, std::uint32_t* result) {
  std::uint32_t seen = 0;
  const std::uint32_t code = BeginWriteDevice(header, writing, &seen);
  if (result != nullptr) {
    result[0] = code;
    result[1] = seen;
  }
}

__global__ void CommitReadyKernel(ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result) {
  std::uint32_t seen = 0;
  const std::uint32_t code = CommitReadyDevice(header, epoch, &seen);
  if (result != nullptr) {
    result[0] = code;
    result[1] = seen;
  }
}

__global__ void ReadStateKernel(const ObjectHeader* header, std::uint32_t* state_out) {
  *state_out = LoadStateAcquire(header);
}

}  // namespace

int LaunchCopyPairs(const PairBatch& batch, void* stream) {
  if (batch.n == 0 || batch.max_bytes == 0) return 0;
  std::uint64_t blocks = (batch.max_bytes + kCopyThreads * 16 * kUnroll - 1) / (kCopyThreads * 16 * kUnroll);
  // Rows stride over their share of the grid: about 4096 blocks in all
  // keep every SM busy without a grid of a block per 16 KiB of a batch.
  const std::uint64_t per_row = std::max<std::uint64_t>(1, 4096 / static_cast<std::uint64_t>(batch.n));
  blocks = std::max<std::uint64_t>(1, std::min(blocks, per_row));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(batch.n));
  CopyPairs<<<grid, kCopyThreads, 0, static_cast<cudaStream_t>(stream)>>>(batch);
  return static_cast<int>(cudaGetLastError());
}

int LaunchCopySegments(void* contiguous, const SegmentBatch& batch, bool store, void* stream) {
  if (batch.n == 0 || batch.max_bytes == 0) return 0;
  // Small objects: one 16-byte vector per thread, so they still spread over
  // every SM; large ones: kUnroll per thread, fewer blocks.
  const std::uint64_t per_thread = batch.total_bytes < (8ull << 20) ? 16 : 16 * kUnroll;
  std::uint64_t blocks = (batch.max_bytes + kCopyThreads * per_thread - 1) / (kCopyThreads * per_thread);
  if (blocks > 4096) blocks = 4096;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(batch.n));
  auto* linear = static_cast<char*>(contiguous);
  auto* s = static_cast<cudaStream_t>(stream);
  if (batch.n <= kSmallBatch) return Launch<kSmallBatch>(linear, batch, store, grid, s);
  return Launch<kSegmentsPerLaunch>(linear, batch, store, grid, s);
}

namespace {

// How many blocks a kv_put_object launch takes at most on the current
// device: two per SM (fewer if fewer fit), asked once per device; 0 when the
// runtime cannot say. Every block pays its begin check and one add to the
// count the last block waits for, so blocks past what moves the bytes cost
// a put time: on an H200 two per SM copy as fast as the full grid and a put
// of 4 / 16 / 64 MiB takes 12.8 / 15.8 / 45.7 µs where 1024-4096 blocks took
// 13.8 / 16.6 / 48.4 (BENCHMARKS.md, 2026-11-26 fourth session).
template <int N>
std::uint64_t PutBlocksCap() {
  constexpr int kDevices = 64;
  constexpr int kBlocksPerSm = 2;
  static std::atomic<std::uint64_t> known[kDevices] = {};
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    (void)cudaGetLastError();
    return 0;
  }
  std::uint64_t cap = known[device].load(std::memory_order_relaxed);
  if (cap != 0) return cap;
  int per_sm = 0, sms = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, PutObjectKernel<N>, kCopyThreads, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || per_sm <= 0 || sms <= 0) {
    (void)cudaGetLastError();  // not sticky; the launch reports what matters
    return 0;
  }
  cap = static_cast<std::uint64_t>(std::min(per_sm, kBlocksPerSm)) * static_cast<std::uint64_t>(sms);
  known[device].store(cap, std::memory_order_relaxed);
  return cap;
}

// The copy strides over the grid, so any cap keeps every byte covered.
template <int N>
int LaunchPut(const char* linear, const SegmentBatch& batch, ObjectHeader* header, const ObjectHeader& writing,
              std::uint32_t* result, std::uint64_t* stamp, std::uint64_t stamp_value, cudaStream_t stream) {
  const std::uint64_t per_thread = batch.total_bytes < (8ull << 20) ? 16 : 16 * kUnroll;
  std::uint64_t blocks = (batch.max_bytes + kCopyThreads * per_thread - 1) / (kCopyThreads * per_thread);
  if (blocks == 0) blocks = 1;  // an empty object still publishes
  if (blocks > 4096) blocks = 4096;
  const std::uint64_t rows = batch.n > 0 ? static_cast<std::uint64_t>(batch.n) : 1;
  if (const std::uint64_t cap = PutBlocksCap<N>(); cap != 0) {
    blocks = std::min(blocks, std::max<std::uint64_t>(1, cap / rows));
  }
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(rows));
  Segments<N> segs;
  Fill(segs, batch);
  PutObjectKernel<N><<<grid, kCopyThreads, 0, stream>>>(linear, segs, header, writing, result, stamp, stamp_value);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int LaunchPutObject(const void* contiguous, const SegmentBatch& batch, ObjectHeader* header,
                    const ObjectHeader& writing, std::uint32_t* result, std::uint64_t* stamp, std::uint64_t stamp_value,
                    void* stream) {
  auto* s = static_cast<cudaStream_t>(stream);
  const auto* linear = static_cast<const char*>(contiguous);
  if (batch.n <= kSmallBatch) {
    return LaunchPut<kSmallBatch>(linear, batch, header, writing, result, stamp, stamp_value, s);
  }
  return LaunchPut<kSegmentsPerLaunch>(linear, batch, header, writing, result, stamp, stamp_value, s);
}

int RegisterHostMapped(void* host, std::size_t bytes, void** device) {
  cudaError_t e = cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e != cudaSuccess) return static_cast<int>(e);
  e = cudaHostGetDevicePointer(device, host, 0);
  if (e != cudaSuccess) (void)cudaHostUnregister(host);
  return static_cast<int>(e);
}

int UnregisterHost(void* host) { return static_cast<int>(cudaHostUnregister(host)); }

int LaunchBeginWrite(ObjectHeader* header, const ObjectHeader& writing, std::uint32_t* result, void* stream) {
  BeginWriteKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(header, writing, result);
  return static_cast<int>(cudaGetLastError());
}

int LaunchCommitReady(ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result,
                      void* stream) {
  CommitReadyKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(header, epoch, result);
  return static_cast<int>(cudaGetLastError());
}

int LaunchReadState(const ObjectHeader* header, std::uint32_t* state_out, void* stream) {
  ReadStateKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(header, state_out);
  return static_cast<int>(cudaGetLastError());
}

int StreamSynchronize(void* stream) {
  return static_cast<int>(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

int RecordEvent(void* stream, void** event) {
  cudaEvent_t made = nullptr;
  // Blocking sync: a thread that waits on it sleeps rather than spins (the
  // commit thread of an asynchronous put waits out whole transfers).
  cudaError_t error = cudaEventCreateWithFlags(&made, cudaEventBlockingSync | cudaEventDisableTiming);
  if (error != cudaSuccess) return static_cast<int>(error);
  error = cudaEventRecord(made, static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) {
    (void)cudaEventDestroy(made);
    return static_cast<int>(error);
  }
  *event = made;
  return 0;
}

int EventSynchronize(void* event) {
  return static_cast<int>(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

int DestroyEvent(void* event) { return static_cast<int>(cudaEventDestroy(static_cast<cudaEvent_t>(event))); }

int GetDevice(int* device) { return static_cast<int>(cudaGetDevice(device)); }
int SetDevice(int device) { return static_cast<int>(cudaSetDevice(device)); }

int StreamDevice(void* stream, int* device) {
#if defined(NANOKV_HIP)
  (void)stream;
  *device = -1;
  return 0;
#else
  return static_cast<int>(cudaStreamGetDevice(static_cast<cudaStream_t>(stream), device));
#endif
}

int PointerDevice(const void* pointer, int* device) {
  *device = -1;
#if defined(NANOKV_HIP)
  (void)pointer;
  return 0;
#else
  cudaPointerAttributes attributes{};
  cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
  if (error != cudaSuccess) return static_cast<int>(error);
  if (attributes.type == cudaMemoryTypeDevice) *device = attributes.device;
  return 0;
#endif
}

int MappedAccess(const void* pointer, int device, int* access) {
  *access = -1;
#if defined(NANOKV_HIP)
  (void)pointer;
  (void)device;
  return 0;
#else
  using GetAccess = CUresult (*)(unsigned long long*, const CUmemLocation*, CUdeviceptr);
  static GetAccess get_access = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    cudaError_t error = cudaGetDriverEntryPointByVersion("cuMemGetAccess", &fn, 10020, cudaEnableDefault, &found);
#else
    cudaError_t error = cudaGetDriverEntryPoint("cuMemGetAccess", &fn, cudaEnableDefault, &found);
#endif
    if (error != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<GetAccess>(nullptr);
    }
    return reinterpret_cast<GetAccess>(fn);
  }();
  if (get_access == nullptr) return 0;  // an old driver: unknown, peer access decides
  CUmemLocation location{};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = device;
  unsigned long long flags = 0;
  // An address no cuMemMap covers (cudaMalloc memory) is an error: not a
  // VMM mapping, *access stays -1.
  if (get_access(&flags, &location, reinterpret_cast<CUdeviceptr>(pointer)) != CUDA_SUCCESS) return 0;
  *access = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? 3 : flags == CU_MEM_ACCESS_FLAGS_PROT_READ ? 1 : 0;
  return 0;
#endif
}

int EnablePeerAccess(int peer) {
  cudaError_t error = cudaDeviceEnablePeerAccess(peer, 0);
  if (error == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not sticky, but clear it: the next launch checks it
    return 0;
  }
  return static_cast<int>(error);
}

int KernelImageFits(int* fits) {
  cudaFuncAttributes attributes{};
  const cudaError_t error = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&CopySegments<kSmallBatch>));
  *fits = error == cudaSuccess ? 1 : 0;
  if (error == cudaSuccess) return 0;
  (void)cudaGetLastError();
  // No image for this architecture: not a failure of the call, an answer.
  if (error == cudaErrorNoKernelImageForDevice || error == cudaErrorInvalidDeviceFunction) return 0;
  return static_cast<int>(error);
}

const char* ErrorName(int code) { return cudaGetErrorName(static_cast<cudaError_t>(code)); }

}  // namespace nanokv::kernels::detail
