// What the KV cache's suites on the in-process kvd share: the small geometry
// (small_cache_config.h) and a fixture that makes caches.
#ifndef NANOKV_TESTS_UNIT_CACHE_CACHE_TEST_UTIL_H_
#define NANOKV_TESTS_UNIT_CACHE_CACHE_TEST_UTIL_H_

#include <memory>

#include <gtest/gtest.h>

#include "nanokv/kv_cache.h"
#include "tests/unit/cache/small_cache_config.h"
#include "tests/unit/client/in_process_kvd.h"

namespace nanokv::testing {

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
