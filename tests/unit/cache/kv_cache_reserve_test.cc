// KVCache's reserve (issue 15 item 3) against the real kvd, in-process on
// the host backend: blocks taken ahead with their pages mapped and counted
// by kvd, allocations served from it with no request (kvd may even be gone),
// frees and a background grant refilling it, a refill refused over the
// limit, and a reclaim taking it after the kept groups.
//
// Geometry as kv_cache_test.cc: a 2 MiB page holds 512 blocks of one layer's
// K; 2 layers, so a page group is 4 pages.
#include <algorithm>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/kv_cache.h"
#include "tests/unit/cache/cache_test_util.h"
#include "tests/unit/client/client_test_util.h"
#include "tests/unit/client/in_process_kvd.h"

namespace nanokv {
namespace {

using testing::kBlocksPerPage;
using testing::kPagesPerGroup;

KVCacheConfig ReserveConfig(size_t low, size_t high) {
  KVCacheConfig config = testing::SmallConfig(4 * kBlocksPerPage);  // 4 groups, 16 pages
  config.reserve_low_blocks = low;
  config.reserve_high_blocks = high;
  return config;
}

class KVCacheReserveTest : public testing::CacheTest {
 protected:
  static bool ReserveReaches(const KVCache& cache, size_t blocks) {
    return testing::WaitUntil([&] { return cache.Stats().reserve_blocks == blocks; });
  }
  // kvd's count of the engine's pages, from the snapshots its server thread
  // publishes: the reserve's thread talks to kvd on its own, so node() may
  // not be read while a cache lives (in_process_kvd.h, rule 2).
  bool KvdHolds(uint32_t pages) {
    return kvd_->WaitFor(
        [pages](const testing::KvdSnapshot& s) {
          const kvd::Tenant* t = s.FindTenant("test-engine");
          return t != nullptr && t->used_pages[0] == pages;
        },
        0);
  }
  // Once the cache (and its thread) is gone: a reply orders this thread
  // after everything the client sent, so node() may be read (rule 2).
  static void Sync(Client& client) { (void)client.SetLimit(client.limit_bytes()); }
};

TEST_F(KVCacheReserveTest, CreateChecksTheWatermarks) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  for (auto [low, high] : std::vector<std::pair<size_t, size_t>>{
           {8, 4}, {0, 4 * kBlocksPerPage + 1}}) {
    auto made = KVCache::Create(*client, ReserveConfig(low, high));
    EXPECT_EQ(made.status().code(), Code::kInvalidArgument);
    EXPECT_NE(made.status().message().find("reserve_low_blocks"), std::string::npos)
        << made.status().ToString();
  }
}

TEST_F(KVCacheReserveTest, AllocationsInTheReserveAskKvdForNothing) {
  ClientOptions options;
  options.reconnect = false;
  auto client = Start(16, options);
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, ReserveConfig(16, 64));
  ASSERT_NE(cache, nullptr);
  // Filled at creation, in the background: 64 blocks, all in group 0,
  // whose pages kvd counts against this tenant.
  ASSERT_TRUE(ReserveReaches(*cache, 64));
  EXPECT_TRUE(KvdHolds(kPagesPerGroup));
  EXPECT_EQ(cache->Stats().reserve_refills, 1u);
  EXPECT_EQ(cache->Stats().used_blocks, 0u);

  // kvd goes away: any request would now fail. The reserve still serves.
  ASSERT_OK(kvd_->Stop());
  ASSERT_TRUE(testing::WaitUntil([&] { return !client->connected(); }));
  ASSERT_OK(cache->AllocateFor(1, 10 * 16));  // 10 blocks
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(cache->AppendToken(1).ok());  // one more block
  KVCacheStats s = cache->Stats();
  EXPECT_EQ(s.reserve_blocks, 64u - 11);
  EXPECT_EQ(s.used_blocks, 11u);
  EXPECT_EQ(s.reserve_hits, 2u);
  EXPECT_EQ(s.groups_mapped, 1u);  // nothing mapped since the refill
  EXPECT_EQ(*cache->BlockTable(1), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  ASSERT_OK(cache->CheckInvariants());
  // Past the reserve, an allocation needs kvd: it fails, and changes nothing.
  EXPECT_FALSE(cache->AllocateFor(2, 600 * 16).ok());  // group 1 is not mapped
  EXPECT_EQ(cache->Stats().reserve_blocks, 64u - 11);
  ASSERT_OK(cache->CheckInvariants());
}

TEST_F(KVCacheReserveTest, FreesAndTheBackgroundRefillKeepItFull) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, ReserveConfig(16, 64));
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(ReserveReaches(*cache, 64));
  // Freed blocks go back into the reserve: no grant.
  ASSERT_OK(cache->AllocateFor(1, 40 * 16));
  EXPECT_EQ(cache->Stats().reserve_blocks, 24u);
  ASSERT_OK(cache->FreeFor(1));
  EXPECT_EQ(cache->Stats().reserve_blocks, 64u);
  EXPECT_EQ(cache->Stats().reserve_refills, 1u);
  ASSERT_OK(cache->CheckInvariants());

  // Below the low mark: the background thread takes fresh blocks (they lie
  // in group 0, already mapped, so still no page beyond the first group).
  ASSERT_OK(cache->AllocateFor(2, 56 * 16));
  ASSERT_TRUE(ReserveReaches(*cache, 64));
  EXPECT_EQ(cache->Stats().reserve_refills, 2u);
  ASSERT_OK(cache->CheckInvariants());

  // A sequence larger than the reserve takes fresh blocks and leaves it be.
  ASSERT_OK(cache->AllocateFor(3, kBlocksPerPage * 16));
  EXPECT_EQ(cache->Stats().reserve_blocks, 64u);
  EXPECT_TRUE(KvdHolds(2 * kPagesPerGroup));
  ASSERT_OK(cache->CheckInvariants());
  cache.reset();
  Sync(*client);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVCacheReserveTest, ARefusedRefillWaitsForAFree) {
  // 8 pages: room for two groups. Two sequences take both; the reserve's
  // refill is refused (the device is full) until one is freed.
  auto client = Start(8);
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, ReserveConfig(1, kBlocksPerPage));
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(ReserveReaches(*cache, kBlocksPerPage));  // all of group 0
  ASSERT_OK(cache->AllocateFor(1, kBlocksPerPage * 16));  // the reserve, whole
  ASSERT_TRUE(testing::WaitUntil([&] { return cache->Stats().reserve_refills == 2; }));
  ASSERT_OK(cache->AllocateFor(2, kBlocksPerPage * 16));  // the refill, group 1
  ASSERT_TRUE(testing::WaitUntil([&] { return cache->Stats().reserve_refill_failures == 1; }));
  EXPECT_EQ(cache->Stats().reserve_blocks, 0u);
  EXPECT_TRUE(KvdHolds(2 * kPagesPerGroup));
  ASSERT_OK(cache->CheckInvariants());
  // No retry until blocks come free; then the free itself refills it.
  ASSERT_OK(cache->FreeFor(2));
  EXPECT_EQ(cache->Stats().reserve_blocks, kBlocksPerPage);
  EXPECT_EQ(cache->Stats().reserve_refill_failures, 1u);
  ASSERT_OK(cache->CheckInvariants());
  cache.reset();
  Sync(*client);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVCacheReserveTest, KvdShowsTheReserveItsEngineReports) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  // What kvd shows (NodeState::ReserveBytes, tested there): the report,
  // capped by the pages the tenant holds.
  auto reserve_shown = [&] {
    testing::KvdSnapshot s = kvd_->snapshot();
    const kvd::Tenant* t = s.FindTenant("test-engine");
    if (t == nullptr) return uint64_t{0};
    return std::min<uint64_t>(t->reported_reserve_bytes[0], uint64_t{t->used_pages[0]} * kPage);
  };
  {
    auto cache = MakeCache(*client, ReserveConfig(16, 64));
    ASSERT_NE(cache, nullptr);
    // 64 blocks of 16 KiB (K and V, 2 layers): reported right after the refill.
    const uint64_t block = cache->Stats().block_bytes;
    EXPECT_TRUE(testing::WaitUntil([&] { return reserve_shown() == 64 * block; }))
        << reserve_shown();
    // Allocations change it without a request; the thread reports within a second.
    ASSERT_OK(cache->AllocateFor(1, 10 * 16));
    EXPECT_TRUE(testing::WaitUntil([&] { return reserve_shown() == 54 * block; }))
        << reserve_shown();
  }
  // The cache is gone: so are its reserve and its pages.
  EXPECT_TRUE(testing::WaitUntil([&] { return reserve_shown() == 0; })) << reserve_shown();
  EXPECT_TRUE(KvdHolds(0));
  // An engine's own pool reports through the Client; kvd never shows more
  // than the tenant holds.
  ASSERT_OK(client->AdjustReserve(0, int64_t{1} << 40));
  EXPECT_EQ(client->AdjustReserve(7, 1).code(), Code::kInvalidArgument);
  Sync(*client);
  EXPECT_TRUE(KvdInvariantsHold());
  EXPECT_EQ(reserve_shown(), 0u);
}

TEST_F(KVCacheReserveTest, AReclaimTakesKeptGroupsThenTheReserve) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  KVCacheConfig config = ReserveConfig(1, 64);
  config.keep_free_groups = 1;
  auto cache = MakeCache(*client, config);
  ASSERT_NE(cache, nullptr);
  ASSERT_TRUE(ReserveReaches(*cache, 64));  // group 0
  ASSERT_OK(cache->AllocateFor(1, kBlocksPerPage * 16));  // fresh: group 1 (and 0's tail)
  ASSERT_OK(cache->AllocateFor(2, kBlocksPerPage * 16));  // fresh: groups 1-2
  ASSERT_OK(cache->FreeFor(2));                           // group 2 kept
  const size_t held = cache->Stats().mapped_pages;
  EXPECT_TRUE(KvdHolds(static_cast<uint32_t>(held)));
  ASSERT_EQ(cache->Stats().kept_free_groups, 1u);

  // Ask for more than the kept group: the reserve goes too, but never a
  // group holding a live block.
  auto released = cache->ReleaseFreePages(2 * kPagesPerGroup);
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  KVCacheStats s = cache->Stats();
  EXPECT_EQ(s.kept_free_groups, 0u);
  EXPECT_EQ(s.reserve_blocks, 0u);
  EXPECT_TRUE(KvdHolds(static_cast<uint32_t>(held - *released)));
  EXPECT_EQ(*cache->UsedTokens(1), kBlocksPerPage * 16);
  ASSERT_OK(cache->CheckInvariants());
  // And no grant refills it while nothing is freed.
  EXPECT_EQ(s.reserve_refills, 1u);
  cache.reset();
  Sync(*client);
  EXPECT_TRUE(KvdInvariantsHold());
}

}  // namespace
}  // namespace nanokv
