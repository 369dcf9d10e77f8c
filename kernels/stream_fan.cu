// Streams a batch's launches fan out over (kv_launch.h: ForkStreams,
// JoinStreams). A put kernel's begin and publish are atomics on the owner's
// header, which a peer GPU answers across NVLink: on one stream every
// object waits out its predecessor's, and 128 puts of 8 MiB from one H200
// into another moved 242-258 GB/s where cudaMemcpyPeer moved 372; on eight
// streams they moved 347-357 (docs/BENCHMARKS.md, 2026-11-28). Valid CUDA
// and HIP.
#include <mutex>

#include "kernels/gpu_compat.h"
#include "kernels/kv_launch.h"

namespace nanokv::kernels::detail {
namespace {

constexpr int kDevices = 64;

// A device's streams, made on first use and kept for the process's life:
// non-blocking, so the legacy default stream orders nothing around them.
struct DeviceStreams {
  std::mutex mu;
  cudaStream_t streams[kMaxFanStreams] = {};
  int made = 0;
};

DeviceStreams& StreamsOf(int device) {
  static DeviceStreams all[kDevices];
  return all[device];
}

// Records an event on `from`, makes `to` wait for it, and lets the event go
// (the wait holds what it needs).
int Order(cudaStream_t from, cudaStream_t to) {
  cudaEvent_t event = nullptr;
  cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (error != cudaSuccess) return static_cast<int>(error);
  error = cudaEventRecord(event, from);
  if (error == cudaSuccess) error = cudaStreamWaitEvent(to, event, 0);
  const cudaError_t destroyed = cudaEventDestroy(event);
  return static_cast<int>(error != cudaSuccess ? error : destroyed);
}

}  // namespace

int ForkStreams(void* stream, int ways, void** forked) {
  int device = -1;
  int error = StreamDevice(stream, &device);
  if (error == 0 && device < 0) error = GetDevice(&device);  // HIP: the caller made it current
  if (error != 0) return error;
  if (device < 0 || device >= kDevices || ways < 1 || ways > kMaxFanStreams) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  DeviceStreams& pool = StreamsOf(device);
  {
    std::lock_guard lock(pool.mu);
    if (pool.made < ways) {
      int current = -1;
      if ((error = GetDevice(&current)) != 0) return error;
      if (current != device && (error = SetDevice(device)) != 0) return error;
      for (; pool.made < ways && error == 0; ++pool.made) {
        error = static_cast<int>(cudaStreamCreateWithFlags(&pool.streams[pool.made], cudaStreamNonBlocking));
        if (error != 0) break;
      }
      if (current != device) {
        const int restored = SetDevice(current);
        if (error == 0) error = restored;
      }
      if (error != 0) return error;
    }
    for (int i = 0; i < ways; ++i) forked[i] = pool.streams[i];
  }
  // Each forked stream starts after all the caller's work so far. Another
  // thread's fork may interleave its own waits on the same streams: it only
  // orders its work after ours, never ours before the caller's.
  const auto from = static_cast<cudaStream_t>(stream);
  for (int i = 0; i < ways; ++i) {
    if ((error = Order(from, static_cast<cudaStream_t>(forked[i]))) != 0) return error;
  }
  return 0;
}

int JoinStreams(void* stream, void* const* forked, int ways) {
  int first_error = 0;
  for (int i = 0; i < ways; ++i) {
    const int error = Order(static_cast<cudaStream_t>(forked[i]), static_cast<cudaStream_t>(stream));
    if (first_error == 0) first_error = error;
  }
  return first_error;
}

}  // namespace nanokv::kernels::detail
