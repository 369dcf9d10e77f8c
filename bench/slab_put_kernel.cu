#include "bench/slab_put_kernel.h"

#include <cstdio>
#include <cstdlib>

namespace nanokv::bench {
namespace {

void CudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "slab_put_bench: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

__global__ void BlockPuts(SlabKernelArgs args, device::AnnounceRing ring, device::SlabGeometry slab, const char* src,
                          int items, std::uint64_t bytes_each) {
  for (int i = blockIdx.x; i < items; i += gridDim.x) {
    device::SlabCode code;
    while ((code = device::PutInSlabBlock(args.cursor, ring, slab, src + i * bytes_each, bytes_each, args.hashes[i],
                                          args.keys + i * 32, args.key_bytes[i])) == device::SlabCode::kRingFull) {
      __nanosleep(1000);  // kvd reads the ring every loop turn
    }
    if (code != device::SlabCode::kOk && threadIdx.x == 0) atomicAdd(args.failed, 1ULL);
  }
}

template <typename T>
T* Upload(const T* host, size_t count) {
  T* device = nullptr;
  CudaCheck(cudaMalloc(&device, count * sizeof(T)), "cudaMalloc");
  CudaCheck(cudaMemcpy(device, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

}  // namespace

SlabKernelArgs SlabKernelArgs::Upload(const device::SlabCursor& cursor, const std::vector<char>& keys,
                                      const std::vector<std::uint32_t>& key_bytes,
                                      const std::vector<std::uint64_t>& hashes) {
  SlabKernelArgs args;
  args.cursor = bench::Upload(&cursor, 1);
  args.keys = bench::Upload(keys.data(), keys.size());
  args.key_bytes = bench::Upload(key_bytes.data(), key_bytes.size());
  args.hashes = bench::Upload(hashes.data(), hashes.size());
  const unsigned long long zero = 0;
  args.failed = bench::Upload(&zero, 1);
  return args;
}

long long SlabKernelArgs::Failed() const {
  unsigned long long failed = 0;
  CudaCheck(cudaMemcpy(&failed, this->failed, sizeof(failed), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return static_cast<long long>(failed);
}

void SlabKernelArgs::Free() {
  for (void* p : {static_cast<void*>(cursor), static_cast<void*>(keys), static_cast<void*>(key_bytes),
                  static_cast<void*>(hashes), static_cast<void*>(failed)}) {
    CudaCheck(cudaFree(p), "cudaFree");
  }
  *this = {};
}

cudaError_t LaunchBlockPuts(const SlabKernelArgs& args, void* ring_device, const device::SlabGeometry& slab,
                            const char* src, int items, std::uint64_t bytes_each, cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  auto* header = static_cast<device::AnnounceRingHeader*>(ring_device);
  const device::AnnounceRing ring{header, reinterpret_cast<device::AnnounceRecord*>(header + 1)};
  BlockPuts<<<4 * sms, 256, 0, stream>>>(args, ring, slab, src, items, bytes_each);
  return cudaGetLastError();
}

}  // namespace nanokv::bench
