// The benchmarks' own device buffers and the hardware's copy floors beside
// them: cudaMalloc on cuda (what an engine's tensors are), the host
// backend's mappings otherwise; peer copies, a device memcpy and a copy
// staged through pinned host memory, each waited for and timed.
#ifndef NANOKV_BENCH_BENCH_MEMORY_H_
#define NANOKV_BENCH_BENCH_MEMORY_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/gpu_timer.h"
#include "gpu/backend.h"
#include "gpu/device_buffer.h"

namespace nanokv::bench {

class BenchMemory {
 public:
  explicit BenchMemory(const std::string& backend) : cuda_(backend == "cuda") {
    auto opened = gpu::OpenBackend(backend);
    StatusCheck(opened.status(), ("open backend " + backend).c_str());
    backend_ = std::move(*opened);
    if (cuda_) {
      int n = 0;
      CudaCheck(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
      devices_ = n;
      for (int d = 0; d < n; ++d) {
        CudaCheck(cudaSetDevice(d), "cudaSetDevice");
        for (int p = 0; p < n; ++p) {
          if (p == d) continue;
          cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
          if (e != cudaSuccess) (void)cudaGetLastError();
        }
        cudaStream_t s = nullptr;
        CudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
        streams_.push_back(s);
      }
      CudaCheck(cudaSetDevice(0), "cudaSetDevice");
    } else {
      devices_ = backend_->device_count();
      streams_.assign(static_cast<size_t>(devices_), nullptr);
    }
  }
  int devices() const { return devices_; }
  // The calling thread's current device, as an engine's thread keeps its
  // own GPU's (a decode process's calls start on its device).
  void MakeCurrent(int device) {
    if (cuda_) CudaCheck(cudaSetDevice(device), "cudaSetDevice");
  }
  bool cuda() const { return cuda_; }
  void* stream(int device) const { return streams_[static_cast<size_t>(device)]; }

  std::byte* Alloc(int device, size_t bytes) {
    if (cuda_) {
      void* p = nullptr;
      CudaCheck(cudaSetDevice(device), "cudaSetDevice");
      CudaCheck(cudaMalloc(&p, bytes), "cudaMalloc");
      CudaCheck(cudaSetDevice(0), "cudaSetDevice");
      cuda_buffers_.push_back(p);
      return static_cast<std::byte*>(p);
    }
    auto buffer = gpu::DeviceBuffer::Create(*backend_, device, bytes);
    StatusCheck(buffer.status(), "device buffer");
    auto* at = static_cast<std::byte*>((*buffer)->get());
    host_buffers_.push_back(std::move(*buffer));
    return at;
  }
  void Upload(std::byte* at, const std::vector<std::byte>& data) {
    StatusCheck(backend_->Copy(at, data.data(), data.size(), gpu::CopyKind::kHostToDevice), "upload");
  }
  std::vector<std::byte> Download(const std::byte* at, size_t bytes) {
    std::vector<std::byte> out(bytes);
    StatusCheck(backend_->Copy(out.data(), at, bytes, gpu::CopyKind::kDeviceToHost), "download");
    return out;
  }

  // The floors, each `n` copies of `bytes` from src + i*bytes to dst + i*bytes
  // (or one copy of the whole when n is 1), waited for: microseconds.
  double PeerCopy(std::byte* dst, int dst_device, const std::byte* src, int src_device, size_t n, size_t bytes) {
    const double t = NowMicros();
    if (cuda_) {
      for (size_t i = 0; i < n; ++i) {
        CudaCheck(cudaMemcpyPeerAsync(dst + i * bytes, dst_device, src + i * bytes, src_device, bytes,
                                      static_cast<cudaStream_t>(stream(src_device))),
                  "cudaMemcpyPeerAsync");
      }
      CudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(src_device))), "cudaStreamSynchronize");
    } else {
      for (size_t i = 0; i < n; ++i) {
        StatusCheck(backend_->Copy(dst + i * bytes, src + i * bytes, bytes, gpu::CopyKind::kDeviceToDevice), "copy");
      }
    }
    return NowMicros() - t;
  }
  // GPU -> pinned host -> GPU, the whole batch each way.
  double Staged(std::byte* dst, int dst_device, const std::byte* src, int src_device, size_t total) {
    if (!cuda_) return 0;
    if (pinned_bytes_ < total) {
      if (pinned_ != nullptr) cudaFreeHost(pinned_);
      CudaCheck(cudaHostAlloc(&pinned_, total, cudaHostAllocPortable), "cudaHostAlloc");
      pinned_bytes_ = total;
    }
    const double t = NowMicros();
    CudaCheck(
        cudaMemcpyAsync(pinned_, src, total, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream(src_device))),
        "cudaMemcpyAsync D2H");
    CudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(src_device))), "sync");
    CudaCheck(
        cudaMemcpyAsync(dst, pinned_, total, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream(dst_device))),
        "cudaMemcpyAsync H2D");
    CudaCheck(cudaStreamSynchronize(static_cast<cudaStream_t>(stream(dst_device))), "sync");
    return NowMicros() - t;
  }

  ~BenchMemory() {
    host_buffers_.clear();
    for (void* p : cuda_buffers_) cudaFree(p);
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
  }

 private:
  bool cuda_;
  int devices_ = 0;
  std::unique_ptr<gpu::Backend> backend_;
  std::vector<void*> streams_;
  std::vector<void*> cuda_buffers_;
  std::vector<std::unique_ptr<gpu::DeviceBuffer>> host_buffers_;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
};

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_BENCH_MEMORY_H_
