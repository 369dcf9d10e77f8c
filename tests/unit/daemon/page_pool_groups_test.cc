// PagePool's group free lists (page_pool_groups.cc and the hot path): a freed
// page stays with its group, another group gets it only recycled, a group's
// free page is taken back by id, and the counts say where every page is.
// Real host backend, as page_pool_test.cc.
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/node/page_pool.h"
#include "gpu/backend.h"
#include "tests/unit/daemon/page_pool_test_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

using pool_testing::CreateFailingBackend;
using pool_testing::kPage;
using pool_testing::Mapping;
using pool_testing::PagePoolTest;

constexpr GroupId kGroupA = 1;
constexpr GroupId kGroupB = 2;

bool operator==(PagePool::Owner a, PagePool::Owner b) {
  return a.group == b.group && a.free == b.free;
}

TEST_F(PagePoolTest, AFreedPageStaysWithItsGroup) {
  auto pool = MakePool(Config(8, 2));
  ASSERT_NE(pool, nullptr);
  auto a = pool->Allocate(kGroupA);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(pool->owner(*a) == (PagePool::Owner{kGroupA, false}));
  const gpu::PageHandle handle = pool->handle(*a);
  ASSERT_OK(pool->Free(*a));
  EXPECT_TRUE(pool->owner(*a) == (PagePool::Owner{kGroupA, true}));
  EXPECT_FALSE(pool->handle(*a).valid()) << "a free page has no handle to give out";
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.group_free_pages, 1u);
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_EQ(s.free_pages + s.granted_pages, s.created_pages);
  EXPECT_OK(pool->CheckInvariants());

  // Another group gets a never-used page, not A's.
  auto b = pool->Allocate(kGroupB);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(*b, *a);
  // A gets its own page back first, the same memory.
  PageId recycled = kNoPage;
  auto again = pool->Allocate(kGroupA, &recycled);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *a);
  EXPECT_EQ(pool->handle(*again), handle);
  EXPECT_EQ(recycled, kNoPage);
  s = pool->stats();
  EXPECT_EQ(s.group_free_pages, 0u);
  EXPECT_EQ(s.granted_pages, 2u);
  EXPECT_EQ(s.recycles, 0u);
  EXPECT_OK(pool->CheckInvariants());
}

// Invariant 5: a page reaches another group only as a fresh page.
TEST_F(PagePoolTest, AnotherGroupGetsAFreePageOnlyRecycled) {
  auto pool = MakePool(Config(4, 0));  // no reserve: every page is made on demand
  ASSERT_NE(pool, nullptr);
  std::vector<PageId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = pool->Allocate(kGroupA);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  const gpu::PageHandle old_handle = pool->handle(ids.back());
  Mapping old_page(*backend_, old_handle);  // as an engine of A keeps it mapped
  ASSERT_OK(old_page.status());
  ASSERT_OK(old_page.Write(0xAB));
  for (PageId id : ids) ASSERT_OK(pool->Free(id));
  EXPECT_EQ(pool->stats().group_free_pages, 4u);

  PageId recycled = kNoPage;
  auto b = pool->Allocate(kGroupB, &recycled);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, ids.back()) << "the newest free page of the other group goes first";
  EXPECT_EQ(recycled, *b) << "the caller must learn that A's page was recycled";
  const gpu::PageHandle new_handle = pool->handle(*b);
  ASSERT_TRUE(new_handle.valid());
  EXPECT_NE(new_handle, old_handle);
  EXPECT_EQ(backend_->ReleasePage(old_handle).code(), Code::kNotFound) << "not released";
  Mapping new_page(*backend_, new_handle);
  ASSERT_OK(new_page.status());
  auto fresh = new_page.Read();
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(*fresh, 0) << "group B received bytes group A wrote";
  auto kept = old_page.Read();
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, 0xAB) << "A's mapping keeps A's old page";
  EXPECT_TRUE(pool->owner(*b) == (PagePool::Owner{kGroupB, false}));

  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.recycles, 1u);
  EXPECT_EQ(s.created_pages, 4u);
  EXPECT_EQ(s.granted_pages, 1u);
  EXPECT_EQ(s.group_free_pages, 3u);
  EXPECT_EQ(s.sync_creates, 4u);
  EXPECT_OK(pool->CheckInvariants());
  // Freed, it joins B's list; A keeps its other three.
  ASSERT_OK(pool->Free(*b));
  EXPECT_TRUE(pool->owner(*b) == (PagePool::Owner{kGroupB, true}));
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, TakeGroupFreeTakesOnlyFromThatGroupsList) {
  auto pool = MakePool(Config(8, 2));
  ASSERT_NE(pool, nullptr);
  auto a = pool->Allocate(kGroupA);
  auto granted = pool->Allocate(kGroupA);
  ASSERT_TRUE(a.ok() && granted.ok());
  ASSERT_OK(pool->Free(*a));
  EXPECT_EQ(pool->TakeGroupFree(*a, kGroupB).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool->TakeGroupFree(*granted, kGroupA).code(), Code::kFailedPrecondition);
  EXPECT_EQ(pool->TakeGroupFree(7, kGroupA).code(), Code::kFailedPrecondition);  // never used
  EXPECT_EQ(pool->TakeGroupFree(8, kGroupA).code(), Code::kInvalidArgument);
  EXPECT_OK(pool->CheckInvariants());

  ASSERT_OK(pool->TakeGroupFree(*a, kGroupA));
  EXPECT_TRUE(pool->owner(*a) == (PagePool::Owner{kGroupA, false}));
  Status twice = pool->TakeGroupFree(*a, kGroupA);
  EXPECT_EQ(twice.code(), Code::kFailedPrecondition) << twice.ToString();
  EXPECT_NE(std::string(twice.message()).find("granted"), std::string::npos) << twice.ToString();
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.granted_pages, 2u);
  EXPECT_EQ(s.group_free_pages, 0u);
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, GroupListsGrowAndNoGroupIsRefused) {
  auto pool = MakePool(Config(8, 2));
  ASSERT_NE(pool, nullptr);
  std::vector<PageId> ids;
  for (GroupId group : {GroupId{0}, GroupId{100}, GroupId{7}, GroupId{1000}}) {
    auto id = pool->Allocate(group);
    ASSERT_TRUE(id.ok()) << group << ": " << id.status().ToString();
    ASSERT_OK(pool->Free(*id));
    EXPECT_TRUE(pool->owner(*id) == (PagePool::Owner{group, true})) << group;
    ids.push_back(*id);
  }
  EXPECT_OK(pool->CheckInvariants());
  EXPECT_EQ(pool->Allocate(kNoGroup).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(pool->owner(8) == PagePool::Owner{});
  EXPECT_EQ(pool->stats().group_free_pages, 4u);
  EXPECT_OK(pool->CheckInvariants());
}

// Issue 19 item 8: a page whose old memory a process still holds (StillHeld)
// is released but not replaced: a fresh page would put the device over its
// capacity. The id waits, counted as held after recycle, and no page is made
// in its room (not by a grant, not by the refill) until it is dropped.
TEST_F(PagePoolTest, ARecycleOfAStillHeldPageMakesNoPageUntilDropped) {
  auto pool = MakePool(Config(4, 2));
  ASSERT_NE(pool, nullptr);
  std::vector<PageId> held_ids;
  pool->SetStillHeld([&held_ids](PageId id) {
    held_ids.push_back(id);
    return true;
  });
  std::vector<PageId> ids;
  for (int i = 0; i < 4; ++i) {
    auto id = pool->Allocate(kGroupA);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  for (PageId id : ids) ASSERT_OK(pool->Free(id));

  PageId recycled = kNoPage;
  auto refused = pool->Allocate(kGroupB, &recycled);
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find(kHeldAfterRecycle), std::string_view::npos)
      << refused.status().ToString();
  EXPECT_EQ(refused.status().hint(), Hint::kRetryAfterForget);
  EXPECT_EQ(recycled, ids.back()) << "the released page is named, so its holders are told";
  EXPECT_EQ(held_ids, std::vector<PageId>{ids.back()});
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.held_after_recycle_pages, 1u);
  EXPECT_EQ(s.created_pages, 3u);
  EXPECT_LE(s.created_pages + s.creating_pages + s.held_after_recycle_pages, s.capacity_pages);
  EXPECT_OK(pool->CheckInvariants());

  // A's other free pages go the same way, each refused: never a fourth page.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(pool->Allocate(kGroupB).status().code(), Code::kResourceExhausted);
    s = pool->stats();
    EXPECT_LE(s.created_pages + s.creating_pages + s.held_after_recycle_pages, s.capacity_pages);
  }
  s = pool->stats();
  EXPECT_EQ(s.held_after_recycle_pages, 4u);
  EXPECT_EQ(s.created_pages, 0u);
  EXPECT_EQ(pool->Allocate(kGroupB).status().code(), Code::kResourceExhausted)
      << "nothing left to recycle, nothing may be made";
  EXPECT_OK(pool->CheckInvariants());

  // Dropped: the room comes back, for grants and the reserve alike.
  EXPECT_EQ(pool->DropHeldAfterRecycle(5).code(), Code::kFailedPrecondition);
  ASSERT_OK(pool->DropHeldAfterRecycle(1));
  auto b = pool->Allocate(kGroupB);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_OK(pool->DropHeldAfterRecycle(3));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool->Allocate(kGroupB).ok());
  s = pool->stats();
  EXPECT_EQ(s.held_after_recycle_pages, 0u);
  EXPECT_EQ(s.granted_pages, 4u);
  EXPECT_OK(pool->CheckInvariants());
}

// The one fault after a recycle released the old page: the fresh page cannot
// be made. The id leaves service, and the caller still learns which page's
// old memory its group must drop.
TEST_F(PagePoolTest, AFailedRecycleStillNamesTheReleasedPage) {
  CreateFailingBackend failing(*backend_);
  auto made = PagePool::Create(failing, Config(2, 0));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  PagePool& pool = **made;
  auto a = pool.Allocate(kGroupA);
  auto held = pool.Allocate(kGroupB);
  ASSERT_TRUE(a.ok() && held.ok());
  ASSERT_OK(pool.Free(*a));
  failing.FailCreates(1);
  PageId recycled = kNoPage;
  auto b = pool.Allocate(kGroupB, &recycled);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), Code::kOutOfMemory) << b.status().ToString();
  EXPECT_EQ(b.status().call(), "CreatePage") << b.status().ToString();
  EXPECT_EQ(recycled, *a);
  EXPECT_TRUE(pool.owner(*a) == PagePool::Owner{});
  PagePool::Stats s = pool.stats();
  EXPECT_EQ(s.created_pages, 1u);
  EXPECT_EQ(s.create_failures, 1u);
  EXPECT_EQ(s.group_free_pages, 0u);
  EXPECT_EQ(s.recycles, 0u);
  EXPECT_OK(pool.CheckInvariants());
  // The id is uncreated now: the next grant makes a fresh page under it.
  recycled = kNoPage;
  auto again = pool.Allocate(kGroupB, &recycled);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *a);
  EXPECT_EQ(recycled, kNoPage);
  EXPECT_OK(pool.CheckInvariants());
}

// Threads as groups on a pool too small for all: grants recycle each other's
// free pages all the time. No page is ever granted twice, every grant is to
// the group asking, and the recycles the callers learn of are the pool's.
TEST_F(PagePoolTest, ConcurrentGroupsNeverShareAPage) {
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 20000;
  constexpr size_t kCapacity = 8;
  auto pool = MakePool(Config(kCapacity, 2));
  ASSERT_NE(pool, nullptr);
  std::vector<std::atomic<int>> owner(kCapacity);
  for (auto& o : owner) o.store(0);
  std::atomic<uint64_t> grants{0}, recycled_grants{0}, errors{0};
  std::atomic<bool> stop_checker{false};

  auto worker = [&](int thread) {
    const auto group = static_cast<GroupId>(thread);
    std::mt19937 rng(99 + thread);
    std::vector<PageId> held;
    for (int op = 0; op < kOpsPerThread; ++op) {
      if (held.empty() || (rng() % 100 < 50 && held.size() < 3)) {
        PageId recycled = kNoPage;
        auto id = pool->Allocate(group, &recycled);
        if (!id.ok()) {
          if (id.status().code() != Code::kResourceExhausted) errors++;
          continue;
        }
        int expected = 0;
        if (*id >= kCapacity || !owner[*id].compare_exchange_strong(expected, thread + 1)) {
          errors++;
          continue;
        }
        if (!(pool->owner(*id) == PagePool::Owner{group, false})) errors++;
        if (recycled != kNoPage) {
          if (recycled != *id) errors++;
          recycled_grants++;
        }
        held.push_back(*id);
        grants++;
      } else {
        const size_t at = rng() % held.size();
        const PageId id = held[at];
        held[at] = held.back();
        held.pop_back();
        if (owner[id].exchange(0) != thread + 1) errors++;
        if (!pool->Free(id).ok()) errors++;
      }
    }
    for (PageId id : held) {
      if (owner[id].exchange(0) != thread + 1) errors++;
      if (!pool->Free(id).ok()) errors++;
    }
  };

  std::atomic<uint64_t> checker_failures{0};
  std::thread checker([&] {
    while (!stop_checker.load()) {
      if (!pool->CheckInvariants().ok()) checker_failures++;
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
  EXPECT_GT(grants.load(), 0u);
  EXPECT_GT(recycled_grants.load(), 0u) << "the pool never had to recycle: too large a test pool";
  PagePool::Stats s = pool->stats();
  EXPECT_EQ(s.recycles, recycled_grants.load());
  EXPECT_EQ(s.granted_pages, 0u);
  EXPECT_EQ(s.free_pages, s.created_pages);
  EXPECT_EQ(s.create_failures, 0u);
  EXPECT_OK(pool->CheckInvariants());
}

}  // namespace
}  // namespace nanokv::kvd
