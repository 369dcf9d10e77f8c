// Where a KV block lives in the cache's pages: sizes, strides, and the page
// groups (page indices within a layer's region) each block touches. Pure
// arithmetic, no state: KVCache's bookkeeping and its views both read it.
#ifndef NANOKV_LIBKV_CACHE_CACHE_GEOMETRY_H_
#define NANOKV_LIBKV_CACHE_CACHE_GEOMETRY_H_

#include <cstddef>
#include <cstdint>

#include "nanokv/kv_cache.h"
#include "nanokv/status.h"

namespace nanokv::cache {

struct CacheGeometry {
  KVCacheConfig config;
  size_t element_bytes = 0;
  size_t num_blocks = 0;
  size_t page_bytes = 0;
  size_t head_block_bytes = 0;   // one head of one block: block_size * head_dim elements
  size_t layer_block_bytes = 0;  // one block of one layer's K: kv_heads * head_block_bytes
  size_t groups_per_layer = 0;   // pages per layer region
  size_t layer_stride_bytes = 0; // groups_per_layer * page_bytes

  // Checks the config and derives the rest (num_blocks from max_bytes when
  // it is 0). kInvalidArgument naming the field at fault.
  static Result<CacheGeometry> Make(const KVCacheConfig& config, size_t page_bytes);

  // The byte offset of (block, head) within a layer's region.
  size_t Offset(size_t block, size_t head) const {
    return config.layout == KVLayout::kBlockMajor
               ? block * layer_block_bytes + head * head_block_bytes
               : (head * num_blocks + block) * head_block_bytes;
  }
  // Calls f(first_group, count) for each range of page groups `block`
  // touches: one range in block-major order, one per head in head-major
  // order (ranges may repeat a group; callers count each call).
  template <typename F>
  void ForEachGroupRange(size_t block, F&& f) const {
    if (config.layout == KVLayout::kBlockMajor) {
      Range(Offset(block, 0), layer_block_bytes, f);
    } else {
      for (size_t head = 0; head < config.kv_heads; ++head)
        Range(Offset(block, head), head_block_bytes, f);
    }
  }

  KVCacheView View(void* layer_base) const;

 private:
  template <typename F>
  void Range(size_t offset, size_t bytes, F& f) const {
    size_t first = offset / page_bytes;
    size_t last = (offset + bytes - 1) / page_bytes;
    f(first, last - first + 1);
  }
};

}  // namespace nanokv::cache

#endif  // NANOKV_LIBKV_CACHE_CACHE_GEOMETRY_H_
