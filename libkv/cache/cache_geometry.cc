#include "libkv/cache/cache_geometry.h"

#include <limits>
#include <string>

#include "libkv/cache/block_allocator.h"

namespace nanokv {

size_t KVDataTypeBytes(KVDataType dtype) {
  switch (dtype) {
    case KVDataType::kFloat16:
    case KVDataType::kBFloat16:
      return 2;
    case KVDataType::kFloat32:
      return 4;
    case KVDataType::kFloat8E4M3:
    case KVDataType::kUInt8:
      return 1;
  }
  return 0;
}

const char* KVDataTypeName(KVDataType dtype) {
  switch (dtype) {
    case KVDataType::kFloat16: return "float16";
    case KVDataType::kBFloat16: return "bfloat16";
    case KVDataType::kFloat32: return "float32";
    case KVDataType::kFloat8E4M3: return "float8_e4m3";
    case KVDataType::kUInt8: return "uint8";
  }
  return "unknown";
}

const char* KVLayoutName(KVLayout layout) {
  return layout == KVLayout::kBlockMajor ? "block_major" : "head_major";
}

namespace cache {

Result<CacheGeometry> CacheGeometry::Make(const KVCacheConfig& config, size_t page_bytes) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument("KVCache: " + what); };
  // Each dimension is capped so that no product below overflows 64 bits.
  constexpr uint32_t kMaxDim = 1u << 20;
  if (config.layers == 0 || config.layers > kMaxDim) return bad("layers must be 1 to 2^20");
  if (config.kv_heads == 0 || config.kv_heads > kMaxDim) return bad("kv_heads must be 1 to 2^20");
  if (config.head_dim == 0 || config.head_dim > kMaxDim) return bad("head_dim must be 1 to 2^20");
  if (config.block_size == 0 || config.block_size > kMaxDim)
    return bad("block_size must be 1 to 2^20");
  if (config.layout != KVLayout::kBlockMajor && config.layout != KVLayout::kHeadMajor)
    return bad("unknown layout");
  CacheGeometry g;
  g.config = config;
  g.element_bytes = KVDataTypeBytes(config.dtype);
  if (g.element_bytes == 0) return bad("unknown dtype");
  if (page_bytes == 0 || page_bytes % g.element_bytes != 0) return bad("page size");
  g.page_bytes = page_bytes;
  g.head_block_bytes = size_t{config.block_size} * config.head_dim * g.element_bytes;
  if (g.head_block_bytes > (size_t{1} << 40) / config.kv_heads)
    return bad("one block would exceed 1 TiB");
  g.layer_block_bytes = g.head_block_bytes * config.kv_heads;
  const size_t all_layers_block = g.layer_block_bytes * 2 * config.layers;  // < 2^61
  if (config.num_blocks > 0) {
    g.num_blocks = config.num_blocks;
  } else if (config.max_bytes > 0) {
    g.num_blocks = config.max_bytes / all_layers_block;
    if (g.num_blocks == 0) {
      return bad("max_bytes " + std::to_string(config.max_bytes) + " holds no block of " +
                 std::to_string(all_layers_block) + " bytes (K and V, all layers)");
    }
  } else {
    return bad("set num_blocks or max_bytes");
  }
  if (g.num_blocks > cache::BlockAllocator::kMaxBlocks) return bad("more than 2^31 blocks");
  if (config.reserve_low_blocks > config.reserve_high_blocks ||
      config.reserve_high_blocks > g.num_blocks) {
    return bad("reserve_low_blocks " + std::to_string(config.reserve_low_blocks) +
               " and reserve_high_blocks " + std::to_string(config.reserve_high_blocks) +
               ": need low <= high <= the cache's " + std::to_string(g.num_blocks) + " blocks");
  }
  // The whole reservation, K or V: layers * whole pages of the layer's bytes.
  const size_t max = std::numeric_limits<size_t>::max() / 4;
  if (g.num_blocks > max / g.layer_block_bytes) return bad("the cache's size overflows");
  const size_t layer_bytes = g.num_blocks * g.layer_block_bytes;
  g.groups_per_layer = (layer_bytes + page_bytes - 1) / page_bytes;
  g.layer_stride_bytes = g.groups_per_layer * page_bytes;
  if (g.layer_stride_bytes > max / config.layers) return bad("the cache's size overflows");
  return g;
}

KVCacheView CacheGeometry::View(void* layer_base) const {
  KVCacheView v;
  v.data = layer_base;
  v.dtype = config.dtype;
  v.element_bytes = element_bytes;
  v.layout = config.layout;
  v.block_size = config.block_size;
  const auto blocks = static_cast<int64_t>(num_blocks);
  const auto heads = static_cast<int64_t>(config.kv_heads);
  const auto slots = static_cast<int64_t>(config.block_size);
  const auto dim = static_cast<int64_t>(config.head_dim);
  v.slot_stride = dim;
  if (config.layout == KVLayout::kBlockMajor) {
    v.block_stride = heads * slots * dim;
    v.head_stride = slots * dim;
    int64_t shape[4] = {blocks, heads, slots, dim};
    int64_t strides[4] = {v.block_stride, v.head_stride, dim, 1};
    for (int i = 0; i < 4; ++i) v.shape[i] = shape[i], v.strides[i] = strides[i];
  } else {
    v.block_stride = slots * dim;
    v.head_stride = blocks * slots * dim;
    int64_t shape[4] = {heads, blocks, slots, dim};
    int64_t strides[4] = {v.head_stride, v.block_stride, dim, 1};
    for (int i = 0; i < 4; ++i) v.shape[i] = shape[i], v.strides[i] = strides[i];
  }
  return v;
}

}  // namespace cache
}  // namespace nanokv
