// KVCache against the real kvd, run in-process on the host backend
// (tests/unit/client/in_process_kvd.h): pages granted on first use and
// returned when their blocks are free (kvd's own counts), bytes written
// through a view landing where the layout contract says, out-of-blocks and
// over-quota failing with nothing changed, kept groups and reclaim.
//
// The geometry most tests use: fp16, 2 kv heads, head_dim 64, block_size 16,
// so one block of one layer's K is 4 KiB and a 2 MiB page holds 512 blocks;
// 2 layers, so a page group is 2 layers x (K, V) = 4 pages.
#include "nanokv/kv_cache.h"

#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/client.h"
#include "tests/unit/cache/cache_test_util.h"
#include "tests/unit/client/in_process_kvd.h"

namespace nanokv {
namespace {

constexpr size_t kPage = testing::InProcessKvd::kPageBytes;
using testing::kBlocksPerPage;
using testing::kPagesPerGroup;
using testing::SmallConfig;
using KVCacheTest = testing::CacheTest;

TEST_F(KVCacheTest, CreateChecksTheConfig) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  KVCacheConfig config = SmallConfig();
  for (auto breaks : std::vector<void (*)(KVCacheConfig&)>{
           [](KVCacheConfig& c) { c.layers = 0; }, [](KVCacheConfig& c) { c.kv_heads = 0; },
           [](KVCacheConfig& c) { c.head_dim = 0; }, [](KVCacheConfig& c) { c.block_size = 0; },
           [](KVCacheConfig& c) { c.num_blocks = 0; },  // and no max_bytes
           [](KVCacheConfig& c) { c.num_blocks = size_t{1} << 32; },
           [](KVCacheConfig& c) { c.device = 3; },
           [](KVCacheConfig& c) { c.num_blocks = 0, c.max_bytes = 1000; }}) {
    KVCacheConfig bad = config;
    breaks(bad);
    EXPECT_EQ(KVCache::Create(*client, bad).status().code(), Code::kInvalidArgument);
  }
  // Blocks from bytes: 16 KiB a block (K + V, 2 layers).
  KVCacheConfig by_bytes = config;
  by_bytes.num_blocks = 0;
  by_bytes.max_bytes = 100 * 16384 + 5;
  auto cache = MakeCache(*client, by_bytes);
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->num_blocks(), 100u);
  EXPECT_EQ(cache->Stats().block_bytes, 16384u);
  EXPECT_EQ(UsedPages("test-engine"), 0u);  // a reservation asks kvd for nothing
}

TEST_F(KVCacheTest, PagesComeOnFirstUseAndGoWhenTheirBlocksAreFree) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, SmallConfig());
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->Stats().page_groups, 2u);
  EXPECT_EQ(cache->layer_stride_elements(), static_cast<int64_t>(2 * kPage / 2));

  ASSERT_OK(cache->AllocateFor(1, 100));  // 7 blocks: group 0
  EXPECT_EQ(*cache->UsedTokens(1), 100u);
  EXPECT_EQ(cache->BlockTable(1)->size(), 7u);
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  EXPECT_EQ(cache->Stats().mapped_groups, 1u);

  // The rest of group 0: no new page.
  ASSERT_OK(cache->AllocateFor(2, (kBlocksPerPage - 7) * 16));
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  EXPECT_EQ(cache->Stats().free_blocks, 512u);
  // One more token needs block 512, the first of group 1.
  auto slot = cache->AppendToken(2);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  EXPECT_EQ(*slot, 512 * 16);
  EXPECT_EQ(UsedPages("test-engine"), 2 * kPagesPerGroup);
  EXPECT_EQ(cache->Stats().mapped_pages, 2 * kPagesPerGroup);
  ASSERT_OK(cache->CheckInvariants());

  ASSERT_OK(cache->FreeFor(1));  // group 0 still holds request 2's blocks
  EXPECT_EQ(UsedPages("test-engine"), 2 * kPagesPerGroup);
  ASSERT_OK(cache->FreeFor(2));
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  EXPECT_EQ(Counts().held_pages, 0u);
  KVCacheStats s = cache->Stats();
  EXPECT_EQ(s.mapped_groups, 0u);
  EXPECT_EQ(s.groups_mapped, 2u);
  EXPECT_EQ(s.groups_returned, 2u);
  EXPECT_EQ(s.used_blocks, 0u);
  ASSERT_OK(cache->CheckInvariants());
  EXPECT_TRUE(KvdInvariantsHold());
}

// The element of (slot, head, dim) per the header's contract, in elements
// from the layer's base, written out for each layout by hand.
int64_t ContractIndex(KVLayout layout, int64_t slot, int64_t head, int64_t dim) {
  const int64_t blocks = 1024, heads = 2, block_size = 16, head_dim = 64;
  const int64_t block = slot / block_size, offset = slot % block_size;
  if (layout == KVLayout::kBlockMajor)
    return ((block * heads + head) * block_size + offset) * head_dim + dim;
  return ((head * blocks + block) * block_size + offset) * head_dim + dim;
}

// Never 0 (untouched memory reads 0), distinct per layer, K/V, token, head.
uint16_t Pattern(uint32_t layer, int kv, size_t token, int64_t head, size_t d) {
  return static_cast<uint16_t>(0x8000u | layer << 14 | static_cast<unsigned>(kv) << 13 |
                               token << 5 | static_cast<size_t>(head) << 4 | d % 16);
}

class KVCacheLayoutTest : public KVCacheTest, public ::testing::WithParamInterface<KVLayout> {};

TEST_P(KVCacheLayoutTest, BytesWrittenThroughAViewLandWhereTheLayoutSays) {
  const KVLayout layout = GetParam();
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, SmallConfig(1024, layout));
  ASSERT_NE(cache, nullptr);
  ASSERT_OK(cache->AllocateFor(9, 40));  // 3 blocks
  ASSERT_OK(cache->AllocateFor(5, 20));  // 2 blocks after them
  ASSERT_OK(cache->FreeFor(9));          // request 5 keeps blocks 3 and 4
  auto table = cache->BlockTable(5);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(*table, (std::vector<uint32_t>{3, 4}));

  for (uint32_t layer = 0; layer < 2; ++layer) {
    auto k = cache->KView(layer);
    auto v = cache->VView(layer);
    ASSERT_TRUE(k.ok() && v.ok());
    EXPECT_EQ(k->element_bytes, 2u);
    EXPECT_EQ(k->slot_stride, 64);
    EXPECT_EQ(k->strides[3], 1);
    if (layout == KVLayout::kBlockMajor) {
      EXPECT_EQ(k->shape[0], 1024);
      EXPECT_EQ(k->block_stride, 2 * 16 * 64);
      EXPECT_EQ(k->head_stride, 16 * 64);
    } else {
      EXPECT_EQ(k->shape[0], 2);
      EXPECT_EQ(k->block_stride, 16 * 64);
      EXPECT_EQ(k->head_stride, 1024 * 16 * 64);
    }
    // Each token of request 5, each head: head_dim values (layer, token,
    // head, K or V), written at the view's strides.
    for (size_t token = 0; token < 20; ++token) {
      int64_t slot = *cache->SlotOf(5, token);
      for (int64_t head = 0; head < 2; ++head) {
        for (int kv = 0; kv < 2; ++kv) {
          const KVCacheView& view = kv == 0 ? *k : *v;
          std::vector<uint16_t> row(64);
          for (size_t d = 0; d < 64; ++d) row[d] = Pattern(layer, kv, token, head, d);
          int64_t at = (slot / 16) * view.block_stride + head * view.head_stride +
                       (slot % 16) * view.slot_stride;
          ASSERT_OK(client->CopyToDevice(static_cast<uint16_t*>(view.data) + at, row.data(),
                                         row.size() * 2));
        }
      }
    }
  }
  // Read each layer's K and V back whole (every page is mapped: all blocks
  // of this small cache live in mapped groups, or head-major touches both)
  // and find each value at the contract's index, nothing anywhere else.
  const size_t mapped_groups = cache->Stats().mapped_groups;
  for (uint32_t layer = 0; layer < 2; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      KVCacheView view = kv == 0 ? *cache->KView(layer) : *cache->VView(layer);
      std::vector<uint16_t> region(mapped_groups * kPage / 2);
      ASSERT_OK(client->CopyToHost(region.data(), view.data, region.size() * 2));
      std::vector<uint16_t> expected(region.size(), 0);
      for (size_t token = 0; token < 20; ++token) {
        int64_t slot = *cache->SlotOf(5, token);
        for (int64_t head = 0; head < 2; ++head) {
          for (int64_t d = 0; d < 64; ++d) {
            expected[static_cast<size_t>(ContractIndex(layout, slot, head, d))] =
                Pattern(layer, kv, token, head, static_cast<size_t>(d));
          }
        }
      }
      ASSERT_EQ(region, expected) << "layer " << layer << (kv == 0 ? " K" : " V");
    }
  }
  EXPECT_EQ(mapped_groups, layout == KVLayout::kBlockMajor ? 1u : 2u);
  ASSERT_OK(cache->CheckInvariants());
}

INSTANTIATE_TEST_SUITE_P(Layouts, KVCacheLayoutTest,
                         ::testing::Values(KVLayout::kBlockMajor, KVLayout::kHeadMajor),
                         [](const auto& param_info) {
                           return std::string(KVLayoutName(param_info.param));
                         });

TEST_F(KVCacheTest, OutOfBlocksFailsAndChangesNothing) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, SmallConfig(8));
  ASSERT_NE(cache, nullptr);
  ASSERT_OK(cache->AllocateFor(1, 8 * 16));
  EXPECT_EQ(cache->AllocateFor(2, 1).code(), Code::kResourceExhausted);
  EXPECT_FALSE(cache->Contains(2));
  EXPECT_EQ(cache->AppendToken(1).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(*cache->UsedTokens(1), 128u);
  EXPECT_EQ(cache->AppendTokens(1, size_t{1} << 40).code(), Code::kResourceExhausted);
  EXPECT_EQ(cache->AllocateFor(3, 9 * 16).code(), Code::kResourceExhausted);
  EXPECT_EQ(cache->AllocateFor(1, 1).code(), Code::kAlreadyExists);
  EXPECT_EQ(cache->FreeFor(77).code(), Code::kNotFound);
  EXPECT_EQ(cache->AppendToken(77).status().code(), Code::kNotFound);
  EXPECT_EQ(cache->UsedTokens(77).status().code(), Code::kNotFound);
  EXPECT_EQ(cache->BlockTable(77).status().code(), Code::kNotFound);
  EXPECT_EQ(cache->SlotOf(1, 128).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(cache->KView(2).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  ASSERT_OK(cache->CheckInvariants());
  ASSERT_OK(cache->FreeFor(1));
  ASSERT_OK(cache->AllocateFor(2, 1));  // the blocks are back
  EXPECT_EQ(cache->Stats().used_blocks, 1u);
}

TEST_F(KVCacheTest, OverQuotaFailsAndChangesNothing) {
  ClientOptions options;
  options.limit_bytes = kPagesPerGroup * kPage;  // one page group
  auto client = Start(16, options);
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, SmallConfig());
  ASSERT_NE(cache, nullptr);
  ASSERT_OK(cache->AllocateFor(1, kBlocksPerPage * 16));  // all of group 0
  Status refused = cache->AllocateFor(2, 16);             // group 1: over the limit
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused.ToString();
  EXPECT_FALSE(cache->Contains(2));
  EXPECT_EQ(cache->AppendToken(1).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(*cache->UsedTokens(1), kBlocksPerPage * 16);
  KVCacheStats s = cache->Stats();
  EXPECT_EQ(s.used_blocks, kBlocksPerPage);
  EXPECT_EQ(s.mapped_groups, 1u);
  EXPECT_EQ(s.map_failures, 2u);
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  ASSERT_OK(cache->CheckInvariants());
  EXPECT_TRUE(KvdInvariantsHold());

  ASSERT_OK(cache->FreeFor(1));  // group 0 back to kvd: now group 1 fits
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  ASSERT_OK(cache->AllocateFor(2, kBlocksPerPage * 16));
  ASSERT_OK(cache->FreeFor(2));
  ASSERT_OK(cache->AllocateFor(3, 16));
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
}

TEST_F(KVCacheTest, KeptGroupsServeAgainAndGoBackOnReclaim) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  KVCacheConfig config = SmallConfig();
  config.keep_free_groups = 1;
  auto cache = MakeCache(*client, config);
  ASSERT_NE(cache, nullptr);
  ASSERT_OK(cache->AllocateFor(1, (kBlocksPerPage + 1) * 16));  // both groups
  EXPECT_EQ(UsedPages("test-engine"), 2 * kPagesPerGroup);
  ASSERT_OK(cache->FreeFor(1));  // one group kept mapped, one returned
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  KVCacheStats s = cache->Stats();
  EXPECT_EQ(s.kept_free_groups, 1u);
  EXPECT_EQ(s.mapped_groups, 1u);
  EXPECT_EQ(s.groups_returned, 1u);

  // Group 0 is the kept one: an allocation there asks kvd for nothing.
  ASSERT_OK(cache->AllocateFor(2, 16));
  EXPECT_EQ(cache->Stats().groups_mapped, 2u);
  EXPECT_EQ(cache->Stats().kept_free_groups, 0u);
  ASSERT_OK(cache->FreeFor(2));
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);

  // A live block's group is never given up.
  ASSERT_OK(cache->AllocateFor(3, kBlocksPerPage * 16));  // group 0 again, all of it
  ASSERT_OK(cache->AllocateFor(4, 16));                   // group 1
  ASSERT_OK(cache->FreeFor(4));                           // group 1 kept
  EXPECT_EQ(UsedPages("test-engine"), 2 * kPagesPerGroup);
  // kvd lowers the limit to one group's pages: 4 pages over.
  auto limit = client->SetLimit(kPagesPerGroup * kPage);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_EQ(client->pending_reclaim_pages(), kPagesPerGroup);
  auto released = cache->ReleasePendingReclaim();
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_EQ(*released, kPagesPerGroup);
  EXPECT_EQ(client->pending_reclaim_pages(), 0u);
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  EXPECT_EQ(*cache->ReleaseFreePages(100), 0u);  // group 0 holds request 3
  EXPECT_EQ(UsedPages("test-engine"), kPagesPerGroup);
  EXPECT_EQ(*cache->UsedTokens(3), kBlocksPerPage * 16);
  ASSERT_OK(cache->CheckInvariants());
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVCacheTest, ReclaimCallbackReleasesKeptGroups) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  KVCacheConfig config = SmallConfig();
  config.keep_free_groups = 2;
  auto cache = MakeCache(*client, config);
  ASSERT_NE(cache, nullptr);
  KVCache* raw = cache.get();
  client->OnReclaim([raw](const ReclaimNotice& notice) {
    auto released = raw->ReleaseFreePages(notice.pages);
    if (!released.ok()) ADD_FAILURE() << released.status().ToString();
  });
  ASSERT_OK(cache->AllocateFor(1, (kBlocksPerPage + 1) * 16));
  ASSERT_OK(cache->FreeFor(1));  // both groups kept
  EXPECT_EQ(UsedPages("test-engine"), 2 * kPagesPerGroup);
  uint64_t after = kvd_->publishes();
  ASSERT_TRUE(client->SetLimit(kPagesPerGroup * kPage).ok());
  // The notice reaches the callback thread; it gives back one group.
  EXPECT_TRUE(kvd_->WaitFor(
      [](const testing::KvdSnapshot& s) {
        const kvd::Tenant* tenant = s.FindTenant("test-engine");
        return tenant != nullptr && tenant->used_pages[0] == kPagesPerGroup;
      },
      after));
  EXPECT_TRUE(testing::WaitUntil([&] { return cache->Stats().kept_free_groups == 1; }));
  client->OnReclaim(nullptr);
  ASSERT_OK(cache->CheckInvariants());
}

TEST_F(KVCacheTest, AFragmentedCacheServesFromSeveralRuns) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, SmallConfig(8));
  ASSERT_NE(cache, nullptr);
  for (uint64_t id = 0; id < 8; ++id) ASSERT_OK(cache->AllocateFor(id, 16));
  for (uint64_t id = 0; id < 8; id += 2) ASSERT_OK(cache->FreeFor(id));
  KVCacheStats s = cache->Stats();
  EXPECT_EQ(s.free_blocks, 4u);
  EXPECT_EQ(s.largest_free_run, 1u);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.75);
  ASSERT_OK(cache->AllocateFor(100, 4 * 16 - 3));
  EXPECT_EQ(*cache->BlockTable(100), (std::vector<uint32_t>{0, 2, 4, 6}));
  EXPECT_EQ(*cache->SlotOf(100, 16), 2 * 16);
  EXPECT_EQ(*cache->SlotOf(100, 60), 6 * 16 + 12);
  std::string dump = cache->DumpCacheStats();
  EXPECT_NE(dump.find("request 100: 61/64 tokens, blocks [0, +1) [2, +1) [4, +1) [6, +1)"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("2 layers, 2 kv heads, head_dim 64, block_size 16, float16, block_major"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("8 blocks, 8 used, 0 free"), std::string::npos) << dump;
  ASSERT_OK(cache->CheckInvariants());
}

TEST_F(KVCacheTest, ConcurrentSequences) {
  auto client = Start(64);
  ASSERT_NE(client, nullptr);
  auto cache = MakeCache(*client, SmallConfig(4096));
  ASSERT_NE(cache, nullptr);
  std::vector<std::thread> threads;
  std::vector<Status> failures(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, &failures, t] {
      for (uint64_t round = 0; round < 50 && failures[t].ok(); ++round) {
        uint64_t id = static_cast<uint64_t>(t) << 32 | round;
        Status s = cache->AllocateFor(id, 20 + 7 * round);
        for (int i = 0; i < 40 && s.ok(); ++i) s = cache->AppendToken(id).status();
        if (s.ok() && round % 3 != 0) s = cache->FreeFor(id);
        failures[t] = s;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Status& s : failures) EXPECT_TRUE(s.ok()) << s.ToString();
  ASSERT_OK(cache->CheckInvariants());
  EXPECT_EQ(cache->Stats().sequences, 4u * 17);
  EXPECT_EQ(UsedPages("test-engine"), cache->Stats().mapped_pages);
  cache.reset();  // every page back to kvd
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  EXPECT_TRUE(KvdInvariantsHold());
}

}  // namespace
}  // namespace nanokv
