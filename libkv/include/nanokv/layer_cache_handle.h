// A per-call, typed view of one layer of a KVCache for one batch of
// requests: what an attention or paged-append kernel takes as arguments.
//
//   auto handle = nanokv::LayerCacheHandle::Create(*cache, {.max_batch = 256,
//                                                  .max_blocks_per_sequence = 512});
//   for (uint32_t layer = 0; layer < layers; ++layer) {
//     auto batch = (*handle)->Acquire(layer, request_ids);   // decode: 1 new token each
//     append_kernel(batch->k, batch->v, batch->slot_mapping, ...);
//     attention_kernel(batch->k, batch->v, batch->block_table, batch->context_lens, ...);
//   }
//
// Acquire allocates nothing: every buffer is sized at Create from the
// limits, and Acquire fills them (so it is safe between CUDA graph
// captures, and a test proves it with a counting operator new). The views
// point into the handle's buffers and stay valid until the next Acquire or
// the handle's end. The index buffers are host memory; an engine copies
// them to the device (or pins them) as its kernels need.
//
// Threads: one handle per thread (Acquire writes its buffers); any number of
// handles may share a cache.
#ifndef NANOKV_LAYER_CACHE_HANDLE_H_
#define NANOKV_LAYER_CACHE_HANDLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nanokv/kv_cache.h"
#include "nanokv/status.h"

namespace nanokv {

struct LayerCacheHandleLimits {
  size_t max_batch = 256;               // requests per Acquire
  size_t max_blocks_per_sequence = 0;   // a block table row; 0: the cache's num_blocks
  size_t max_new_tokens = 0;            // slots per Acquire; 0: max_batch (decode)
};

// One Acquire's answer. Rows are in the order of the request ids given.
struct LayerBatchView {
  uint32_t layer = 0;
  KVCacheView k;
  KVCacheView v;
  size_t batch = 0;
  // [batch, block_table_stride] block ids, row-major; -1 past each row's blocks.
  std::span<const int32_t> block_table;
  size_t block_table_stride = 0;
  size_t max_blocks = 0;  // the longest row in this batch
  // [batch] tokens held by each request, the new ones included.
  std::span<const int32_t> context_lens;
  uint32_t max_context_len = 0;
  // [batch + 1] where each request's new tokens start in slot_mapping
  // (cu_seqlens of the queries): request i's are [query_start[i], query_start[i+1]).
  std::span<const int32_t> query_start;
  // [new tokens] the slot (block * block_size + offset) of each new token.
  std::span<const int64_t> slot_mapping;
};

class LayerCacheHandle {
 public:
  // Sizes every buffer from `limits`. `cache` must remain live while the
  // handle exists. kInvalidArgument for a zero max_batch.
  static Result<std::unique_ptr<LayerCacheHandle>> Create(const KVCache& cache,
                                                          const LayerCacheHandleLimits& limits);

  LayerCacheHandle(const LayerCacheHandle&) = delete;
  LayerCacheHandle& operator=(const LayerCacheHandle&) = delete;

  // The views of `layer` for `request_ids`, whose last new_tokens[i] tokens
  // (1 each when new_tokens is empty: decode) are the ones being written.
  // The engine has made room for them first (AllocateFor, AppendToken).
  // No heap allocation on success. kInvalidArgument for a layer out of
  // range or a batch beyond the limits; kNotFound for an unknown request.
  Result<LayerBatchView> Acquire(uint32_t layer, std::span<const uint64_t> request_ids,
                                 std::span<const uint32_t> new_tokens = {});

  const LayerCacheHandleLimits& limits() const { return limits_; }

 private:
  LayerCacheHandle(const KVCache& cache, const LayerCacheHandleLimits& limits);

  const KVCache& cache_;  // must remain live while the handle exists
  const LayerCacheHandleLimits limits_;
  std::vector<int32_t> block_table_;
  std::vector<int32_t> context_lens_;
  std::vector<int32_t> query_start_;
  std::vector<int64_t> slot_mapping_;
};

}  // namespace nanokv

#endif  // NANOKV_LAYER_CACHE_HANDLE_H_
