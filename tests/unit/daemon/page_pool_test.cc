// PagePool against the real host backend (memfd pages with the CUDA rules and
// per-device memory accounting), on a small simulated device of 64 MiB =
// 32 pages of 2 MiB. Waits on the refill thread are bounded polls of exact
// counts; nothing here asserts a duration.
#include "daemon/node/page_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "tests/unit/daemon/page_pool_test_util.h"
#include "tests/util/status_matchers.h"
#include "tests/util/thread_sleeps.h"

namespace nanokv::kvd {
namespace {

using pool_testing::kDeviceBytes;
using pool_testing::kGroup;
using pool_testing::kMiB;
using pool_testing::kPage;
using pool_testing::Mapping;
using pool_testing::PagePoolTest;
using pool_testing::WaitFor;

TEST_F(PagePoolTest, ReserveIsCreatedUpFront) {
  auto pool = MakePool(Config(16, 4));
  ASSERT_NE(pool, nullptr);
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.capacity_pages, 16u);
  EXPECT_EQ(s.reserve_pages, 4u);
  EXPECT_EQ(s.created_pages, 4u);
  EXPECT_EQ(s.free_pages, 4u);
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_EQ(s.background_creates, 4u);
  EXPECT_EQ(s.sync_creates, 0u);
  // The pages really exist on the device: its memory is taken.
  EXPECT_EQ(DeviceFreeBytes(), kDeviceBytes - 4 * kPage);
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, RefillsReserveInBackground) {
  auto pool = MakePool(Config(16, 4));
  ASSERT_NE(pool, nullptr);
  std::vector<PageId> held;
  for (int i = 0; i < 4; ++i) {
    auto id = pool->Allocate(kGroup);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(pool->handle(*id).valid());
    held.push_back(*id);
  }
  // The four grants came from the reserve made at Create: no sync creation.
  EXPECT_EQ(pool->stats().sync_creates, 0u);
  ASSERT_TRUE(WaitFor([&] { return pool->stats().free_pages == 4; }))
      << "free_pages stuck at " << pool->stats().free_pages;
  PagePool::Stats s = pool->stats();
  // Only the refill thread adds free pages, and it stops at the reserve.
  EXPECT_EQ(s.created_pages, 8u);
  EXPECT_EQ(s.granted_pages, 4u);
  EXPECT_EQ(s.background_creates, 8u);
  EXPECT_EQ(s.sync_creates, 0u);
  EXPECT_OK(pool->CheckInvariants());
  // A second dip below the reserve wakes the thread again (no lost wake-up).
  for (int i = 0; i < 4; ++i) {
    auto id = pool->Allocate(kGroup);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    held.push_back(*id);
  }
  ASSERT_TRUE(WaitFor([&] { return pool->stats().free_pages == 4; }))
      << "second refill: free_pages stuck at " << pool->stats().free_pages;
  s = pool->stats();
  EXPECT_EQ(s.created_pages, 12u);
  EXPECT_EQ(s.background_creates, 12u);
  EXPECT_EQ(s.sync_creates, 0u);
  for (PageId id : held) EXPECT_OK(pool->Free(id));
  s = pool->stats();
  EXPECT_EQ(s.free_pages, 12u);
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, ZeroReserveCreatesSynchronouslyAndCountsIt) {
  auto pool = MakePool(Config(4, 0));
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->stats().created_pages, 0u);
  auto a = pool->Allocate(kGroup);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(pool->stats().sync_creates, 1u);
  EXPECT_OK(pool->Free(*a));
  auto b = pool->Allocate(kGroup);  // reuses the freed page
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, *a);
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.sync_creates, 1u);
  EXPECT_EQ(s.created_pages, 1u);
  EXPECT_EQ(s.background_creates, 0u);
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, ExhaustedAtCapacity) {
  auto pool = MakePool(Config(16, 4));
  ASSERT_NE(pool, nullptr);
  std::vector<PageId> held;
  for (int i = 0; i < 16; ++i) {
    auto id = pool->Allocate(kGroup);
    ASSERT_TRUE(id.ok()) << "grant " << i << ": " << id.status().ToString();
    held.push_back(*id);
  }
  auto over = pool->Allocate(kGroup);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted) << over.status().ToString();
  const std::string message(over.status().message());
  EXPECT_NE(message.find("device 0"), std::string::npos) << message;
  EXPECT_NE(message.find("16 of 16 pages"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(16 * kPage) + " bytes"), std::string::npos) << message;
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.created_pages, 16u);
  EXPECT_EQ(s.granted_pages, 16u);
  EXPECT_EQ(s.free_pages, 0u);
  EXPECT_EQ(s.create_failures, 0u);
  // Every id in [0, 16) was handed out exactly once.
  std::vector<bool> seen(16, false);
  for (PageId id : held) {
    ASSERT_LT(id, 16u);
    EXPECT_FALSE(seen[id]) << "id " << id << " granted twice";
    seen[id] = true;
  }
  EXPECT_OK(pool->CheckInvariants());
  // Exhaustion is not sticky: a freed page is granted again.
  ASSERT_OK(pool->Free(held.back()));
  auto again = pool->Allocate(kGroup);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, held.back());
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, CapacityAsFractionOfDeviceMemory) {
  PagePoolConfig config;
  config.page_bytes = kPage;
  config.gpu_utilization = 0.5;  // 32 MiB of 64
  auto pool = MakePool(config);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->stats().capacity_pages, 16u);

  config.gpu_utilization = 0.95;  // 60.8 MiB rounds down to 30 pages
  auto defaulted = MakePool(config);
  ASSERT_NE(defaulted, nullptr);
  EXPECT_EQ(defaulted->stats().capacity_pages, 30u);
  EXPECT_EQ(PagePoolConfig{}.gpu_utilization, 0.95);

  for (double bad : {0.0, -0.5, 1.5}) {
    config.gpu_utilization = bad;
    auto refused = PagePool::Create(*backend_, config);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();
  }
}

TEST_F(PagePoolTest, CapacityUnderOnePageIsRefused) {
  PagePoolConfig config = Config(0, 0);
  config.capacity_bytes = kPage - 1;
  auto pool = PagePool::Create(*backend_, config);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), Code::kInvalidArgument);
  EXPECT_NE(std::string(pool.status().message()).find("holds no page"), std::string::npos)
      << pool.status().ToString();
}

TEST_F(PagePoolTest, PageSizeNotMultipleOfGranularityIsRefused) {
  for (size_t page_bytes : {size_t{0}, kMiB, 3 * kMiB}) {
    PagePoolConfig config = Config(4, 1);
    config.page_bytes = page_bytes;
    auto pool = PagePool::Create(*backend_, config);
    ASSERT_FALSE(pool.ok()) << page_bytes;
    EXPECT_EQ(pool.status().code(), Code::kInvalidArgument) << pool.status().ToString();
  }
  // A multiple of the granularity is fine.
  PagePoolConfig config = Config(0, 1);
  config.page_bytes = 2 * kPage;
  config.capacity_bytes = 4 * kPage;
  auto pool = MakePool(config);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->stats().capacity_pages, 2u);
}

TEST_F(PagePoolTest, UnknownDeviceIsRefused) {
  PagePoolConfig config = Config(4, 1);
  config.device = 3;
  auto pool = PagePool::Create(*backend_, config);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), Code::kNotFound) << pool.status().ToString();
}

TEST_F(PagePoolTest, ReserveIsClampedToCapacity) {
  auto pool = MakePool(Config(3, 100));
  ASSERT_NE(pool, nullptr);
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.reserve_pages, 3u);
  EXPECT_EQ(s.created_pages, 3u);
}

TEST_F(PagePoolTest, DeviceMemoryRunsOutBeforeCapacity) {
  // 64 pages of capacity on a device that holds 32.
  auto pool = MakePool(Config(64, 4));
  ASSERT_NE(pool, nullptr);
  std::vector<PageId> held;
  Status failure;
  // Allocate until the device is full. Our failure can race with the refill
  // thread's last page still landing (it holds the device's last bytes), so
  // stop only once nothing is free and no creation is in flight.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline && held.size() <= 64) {
    auto id = pool->Allocate(kGroup);
    if (id.ok()) {
      held.push_back(*id);
      continue;
    }
    failure = id.status();
    PagePool::Stats s = pool->stats();
    if (s.free_pages == 0 && s.creating_pages == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(held.size(), 32u) << failure.ToString();
  EXPECT_EQ(failure.code(), Code::kOutOfMemory) << failure.ToString();
  // The backend's call and error name survive, with our context added.
  EXPECT_EQ(failure.call(), "CreatePage") << failure.ToString();
  EXPECT_NE(std::string(failure.message()).find("page pool on device 0"), std::string::npos)
      << failure.ToString();
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.created_pages, 32u);
  EXPECT_EQ(s.granted_pages, 32u);
  EXPECT_EQ(s.free_pages, 0u);
  EXPECT_GE(s.create_failures, 1u);
  EXPECT_OK(pool->CheckInvariants());

  // Freed pages are granted again, and the pool stays consistent.
  ASSERT_OK(pool->Free(held.back()));
  held.pop_back();
  auto again = pool->Allocate(kGroup);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  held.push_back(*again);
  EXPECT_OK(pool->CheckInvariants());
  for (PageId id : held) EXPECT_OK(pool->Free(id));
  s = pool->stats();
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_EQ(s.free_pages, 32u);
  EXPECT_EQ(s.created_pages, 32u);
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, RefillBacksOffWhileDeviceIsFull) {
  auto pool = MakePool(Config(64, 4));
  ASSERT_NE(pool, nullptr);
  // Fill the device with pages the pool does not own.
  std::vector<gpu::PageHandle> squatters;
  for (;;) {
    auto page = backend_->CreatePage(0, kPage);
    if (!page.ok()) break;
    squatters.push_back(*page);
  }
  ASSERT_EQ(squatters.size(), 28u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool->Allocate(kGroup).ok());  // empties the reserve
  // Each refill attempt fails, and the refill thread sleeps before the next
  // (its back-off) where a spinning one would retry at once: over four more
  // failed attempts it went to sleep at least three times. Counted from the
  // sixth failure on, when each wait is long enough (32 ms) to block for sure.
  ASSERT_TRUE(WaitFor([&] { return pool->stats().create_failures >= 6; }));
  std::optional<uint64_t> sleeps_before = nanokv::testing::VoluntarySwitches("nanokv-refill");
  const uint64_t failures_before = pool->stats().create_failures;
  ASSERT_TRUE(WaitFor([&] { return pool->stats().create_failures >= failures_before + 4; }));
  const uint64_t failures = pool->stats().create_failures - failures_before;
  std::optional<uint64_t> sleeps_after = nanokv::testing::VoluntarySwitches("nanokv-refill");
  ASSERT_TRUE(sleeps_before && sleeps_after) << "no single thread named nanokv-refill";
  EXPECT_GE(*sleeps_after - *sleeps_before, failures - 1) << "the refill thread retries without waiting";
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.created_pages, 4u);
  EXPECT_OK(pool->CheckInvariants());
  // Room comes back: the refill thread recovers on its own.
  for (gpu::PageHandle page : squatters) ASSERT_OK(backend_->ReleasePage(page));
  ASSERT_TRUE(WaitFor([&] { return pool->stats().free_pages == 4; }))
      << "free_pages stuck at " << pool->stats().free_pages;
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, CreateFailsWhenReserveDoesNotFit) {
  auto pool = PagePool::Create(*backend_, Config(64, 40));  // 40 pages, device holds 32
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), Code::kOutOfMemory) << pool.status().ToString();
  // The pages made before the failure were released.
  EXPECT_EQ(DeviceFreeBytes(), kDeviceBytes);
}

TEST_F(PagePoolTest, DoubleFreeAndBadIdsAreRefused) {
  auto pool = MakePool(Config(8, 2));
  ASSERT_NE(pool, nullptr);
  auto id = pool->Allocate(kGroup);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_OK(pool->Free(*id));
  Status twice = pool->Free(*id);
  EXPECT_EQ(twice.code(), Code::kFailedPrecondition) << twice.ToString();
  EXPECT_NE(std::string(twice.message()).find("double free"), std::string::npos)
      << twice.ToString();
  EXPECT_EQ(pool->Free(8).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool->Free(UINT32_MAX).code(), Code::kInvalidArgument);
  EXPECT_EQ(pool->Free(7).code(), Code::kFailedPrecondition);  // never created
  // The reserve made ids 0 and 1 (7 is never created): the one not granted
  // sits on the free stack, no group's, and is not anyone's to free.
  const PageId never_granted = *id == 0 ? 1 : 0;
  EXPECT_EQ(pool->Free(never_granted).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool->Recycle(*id).code(), Code::kFailedPrecondition);  // free, not granted
  EXPECT_EQ(pool->Recycle(8).code(), Code::kInvalidArgument);
  EXPECT_FALSE(pool->handle(*id).valid());
  EXPECT_FALSE(pool->handle(8).valid());
  // None of it changed the counts.
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_EQ(s.free_pages, s.created_pages);
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, RecycleGivesAFreshPhysicalPage) {
  auto pool = MakePool(Config(8, 2));
  ASSERT_NE(pool, nullptr);
  auto id = pool->Allocate(kGroup);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const gpu::PageHandle old_handle = pool->handle(*id);
  ASSERT_TRUE(old_handle.valid());
  Mapping old_page(*backend_, old_handle);
  ASSERT_OK(old_page.status());
  ASSERT_OK(old_page.Write(0xAB));
  auto written = old_page.Read();
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_EQ(*written, 0xAB);
  // Let the refill settle, so the page count below changes only by Recycle.
  ASSERT_TRUE(WaitFor([&] { return pool->stats().free_pages == 2; }));
  const size_t created_before = pool->stats().created_pages;

  ASSERT_OK(pool->Recycle(*id));
  const gpu::PageHandle new_handle = pool->handle(*id);
  ASSERT_TRUE(new_handle.valid());
  EXPECT_NE(new_handle, old_handle);
  Mapping new_page(*backend_, new_handle);
  ASSERT_OK(new_page.status());
  auto fresh = new_page.Read();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(*fresh, 0) << "the recycled id still shows the old page's bytes";
  // The old mapping still holds the old memory (backend.h rule 3): two pages.
  auto kept = old_page.Read();
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, 0xAB);
  // The old handle is gone from the backend: the pool released it.
  EXPECT_EQ(backend_->ReleasePage(old_handle).code(), Code::kNotFound);

  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.recycles, 1u);
  EXPECT_EQ(s.created_pages, created_before);
  EXPECT_EQ(s.granted_pages, 1u);
  EXPECT_OK(pool->CheckInvariants());
  EXPECT_OK(pool->Free(*id));
}

TEST_F(PagePoolTest, RecycleWorksOnAFullDevice) {
  auto pool = MakePool(Config(32, 32));  // every byte of the device
  ASSERT_NE(pool, nullptr);
  auto id = pool->Allocate(kGroup);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(DeviceFreeBytes(), 0u);
  EXPECT_OK(pool->Recycle(*id));  // releases first, so there is room
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, DestructorReleasesEveryPageGrantedOrNot) {
  {
    auto pool = MakePool(Config(16, 4));
    ASSERT_NE(pool, nullptr);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool->Allocate(kGroup).ok());
    EXPECT_LT(DeviceFreeBytes(), kDeviceBytes);
  }
  EXPECT_EQ(DeviceFreeBytes(), kDeviceBytes);
}

TEST_F(PagePoolTest, ConcurrentAllocateFreeNeverSharesAPage) {
  constexpr int kThreads = 8;
  constexpr int kOpsPerThread = 50000;
  constexpr size_t kCapacity = 32;
  auto pool = MakePool(Config(kCapacity, 4));
  ASSERT_NE(pool, nullptr);
  // owner[id] is the thread holding id, plus one; 0 when nobody does.
  std::vector<std::atomic<int>> owner(kCapacity);
  for (auto& o : owner) o.store(0);
  std::atomic<uint64_t> grants{0}, frees{0}, exhausted{0}, recycles{0}, errors{0};
  std::atomic<bool> stop_checker{false};

  auto worker = [&](int thread) {
    std::mt19937 rng(1234 + thread);
    std::vector<PageId> held;
    for (int op = 0; op < kOpsPerThread; ++op) {
      const uint32_t dice = rng() % 100;
      if (held.empty() || (dice < 52 && held.size() < 8)) {
        auto id = pool->Allocate(kGroup);
        if (!id.ok()) {
          (id.status().code() == Code::kResourceExhausted ? exhausted : errors)++;
          continue;
        }
        int expected = 0;
        if (*id >= kCapacity || !owner[*id].compare_exchange_strong(expected, thread + 1)) {
          errors++;  // granted while another thread holds it
          continue;
        }
        held.push_back(*id);
        grants++;
      } else if (dice == 99) {
        // Recycle keeps the grant; the id must still be ours afterwards.
        const PageId id = held[rng() % held.size()];
        if (pool->Recycle(id).ok()) {
          recycles++;
        } else {
          errors++;
        }
        if (owner[id].load() != thread + 1) errors++;
      } else {
        const size_t at = rng() % held.size();
        const PageId id = held[at];
        held[at] = held.back();
        held.pop_back();
        // Give up ownership before Free: after it, another thread may get it.
        if (owner[id].exchange(0) != thread + 1) errors++;
        if (pool->Free(id).ok()) {
          frees++;
        } else {
          errors++;
        }
      }
    }
    for (PageId id : held) {
      if (owner[id].exchange(0) != thread + 1) errors++;
      if (pool->Free(id).ok()) {
        frees++;
      } else {
        errors++;
      }
    }
  };

  // A ninth thread reads stats and checks invariants while the others run.
  std::atomic<uint64_t> checker_failures{0};
  std::thread checker([&] {
    while (!stop_checker.load()) {
      if (!pool->CheckInvariants().ok()) checker_failures++;
      PagePool::Stats s = pool->stats();
      if (s.free_pages + s.granted_pages != s.created_pages || s.created_pages > kCapacity) {
        checker_failures++;
      }
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();
  stop_checker.store(true);
  checker.join();

  EXPECT_EQ(errors.load(), 0u);
  EXPECT_EQ(checker_failures.load(), 0u);
  EXPECT_EQ(grants.load(), frees.load());
  EXPECT_GT(grants.load(), 0u);
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_EQ(s.free_pages, s.created_pages);
  EXPECT_LE(s.created_pages, kCapacity);
  EXPECT_EQ(s.recycles, recycles.load());
  EXPECT_EQ(s.create_failures, 0u);
  // Every page ever made is either still there or was released by a recycle.
  EXPECT_EQ(s.created_pages, s.background_creates + s.sync_creates);
  EXPECT_EQ(DeviceFreeBytes(), kDeviceBytes - s.created_pages * kPage);
  for (auto& o : owner) EXPECT_EQ(o.load(), 0);
  EXPECT_OK(pool->CheckInvariants());
  std::printf("grants %llu, exhausted %llu, recycles %llu, sync_creates %llu\n",
              static_cast<unsigned long long>(grants.load()),
              static_cast<unsigned long long>(exhausted.load()),
              static_cast<unsigned long long>(recycles.load()),
              static_cast<unsigned long long>(s.sync_creates));
}

}  // namespace
}  // namespace nanokv::kvd
