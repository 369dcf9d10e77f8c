// LayerCacheHandle over a KVCache on the real in-process kvd: the views it
// fills (block table rows, context lengths, query starts, slot mapping), its
// limits, and that Acquire allocates nothing. That proof is this binary's
// own global operator new / delete, which count the calls made on each
// thread (the kvd and client threads allocate as they please).
#include "nanokv/layer_cache_handle.h"

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/kv_cache.h"
#include "tests/unit/client/in_process_kvd.h"

namespace {
thread_local size_t allocations_on_this_thread = 0;

void* CountedNew(size_t size, size_t align = 0) {
  ++allocations_on_this_thread;
  if (size == 0) size = 1;
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (size + align - 1) / align * align)
                : std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t size) { return CountedNew(size); }
void* operator new[](size_t size) { return CountedNew(size); }
void* operator new(size_t size, std::align_val_t align) {
  return CountedNew(size, static_cast<size_t>(align));
}
void* operator new[](size_t size, std::align_val_t align) {
  return CountedNew(size, static_cast<size_t>(align));
}
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  try {
    return CountedNew(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  try {
    return CountedNew(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace nanokv {
namespace {

KVCacheConfig Config() {
  KVCacheConfig config;
  config.layers = 3;
  config.kv_heads = 2;
  config.head_dim = 64;
  config.block_size = 16;
  config.dtype = KVDataType::kBFloat16;
  config.num_blocks = 256;
  return config;
}

using LayerCacheHandleTest = testing::InProcessKvdTest;

TEST_F(LayerCacheHandleTest, DecodeAndPrefillViews) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto made = KVCache::Create(*client, Config());
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  KVCache& cache = **made;
  ASSERT_OK(cache.AllocateFor(10, 20));  // blocks 0, 1
  ASSERT_OK(cache.AllocateFor(11, 16));  // block 2
  ASSERT_OK(cache.AllocateFor(12, 33));  // blocks 3, 4, 5
  auto handle = LayerCacheHandle::Create(cache, {.max_batch = 4, .max_blocks_per_sequence = 4,
                                                 .max_new_tokens = 64});
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();

  // Decode: one new token each, appended first.
  const std::vector<uint64_t> ids = {12, 10, 11};
  std::vector<int64_t> appended;
  for (uint64_t id : ids) appended.push_back(*cache.AppendToken(id));  // 11 opens block 6
  auto batch = (*handle)->Acquire(1, ids);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->layer, 1u);
  EXPECT_EQ(batch->batch, 3u);
  EXPECT_EQ(batch->k.data, cache.KView(1)->data);
  EXPECT_EQ(batch->v.data, cache.VView(1)->data);
  EXPECT_EQ(batch->block_table_stride, 4u);
  EXPECT_EQ(std::vector<int32_t>(batch->block_table.begin(), batch->block_table.end()),
            (std::vector<int32_t>{3, 4, 5, -1, 0, 1, -1, -1, 2, 6, -1, -1}));
  EXPECT_EQ(batch->max_blocks, 3u);
  EXPECT_EQ(std::vector<int32_t>(batch->context_lens.begin(), batch->context_lens.end()),
            (std::vector<int32_t>{34, 21, 17}));
  EXPECT_EQ(batch->max_context_len, 34u);
  EXPECT_EQ(std::vector<int32_t>(batch->query_start.begin(), batch->query_start.end()),
            (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<int64_t>(batch->slot_mapping.begin(), batch->slot_mapping.end()),
            appended);
  EXPECT_EQ(appended, (std::vector<int64_t>{5 * 16 + 1, 1 * 16 + 4, 6 * 16 + 0}));

  // Prefill-style: the last 5 tokens of 10 and all 17 of 11.
  const std::vector<uint64_t> two = {10, 11};
  const std::vector<uint32_t> fresh = {5, 17};
  auto prefill = (*handle)->Acquire(0, two, fresh);
  ASSERT_TRUE(prefill.ok()) << prefill.status().ToString();
  EXPECT_EQ(std::vector<int32_t>(prefill->query_start.begin(), prefill->query_start.end()),
            (std::vector<int32_t>{0, 5, 22}));
  ASSERT_EQ(prefill->slot_mapping.size(), 22u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(prefill->slot_mapping[i], *cache.SlotOf(10, 16 + i));
  for (size_t i = 0; i < 17; ++i) EXPECT_EQ(prefill->slot_mapping[5 + i], *cache.SlotOf(11, i));
  // The earlier view's rows were overwritten: views live until the next Acquire.
  EXPECT_EQ(batch->block_table[0], 0);
}

TEST_F(LayerCacheHandleTest, LimitsAndBadInput) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto made = KVCache::Create(*client, Config());
  ASSERT_TRUE(made.ok());
  KVCache& cache = **made;
  EXPECT_EQ(LayerCacheHandle::Create(cache, {.max_batch = 0}).status().code(),
            Code::kInvalidArgument);
  auto handle = LayerCacheHandle::Create(cache, {.max_batch = 2, .max_blocks_per_sequence = 2});
  ASSERT_TRUE(handle.ok());
  EXPECT_EQ((*handle)->limits().max_new_tokens, 2u);
  ASSERT_OK(cache.AllocateFor(1, 32));
  ASSERT_OK(cache.AllocateFor(2, 33));  // 3 blocks: longer than a row
  const std::vector<uint64_t> one = {1}, long_row = {2}, unknown = {9}, three = {1, 1, 1};
  EXPECT_TRUE((*handle)->Acquire(0, one).ok());
  EXPECT_EQ((*handle)->Acquire(3, one).status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*handle)->Acquire(0, long_row).status().code(), Code::kInvalidArgument);
  EXPECT_EQ((*handle)->Acquire(0, unknown).status().code(), Code::kNotFound);
  EXPECT_EQ((*handle)->Acquire(0, three).status().code(), Code::kInvalidArgument);
  const std::vector<uint32_t> too_many = {33};
  EXPECT_EQ((*handle)->Acquire(0, one, too_many).status().code(), Code::kInvalidArgument);
  const std::vector<uint32_t> mismatched = {1, 1};
  EXPECT_EQ((*handle)->Acquire(0, one, mismatched).status().code(), Code::kInvalidArgument);
  const std::vector<uint32_t> over_slots = {3};  // 3 new tokens, 2 slots a batch
  EXPECT_EQ((*handle)->Acquire(0, one, over_slots).status().code(), Code::kInvalidArgument);
}

TEST_F(LayerCacheHandleTest, AcquireAllocatesNothing) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto made = KVCache::Create(*client, Config());
  ASSERT_TRUE(made.ok());
  KVCache& cache = **made;
  std::vector<uint64_t> ids;
  for (uint64_t id = 100; id < 132; ++id) {
    ASSERT_OK(cache.AllocateFor(id, 1 + id % 50));
    ids.push_back(id);
  }
  auto handle = LayerCacheHandle::Create(
      cache, {.max_batch = 32, .max_blocks_per_sequence = 8, .max_new_tokens = 64});
  ASSERT_TRUE(handle.ok());
  LayerCacheHandle& h = **handle;
  std::vector<uint32_t> fresh(ids.size(), 1);
  fresh[3] = 3;  // request 103 holds 4 tokens
  const std::span<const uint64_t> id_span(ids);

  // The counter sees this thread's allocations (a sanity check that it counts).
  size_t before = allocations_on_this_thread;
  auto* probe = new std::vector<int>(3);
  delete probe;
  ASSERT_GE(allocations_on_this_thread - before, 2u);

  int64_t checksum = 0;
  int failures = 0;
  before = allocations_on_this_thread;
  for (int step = 0; step < 100; ++step) {
    for (uint32_t layer = 0; layer < 3; ++layer) {
      Result<LayerBatchView> batch =
          step % 2 == 0 ? h.Acquire(layer, id_span) : h.Acquire(layer, id_span, fresh);
      if (!batch.ok()) {
        ++failures;
        continue;
      }
      checksum += batch->slot_mapping.back() + batch->context_lens[0] + batch->block_table[1];
    }
  }
  const size_t during = allocations_on_this_thread - before;
  EXPECT_EQ(during, 0u) << "Acquire allocated " << during << " times in 300 calls";
  EXPECT_EQ(failures, 0);
  EXPECT_NE(checksum, 0);
  ASSERT_TRUE(h.Acquire(2, id_span, fresh).ok());
}

}  // namespace
}  // namespace nanokv
