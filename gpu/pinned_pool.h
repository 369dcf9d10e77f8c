// Host buffers that stage chunks between device memory and the network
// (kvd's transfer agent, ClusterClient's device puts and gets): made on
// first need up to a bound, pinned with the backend where it can (a copy
// between device memory and pageable memory runs through the driver's
// bounce buffers at a fraction of the bus: 6-8 GB/s on an H200,
// docs/BENCHMARKS.md 2026-11-26), unpinned before they are freed.
// Not thread-safe: each owner takes and gives under its own lock.
#ifndef NANOKV_GPU_PINNED_POOL_H_
#define NANOKV_GPU_PINNED_POOL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace nanokv::gpu {

class PinnedPool {
 public:
  // `owner` names the pool in its one warning (when pinning fails).
  PinnedPool(Backend& backend, size_t max_buffers, std::string owner);
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // A buffer of at least `bytes`, or nullptr when every one of max_buffers
  // is out (or the memory is not there). With all made and none free large
  // enough, a free one is made again at `bytes`.
  std::byte* Take(size_t bytes);
  void Give(std::byte* buffer);
  // Whether Take would answer a buffer now, of any size (memory
  // permitting): one is free or another may be made.
  bool CanTake() const;
  size_t buffers_made() const { return buffers_.size(); }

 private:
  struct Buffer {
    std::unique_ptr<std::byte[]> memory;
    size_t bytes = 0;
    bool pinned = false;
    bool out = false;
  };
  Buffer* Free(size_t bytes);  // the smallest free one of at least `bytes`
  // (Re)allocates `buffer` at `bytes` and pins it; false without memory.
  bool Make(Buffer& buffer, size_t bytes);

  Backend& backend_;
  const size_t max_buffers_;
  const std::string owner_;
  std::vector<Buffer> buffers_;
  bool warned_ = false;
};

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_PINNED_POOL_H_
