// kv_put_objects_announced: many v2 slab puts in one launch (a batch's,
// ObjectStore::BatchPutFromDevice through a slab). Row y of the grid puts
// item y as kv_put_object puts one object: each block makes sure the slot
// is this write's before it stores, the block that completes the item's
// count publishes READY and then stamps the item's announce record, so kvd
// finds the object READY. A launch per item cost more host time than a
// 64 KiB object takes the GPU. Valid CUDA and HIP.
#include <algorithm>
#include <cstdint>

#include "kernels/copy_bytes.cuh"
#include "kernels/gpu_compat.h"
#include "kernels/kv_launch.h"
#include "kernels/object_state.cuh"

namespace nanokv::kernels::detail {
namespace {

__global__ void PutObjectsAnnouncedKernel(AnnouncedPutBatch batch) {
  const int row = blockIdx.y;
  if (row >= batch.n) return;
  const AnnouncedPutArgs& item = batch.items[row];
  __shared__ std::uint32_t ours;
  if (threadIdx.x == 0) {
    std::uint32_t epoch_seen = 0;
    ours = JoinWriteDevice(item.header, item.epoch, &epoch_seen) == static_cast<std::uint32_t>(CommitCode::kCommitted);
    if (ours != 0 && blockIdx.x == 0) {
      ObjectHeader writing{};
      writing.key_hash = item.key_hash;
      writing.n_pages = item.n_pages;
      writing.page_bytes = batch.page_bytes;
      writing.payload_base = item.payload_base;
      writing.bytes_total = item.bytes;
      WriteHeaderFieldsDevice(item.header, writing);
    }
  }
  __syncthreads();
  if (ours != 0) {
    const std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::uint64_t nthreads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    CopyBytes(item.dst, item.src, item.bytes, tid, nthreads);
  }
  __syncthreads();  // the block's stores, seen by thread 0: its count's release carries them
  if (threadIdx.x != 0 || ours == 0) return;
  if (!CountStoreBlockDevice(item.header, item.epoch, gridDim.x)) return;
  std::uint32_t seen = 0;
  if (PublishReadyDevice(item.header, item.epoch, &seen) == static_cast<std::uint32_t>(CommitCode::kCommitted)) {
    gpu_compat::StoreReleaseSystem(item.stamp, item.stamp_value);
  }
}

}  // namespace

int LaunchPutObjectsAnnounced(const AnnouncedPutBatch& batch, std::uint64_t max_bytes, void* stream) {
  if (batch.n == 0) return 0;
  // About 4096 blocks in all (the copies stride over their row), at least one a row.
  std::uint64_t blocks = (max_bytes + kCopyThreads * 16 - 1) / (kCopyThreads * 16);
  const std::uint64_t per_row = std::max<std::uint64_t>(1, 4096 / static_cast<std::uint64_t>(batch.n));
  blocks = std::max<std::uint64_t>(1, std::min(blocks, per_row));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(batch.n));
  PutObjectsAnnouncedKernel<<<grid, kCopyThreads, 0, static_cast<cudaStream_t>(stream)>>>(batch);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace nanokv::kernels::detail
