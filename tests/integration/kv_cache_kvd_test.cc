// KVCache against a real kvd process: host here, real GPU pages on the GPU
// machine (NANOKV_TEST_BACKEND=cuda). Pages are granted on first use and go
// back when their blocks are free, as kvd's segment shows; bytes written at
// the view's strides land where the layout contract says; kvd's quota
// refusal is a clean kResourceExhausted.
#include <cstdint>
#include <vector>

#include "nanokv/kv_cache.h"
#include "nanokv/layer_cache_handle.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/unit/cache/small_cache_config.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

KVCacheConfig Config(KVLayout layout) { return SmallConfig(1024, layout); }

class KVCacheKvdTest : public KvdFixture {
 protected:
  uint32_t UsedPages(const std::string& tenant) {
    ipc::Snapshot s = Read();
    for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
      if (ipc::ReadString(s.segment.tenants[i].name) == tenant)
        return s.segment.tenants[i].used_pages[0];
    }
    return UINT32_MAX;
  }
  // The tenant's row counts `pages` on device 0, and the ledger agrees: it is
  // the one tenant kvd lists and its pages are every page kvd counts granted.
  bool UsedPagesBecome(const std::string& tenant, uint32_t pages) {
    bool used = WaitFor([&] { return UsedPages(tenant) == pages; }, 5s);
    ExpectLedger(PageLedger{}, {tenant}, {{0, pages}});
    return used;
  }
};

TEST_F(KVCacheKvdTest, PagesFollowBlocksAndBytesFollowTheLayout) {
  StartKvd(32);
  auto client = AttachClient("cache-engine");
  ASSERT_TRUE(client);
  for (KVLayout layout : {KVLayout::kBlockMajor, KVLayout::kHeadMajor}) {
    SCOPED_TRACE(KVLayoutName(layout));
    auto made = KVCache::Create(*client, Config(layout));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    KVCache& cache = **made;
    ASSERT_OK(cache.AllocateFor(1, 40));
    const uint32_t groups = layout == KVLayout::kBlockMajor ? 1 : 2;
    EXPECT_TRUE(UsedPagesBecome("cache-engine", 4 * groups));

    // One fp16 row per (token, head, layer, K/V), at the view's strides.
    auto value = [](uint32_t layer, int kv, size_t token, size_t head, size_t d) {
      return static_cast<uint16_t>(0x8000u | layer << 14 | static_cast<unsigned>(kv) << 13 |
                                   token << 6 | head << 5 | d % 32);
    };
    for (uint32_t layer = 0; layer < 2; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        KVCacheView view = kv == 0 ? *cache.KView(layer) : *cache.VView(layer);
        for (size_t token = 0; token < 40; ++token) {
          int64_t slot = *cache.SlotOf(1, token);
          for (size_t head = 0; head < 2; ++head) {
            std::vector<uint16_t> row(64);
            for (size_t d = 0; d < 64; ++d) row[d] = value(layer, kv, token, head, d);
            int64_t at = (slot / 16) * view.block_stride +
                         static_cast<int64_t>(head) * view.head_stride +
                         (slot % 16) * view.slot_stride;
            auto* dst = static_cast<uint16_t*>(view.data) + at;
            ASSERT_OK(client->CopyToDevice(dst, row.data(), 128));
          }
        }
      }
    }
    // Read back at the contract's index, computed here by hand.
    for (uint32_t layer = 0; layer < 2; ++layer) {
      for (int kv = 0; kv < 2; ++kv) {
        KVCacheView view = kv == 0 ? *cache.KView(layer) : *cache.VView(layer);
        for (size_t token = 0; token < 40; ++token) {
          const size_t slot = static_cast<size_t>(*cache.SlotOf(1, token));
          for (size_t head = 0; head < 2; ++head) {
            size_t index = layout == KVLayout::kBlockMajor
                               ? ((slot / 16 * 2 + head) * 16 + slot % 16) * 64
                               : ((head * 1024 + slot / 16) * 16 + slot % 16) * 64;
            std::vector<uint16_t> row(64);
            const auto* src = static_cast<const uint16_t*>(view.data) + index;
            ASSERT_OK(client->CopyToHost(row.data(), src, 128));
            for (size_t d = 0; d < 64; ++d)
              ASSERT_EQ(row[d], value(layer, kv, token, head, d)) << "token " << token;
          }
        }
      }
    }
    // The handle's slots are the ones written.
    auto handle = LayerCacheHandle::Create(cache, {.max_batch = 1, .max_new_tokens = 40});
    ASSERT_TRUE(handle.ok());
    const std::vector<uint64_t> ids = {1};
    const std::vector<uint32_t> all = {40};
    auto batch = (*handle)->Acquire(1, ids, all);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    for (size_t token = 0; token < 40; ++token)
      EXPECT_EQ(batch->slot_mapping[token], *cache.SlotOf(1, token));

    ASSERT_OK(cache.FreeFor(1));
    EXPECT_TRUE(UsedPagesBecome("cache-engine", 0));
    ASSERT_OK(cache.CheckInvariants());
  }
}

TEST_F(KVCacheKvdTest, QuotaRefusalIsCleanAndUndone) {
  StartKvd(32);
  auto client = AttachClient("small-cache", "", 4 * kPage);  // one page group
  ASSERT_TRUE(client);
  auto made = KVCache::Create(*client, Config(KVLayout::kBlockMajor));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  KVCache& cache = **made;
  ASSERT_OK(cache.AllocateFor(1, kBlocksPerPage * 16));  // all of group 0
  Status refused = cache.AllocateFor(2, 1);   // group 1: over the limit
  EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused.ToString();
  EXPECT_FALSE(cache.Contains(2));
  EXPECT_EQ(cache.Stats().mapped_groups, 1u);
  EXPECT_TRUE(UsedPagesBecome("small-cache", 4));
  ASSERT_OK(cache.CheckInvariants());
  ASSERT_OK(cache.FreeFor(1));
  ASSERT_OK(cache.AllocateFor(2, 1));
  EXPECT_TRUE(UsedPagesBecome("small-cache", 4));
}

}  // namespace
}  // namespace nanokv::testing
