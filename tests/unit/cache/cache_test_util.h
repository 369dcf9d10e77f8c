// What the KV cache's suites on the in-process kvd share: the geometry most
// of them use (fp16, 2 kv heads, head_dim 64, block_size 16: one block of one
// layer's K is 4 KiB, so a 2 MiB page holds 512 blocks; 2 layers, so a page
// group is 2 layers x (K, V) = 4 pages) and a fixture that makes caches.
#ifndef NANOKV_TESTS_UNIT_CACHE_CACHE_TEST_UTIL_H_
#define NANOKV_TESTS_UNIT_CACHE_CACHE_TEST_UTIL_H_

#include <memory>

#include <gtest/gtest.h>

#include "nanokv/kv_cache.h"
#include "tests/unit/client/in_process_kvd.h"

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

class CacheTest : public InProcessKvdTest {
 protected:
  // The cache, or null with a failure recorded.
  std::unique_ptr<KVCache> MakeCache(Client& client, const KVCacheConfig& config) {
    auto made = KVCache::Create(client, config);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? std::move(made).value() : nullptr;
  }
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_CACHE_CACHE_TEST_UTIL_H_
