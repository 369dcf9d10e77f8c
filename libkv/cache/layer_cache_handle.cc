#include "nanokv/layer_cache_handle.h"

#include <string>

#include "libkv/cache/kv_cache_impl.h"

namespace nanokv {

Result<std::unique_ptr<LayerCacheHandle>> LayerCacheHandle::Create(
    const KVCache& cache, const LayerCacheHandleLimits& limits) {
  if (limits.max_batch == 0) return Status::InvalidArgument("LayerCacheHandle: max_batch of 0");
  LayerCacheHandleLimits resolved = limits;
  if (resolved.max_blocks_per_sequence == 0) resolved.max_blocks_per_sequence = cache.num_blocks();
  if (resolved.max_new_tokens == 0) resolved.max_new_tokens = resolved.max_batch;
  // The buffers are sized up front; refuse a size that could not be held.
  constexpr size_t kMaxEntries = size_t{1} << 32;
  if (resolved.max_batch > kMaxEntries / resolved.max_blocks_per_sequence ||
      resolved.max_new_tokens > kMaxEntries) {
    return Status::InvalidArgument("LayerCacheHandle: limits of " +
                                   std::to_string(resolved.max_batch) + " x " +
                                   std::to_string(resolved.max_blocks_per_sequence) +
                                   " blocks are too large");
  }
  return std::unique_ptr<LayerCacheHandle>(new LayerCacheHandle(cache, resolved));
}

LayerCacheHandle::LayerCacheHandle(const KVCache& cache, const LayerCacheHandleLimits& limits)
    : cache_(cache),
      limits_(limits),
      block_table_(limits.max_batch * limits.max_blocks_per_sequence, -1),
      context_lens_(limits.max_batch, 0),
      query_start_(limits.max_batch + 1, 0),
      slot_mapping_(limits.max_new_tokens, 0) {}

Result<LayerBatchView> LayerCacheHandle::Acquire(uint32_t layer,
                                                 std::span<const uint64_t> request_ids,
                                                 std::span<const uint32_t> new_tokens) {
  const KVCache::Impl& impl = *cache_.impl_;
  if (request_ids.size() > limits_.max_batch) {
    return Status::InvalidArgument("LayerCacheHandle: a batch of " +
                                   std::to_string(request_ids.size()) + " requests, limit " +
                                   std::to_string(limits_.max_batch));
  }
  LayerBatchView view;
  NANOKV_ASSIGN_OR_RETURN(view.k, impl.View(impl.k(), layer));
  NANOKV_ASSIGN_OR_RETURN(view.v, impl.View(impl.v(), layer));
  KVCache::Impl::BatchOut out;
  out.block_table = block_table_.data();
  out.table_stride = limits_.max_blocks_per_sequence;
  out.context_lens = context_lens_.data();
  out.query_start = query_start_.data();
  out.slot_mapping = slot_mapping_.data();
  out.slot_capacity = slot_mapping_.size();
  NANOKV_RETURN_IF_ERROR(impl.FillBatch(request_ids, new_tokens, out));

  const size_t batch = request_ids.size();
  view.layer = layer;
  view.batch = batch;
  view.block_table = {block_table_.data(), batch * out.table_stride};
  view.block_table_stride = out.table_stride;
  view.max_blocks = out.max_blocks;
  view.context_lens = {context_lens_.data(), batch};
  view.max_context_len = out.max_context_len;
  view.query_start = {query_start_.data(), batch + 1};
  view.slot_mapping = {slot_mapping_.data(), out.new_tokens};
  return view;
}

}  // namespace nanokv
