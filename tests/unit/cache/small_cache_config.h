// The KV cache geometry most cache suites use, on the in-process kvd and on
// a real one alike: fp16, 2 kv heads, head_dim 64, block_size 16, so one
// block of one layer's K is 4 KiB and a 2 MiB page holds 512 blocks; 2
// layers, so a page group is 2 layers x (K, V) = 4 pages.
#ifndef NANOKV_TESTS_UNIT_CACHE_SMALL_CACHE_CONFIG_H_
#define NANOKV_TESTS_UNIT_CACHE_SMALL_CACHE_CONFIG_H_

#include <cstddef>
#include <cstdint>

#include "nanokv/kv_cache.h"

namespace nanokv::testing {

inline constexpr size_t kBlocksPerPage = 512;
inline constexpr uint32_t kPagesPerGroup = 4;

inline KVCacheConfig SmallConfig(size_t num_blocks = 1024,
                                 KVLayout layout = KVLayout::kBlockMajor) {
  KVCacheConfig config;
  config.layers = 2;
  config.kv_heads = 2;
  config.head_dim = 64;
  config.block_size = 16;
  config.dtype = KVDataType::kFloat16;
  config.num_blocks = num_blocks;
  config.layout = layout;
  return config;
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_CACHE_SMALL_CACHE_CONFIG_H_
