// The object store's per-owner payload space (issue 19 item 12): pages hold
// one owner's ranges each, one owner's small ranges still share pages, and
// pages go back to the shared pool when empty unless held. Checked against
// a model of which owner has each alignment unit.
#include "daemon/objects/owned_space.h"

#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

constexpr uint64_t kAlign = 256;
constexpr uint64_t kPageBytes = 16 * kAlign;  // 16 units a page
constexpr uint32_t kA = 1001, kB = 1002, kOperator = UINT32_MAX;

uint64_t PageOf(uint64_t offset) { return offset / kPageBytes; }

TEST(OwnedSpaceTest, RejectsBadParameters) {
  EXPECT_EQ(OwnedSpace::Create(8 * kPageBytes, kPageBytes, 100).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OwnedSpace::Create(8 * kPageBytes, 1000, 256).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OwnedSpace::Create(kPageBytes - 1, kPageBytes, kAlign).status().code(), Code::kInvalidArgument);
  auto s = OwnedSpace::Create(8 * kPageBytes + 5, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->capacity(), 8 * kPageBytes);
  EXPECT_EQ(s->Allocate(kA, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(s->Free(0).code(), Code::kFailedPrecondition);
  EXPECT_EQ(s->Hold(0).code(), Code::kFailedPrecondition) << "nobody owns page 0";
}

TEST(OwnedSpaceTest, OneOwnersSmallRangesShareAPageTwoOwnersNever) {
  auto s = OwnedSpace::Create(8 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  auto a1 = s->Allocate(kA, 100), a2 = s->Allocate(kA, 300), b1 = s->Allocate(kB, 100);
  auto o1 = s->Allocate(kOperator, 10);
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok() && o1.ok());
  EXPECT_EQ(PageOf(*a1), PageOf(*a2)) << "one owner packs as before";
  EXPECT_NE(PageOf(*a1), PageOf(*b1));
  EXPECT_NE(PageOf(*o1), PageOf(*a1));
  EXPECT_NE(PageOf(*o1), PageOf(*b1));
  EXPECT_EQ(s->PageOwner(PageOf(*a1)), kA);
  EXPECT_EQ(s->PageOwner(PageOf(*b1)), kB);
  EXPECT_EQ(s->OwnedPages(), (std::map<uint32_t, uint32_t>{{kA, 1}, {kB, 1}, {kOperator, 1}}));
  EXPECT_EQ(s->shared_free_pages(), 5u);
  // A large range takes a run of fresh pages; its tail page serves its
  // owner's next small range, never another's.
  auto big = s->Allocate(kA, 2 * kPageBytes + 100);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(*big % kPageBytes, 0u) << "B's page is after A's: a fresh run";
  EXPECT_EQ(s->PageOwner(PageOf(*big) + 2), kA);
  auto tail = s->Allocate(kA, 1000);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(s->PageOwner(PageOf(*tail)), kA);
  auto b2 = s->Allocate(kB, 3000);
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(PageOf(*b2), PageOf(*b1)) << "B's page still has room";
  ASSERT_OK(s->CheckInvariants());
}

// One owner packs as one allocator over the whole space did: a range too
// long for its holes starts in the free tail of its last page and takes the
// free pages after it, instead of a fresh run that leaves the tail empty.
TEST(OwnedSpaceTest, AnOwnersHoleGrowsIntoTheFreePagesNextToIt) {
  auto s = OwnedSpace::Create(4 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  auto first = s->Allocate(kA, kPageBytes + kPageBytes / 2);
  ASSERT_TRUE(first.ok());
  auto second = s->Allocate(kA, kPageBytes + kPageBytes / 2);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, *first + kPageBytes + kPageBytes / 2) << "right after the first, in its tail page";
  EXPECT_EQ(s->shared_free_pages(), 1u);
  // Another owner's pages in the way: no growing into them.
  auto b = s->Allocate(kB, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(s->Allocate(kA, kPageBytes).status().code(), Code::kResourceExhausted);
  ASSERT_OK(s->CheckInvariants());
}

// In a large space a second owner's first run goes in the middle of the
// free room, so both grow into free pages after their own instead of
// leaving each other's tail pages stranded.
TEST(OwnedSpaceTest, OwnersGrowApartInALargeSpace) {
  auto s = OwnedSpace::Create(64 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  const uint64_t bytes = kPageBytes + kPageBytes / 2;
  auto a1 = s->Allocate(kA, bytes), b1 = s->Allocate(kB, bytes);
  ASSERT_TRUE(a1.ok() && b1.ok());
  EXPECT_EQ(*a1, 0u);
  EXPECT_GE(PageOf(*b1), 16u) << "B starts apart from A";
  auto a2 = s->Allocate(kA, bytes), b2 = s->Allocate(kB, bytes);
  ASSERT_TRUE(a2.ok() && b2.ok());
  EXPECT_EQ(*a2, *a1 + bytes) << "A's second starts in its first's tail page";
  EXPECT_EQ(*b2, *b1 + bytes);
  EXPECT_EQ(s->OwnedPages(), (std::map<uint32_t, uint32_t>{{kA, 3}, {kB, 3}}));
  ASSERT_OK(s->CheckInvariants());
}

TEST(OwnedSpaceTest, EmptyPagesReturnUnlessHeld) {
  auto s = OwnedSpace::Create(2 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  auto a = s->Allocate(kA, 100);
  ASSERT_TRUE(a.ok());
  ASSERT_OK(s->Hold(PageOf(*a)));
  ASSERT_OK(s->Hold(PageOf(*a)));  // a second holder
  ASSERT_OK(s->Free(*a));
  EXPECT_EQ(s->PageOwner(PageOf(*a)), kA) << "held: stays A's, empty";
  auto b = s->Allocate(kB, 2 * kPageBytes);
  EXPECT_EQ(b.status().code(), Code::kResourceExhausted) << "B never gets A's held page";
  EXPECT_NE(b.status().message().find("uid 1002"), std::string::npos) << b.status().ToString();
  auto again = s->Allocate(kA, 200);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(PageOf(*again), PageOf(*a)) << "A's own objects reuse it";
  ASSERT_OK(s->Free(*again));
  ASSERT_OK(s->CheckInvariants());
  s->Unhold(PageOf(*a));
  EXPECT_EQ(s->PageOwner(PageOf(*a)), kA) << "one holder left";
  s->Unhold(PageOf(*a));
  EXPECT_TRUE(s->OwnedPages().empty()) << "idle: free for anyone";
  EXPECT_EQ(s->shared_free_pages(), 2u);
  auto a_again = s->Allocate(kA, 100);
  ASSERT_TRUE(a_again.ok());
  EXPECT_EQ(PageOf(*a_again), PageOf(*a)) << "still in A's allocator until another owner needs it";
  ASSERT_OK(s->Free(*a_again));
  auto b_now = s->Allocate(kB, 2 * kPageBytes);
  ASSERT_TRUE(b_now.ok()) << b_now.status().ToString();
  ASSERT_OK(s->CheckInvariants());
  ASSERT_OK(s->Free(*b_now));
  EXPECT_EQ(s->shared_free_pages(), 2u);
  EXPECT_TRUE(s->OwnedPages().empty());
}

// An empty page of A's that only B holds (B's producer has its fd) may
// become B's: then B's ranges use it; a page with a live range, or with a
// second holder, may not.
TEST(OwnedSpaceTest, AnEmptyPageWithOneHoldIsAdoptedByItsHoldersOwner) {
  auto s = OwnedSpace::Create(2 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  auto a = s->Allocate(kA, kPageBytes);
  ASSERT_TRUE(a.ok());
  auto other = s->Allocate(kA, kPageBytes);
  ASSERT_TRUE(other.ok());
  ASSERT_OK(s->Hold(PageOf(*a)));
  EXPECT_EQ(s->Adopt(PageOf(*a), kB).code(), Code::kFailedPrecondition) << "a live range in it";
  ASSERT_OK(s->Free(*a));
  ASSERT_OK(s->Hold(PageOf(*a)));
  EXPECT_EQ(s->Adopt(PageOf(*a), kB).code(), Code::kFailedPrecondition) << "two holders";
  s->Unhold(PageOf(*a));
  EXPECT_EQ(s->Allocate(kB, 100).status().code(), Code::kResourceExhausted) << "held: still A's";
  ASSERT_OK(s->Adopt(PageOf(*a), kB));
  EXPECT_EQ(s->PageOwner(PageOf(*a)), kB);
  ASSERT_OK(s->CheckInvariants());
  auto b = s->Allocate(kB, kPageBytes);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(PageOf(*b), PageOf(*a));
  EXPECT_EQ(s->Adopt(PageOf(*other), kB).code(), Code::kFailedPrecondition) << "A's live page";
  ASSERT_OK(s->Free(*b));
  s->Unhold(PageOf(*a));
  ASSERT_OK(s->Free(*other));
  ASSERT_OK(s->CheckInvariants());
  EXPECT_EQ(s->shared_free_pages(), 2u);
}

TEST(OwnedSpaceTest, TakenPagesLeaveThePayloadForGood) {
  auto s = OwnedSpace::Create(3 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  auto taken = s->TakePage();
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(s->capacity(), 2 * kPageBytes);
  EXPECT_FALSE(s->PageOwner(PageOf(*taken)).has_value());
  auto a = s->Allocate(kA, 2 * kPageBytes);
  ASSERT_TRUE(a.ok());
  EXPECT_NE(PageOf(*a), PageOf(*taken));
  EXPECT_NE(PageOf(*a) + 1, PageOf(*taken));
  EXPECT_EQ(s->TakePage().status().code(), Code::kResourceExhausted);
  ASSERT_OK(s->CheckInvariants());
}

// Random ranges of three owners, holds coming and going: no page ever holds
// two owners' units, a refusal means neither the owner's pages nor the pool
// had room, and the invariants hold throughout.
TEST(OwnedSpaceTest, RandomizedAgainstAModel) {
  constexpr uint64_t kPages = 64, kUnitsPerPage = kPageBytes / kAlign;
  const uint32_t owners[] = {kA, kB, kOperator};
  for (uint32_t seed : {1u, 7u, 42u}) {
    auto s = OwnedSpace::Create(kPages * kPageBytes, kPageBytes, kAlign);
    ASSERT_TRUE(s.ok());
    std::vector<int64_t> unit(kPages * kUnitsPerPage, -1);  // the owner's uid, -1 free
    struct Range { uint64_t offset, units; uint32_t owner; };
    std::vector<Range> live;
    std::vector<uint64_t> held;
    std::mt19937_64 rng(seed);
    for (int step = 0; step < 8000; ++step) {
      const uint64_t dice = rng() % 100;
      if (live.empty() || dice < 50) {
        const uint32_t owner = owners[rng() % 3];
        const uint64_t bytes = rng() % 8 == 0 ? 1 + rng() % (3 * kPageBytes) : 1 + rng() % (3 * kAlign);
        const uint64_t units = (bytes + kAlign - 1) / kAlign;
        auto off = s->Allocate(owner, bytes);
        if (!off.ok()) {
          ASSERT_EQ(off.status().code(), Code::kResourceExhausted);
          // The owner's own pages: no run of free units long enough.
          uint64_t run = 0, pool_run = 0;
          for (uint64_t u = 0; u < unit.size(); ++u) {
            const bool mine = s->PageOwner(u / kUnitsPerPage) == owner && unit[u] == -1;
            run = mine ? run + 1 : 0;
            ASSERT_LT(run, units) << "seed " << seed << " step " << step << ": refused with a hole of its own";
          }
          const uint64_t pages_needed = (bytes + kPageBytes - 1) / kPageBytes;
          for (uint64_t p = 0; p < kPages; ++p) {
            pool_run = s->PageOwner(p).has_value() ? 0 : pool_run + 1;
            ASSERT_LT(pool_run, pages_needed) << "seed " << seed << " step " << step << ": refused with free pages";
          }
          continue;
        }
        for (uint64_t u = *off / kAlign; u < *off / kAlign + units; ++u) {
          ASSERT_EQ(unit[u], -1) << "seed " << seed << " step " << step << ": overlap";
          unit[u] = owner;
        }
        live.push_back({*off, units, owner});
      } else if (dice < 90) {
        const size_t i = rng() % live.size();
        const Range r = live[i];
        live[i] = live.back();
        live.pop_back();
        ASSERT_OK(s->Free(r.offset));
        for (uint64_t u = r.offset / kAlign; u < r.offset / kAlign + r.units; ++u) unit[u] = -1;
      } else if (dice < 95 && !live.empty()) {
        const uint64_t page = PageOf(live[rng() % live.size()].offset);
        ASSERT_OK(s->Hold(page));
        held.push_back(page);
      } else if (!held.empty()) {
        const size_t i = rng() % held.size();
        s->Unhold(held[i]);
        held[i] = held.back();
        held.pop_back();
      }
      // One owner per page, and the space agrees on whose.
      for (uint64_t p = 0; p < kPages; ++p) {
        for (uint64_t u = p * kUnitsPerPage; u < (p + 1) * kUnitsPerPage; ++u) {
          if (unit[u] == -1) continue;
          ASSERT_EQ(s->PageOwner(p), static_cast<uint32_t>(unit[u])) << "seed " << seed << " step " << step;
        }
      }
      if (step % 32 == 0) {
        Status ok = s->CheckInvariants();
        ASSERT_TRUE(ok.ok()) << "seed " << seed << " step " << step << ": " << ok.ToString();
      }
    }
    for (uint64_t page : held) s->Unhold(page);
    for (const Range& r : live) ASSERT_OK(s->Free(r.offset));
    ASSERT_OK(s->CheckInvariants());
    EXPECT_EQ(s->shared_free_pages(), kPages) << "every page back in the pool";
  }
}

// A kvd restart rebuilds the space from the objects it recovered: claims at
// exact offsets, header pages taken at theirs, then allocation goes on.
TEST(OwnedSpaceTest, ClaimsRebuildTheSpaceARestartLeft) {
  auto s = OwnedSpace::Create(8 * kPageBytes, kPageBytes, kAlign);
  ASSERT_TRUE(s.ok());
  ASSERT_OK(s->Claim(kA, 0, 100));
  ASSERT_OK(s->Claim(kA, kAlign, kPageBytes + 1));  // spans pages 0-1
  ASSERT_OK(s->TakePageAt(3));
  ASSERT_OK(s->Claim(kB, 4 * kPageBytes, 10));
  ASSERT_OK(s->CheckInvariants());
  EXPECT_EQ(s->PageOwner(0), kA);
  EXPECT_EQ(s->PageOwner(1), kA);
  EXPECT_EQ(s->PageOwner(3), std::nullopt) << "a header page";
  EXPECT_EQ(s->PageOwner(4), kB);
  EXPECT_EQ(s->LengthAt(kAlign), kPageBytes + kAlign);
  EXPECT_EQ(s->allocated_bytes(), kAlign + kPageBytes + kAlign + kAlign);
  // Refused: overlap, another owner's page, a header page, outside, unaligned.
  EXPECT_EQ(s->Claim(kA, 0, 10).code(), Code::kFailedPrecondition);
  EXPECT_EQ(s->Claim(kA, kPageBytes, 10).code(), Code::kFailedPrecondition) << "inside the range at 256";
  EXPECT_EQ(s->Claim(kA, 4 * kPageBytes + kAlign, 10).code(), Code::kFailedPrecondition) << "kB's page";
  EXPECT_EQ(s->Claim(kA, 3 * kPageBytes, 10).code(), Code::kFailedPrecondition) << "a header page";
  EXPECT_EQ(s->Claim(kA, 8 * kPageBytes, 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->Claim(kA, 7 * kPageBytes, 2 * kPageBytes).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->Claim(kA, 5 * kPageBytes + 1, 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->Claim(kA, 5 * kPageBytes, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(s->TakePageAt(0).code(), Code::kFailedPrecondition) << "kA's";
  EXPECT_EQ(s->TakePageAt(3).code(), Code::kFailedPrecondition) << "taken already";
  EXPECT_EQ(s->TakePageAt(8).code(), Code::kFailedPrecondition);
  ASSERT_OK(s->CheckInvariants());
  // Allocation goes on from there: kA's next small range shares its pages.
  auto next = s->Allocate(kA, 100);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(s->PageOwner(PageOf(*next)), kA);
  ASSERT_OK(s->Free(0));
  ASSERT_OK(s->Free(kAlign));
  ASSERT_OK(s->Free(*next));
  ASSERT_OK(s->Free(4 * kPageBytes));
  ASSERT_OK(s->CheckInvariants());
  EXPECT_EQ(s->allocated_bytes(), 0u);
}

}  // namespace
}  // namespace nanokv::kvd
