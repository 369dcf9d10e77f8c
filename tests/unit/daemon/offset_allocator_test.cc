// The offset allocator against a reference model: a byte map of the space
// that the test fills and clears itself. Every step checks the invariants,
// that no two live ranges overlap, and that an allocation fails only when
// the model has no aligned hole long enough (best fit finds any hole).
#include "daemon/objects/offset_allocator.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

TEST(OffsetAllocatorTest, RejectsBadParameters) {
  EXPECT_EQ(OffsetAllocator::Create(1 << 20, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OffsetAllocator::Create(1 << 20, 100).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OffsetAllocator::Create(100, 256).status().code(), Code::kInvalidArgument);
  auto a = OffsetAllocator::Create(1000, 256);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->capacity(), 768u);  // rounded down to the alignment
  EXPECT_EQ(a->Allocate(0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(a->Free(0).code(), Code::kFailedPrecondition);
}

TEST(OffsetAllocatorTest, SmallRangesShareAndAlign) {
  auto a = OffsetAllocator::Create(4096, 256);
  ASSERT_TRUE(a.ok());
  auto x = a->Allocate(1), y = a->Allocate(300), z = a->Allocate(256);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 256u);
  EXPECT_EQ(a->LengthAt(*y), 512u);
  EXPECT_EQ(*z, 768u);
  EXPECT_EQ(a->allocated_bytes(), 1024u);
  ASSERT_OK(a->CheckInvariants());
}

TEST(OffsetAllocatorTest, CoalescesBothNeighboursAndRefusesDoubleFree) {
  auto a = OffsetAllocator::Create(1024, 256);
  ASSERT_TRUE(a.ok());
  uint64_t r[4];
  for (auto& off : r) off = *a->Allocate(256);
  EXPECT_EQ(a->Allocate(1).status().code(), Code::kResourceExhausted);
  ASSERT_OK(a->Free(r[0]));
  ASSERT_OK(a->Free(r[2]));
  EXPECT_EQ(a->stats().free_ranges, 2u);
  EXPECT_EQ(a->Allocate(512).status().code(), Code::kResourceExhausted);  // fragmented
  ASSERT_OK(a->Free(r[1]));  // joins both neighbours
  EXPECT_EQ(a->stats().free_ranges, 1u);
  EXPECT_EQ(a->stats().largest_free, 768u);
  EXPECT_EQ(a->Free(r[1]).code(), Code::kFailedPrecondition);
  auto big = a->Allocate(768);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(*big, 0u);
  ASSERT_OK(a->CheckInvariants());
}

TEST(OffsetAllocatorTest, BestFitTakesTheShortestHole) {
  auto a = OffsetAllocator::Create(16 * 256, 256);
  ASSERT_TRUE(a.ok());
  std::vector<uint64_t> r;
  for (uint64_t len : {3, 1, 1, 1, 2, 1}) r.push_back(*a->Allocate(len * 256));
  // Holes of 3 units at 0 and 2 units at 6*256.
  ASSERT_OK(a->Free(r[0]));
  ASSERT_OK(a->Free(r[4]));
  EXPECT_EQ(*a->Allocate(2 * 256), 6u * 256);
  EXPECT_EQ(*a->Allocate(256), 0u);
}

// Away bytes (the per-owner spaces, owned_space.h): an empty allocator has
// nothing free until given; take and give split and merge free ranges and
// refuse ranges that are not wholly free (take) or wholly away (give).
TEST(OffsetAllocatorTest, GiveAndTakeMoveBytesAwayAndBack) {
  auto a = OffsetAllocator::CreateEmpty(8 * 256, 256);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->away_bytes(), 8u * 256);
  EXPECT_EQ(a->Allocate(1).status().code(), Code::kResourceExhausted);
  ASSERT_OK(a->Give(2 * 256, 2 * 256));
  ASSERT_OK(a->Give(4 * 256, 256));  // touches the first: merged
  EXPECT_EQ(a->stats().free_ranges, 1u);
  EXPECT_EQ(a->Give(3 * 256, 256).code(), Code::kFailedPrecondition) << "already free";
  EXPECT_EQ(a->Give(100, 256).code(), Code::kInvalidArgument) << "unaligned";
  EXPECT_EQ(a->Give(7 * 256, 2 * 256).code(), Code::kInvalidArgument) << "past the capacity";
  auto x = a->Allocate(256);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(*x, 2u * 256);
  EXPECT_EQ(a->Give(2 * 256, 256).code(), Code::kFailedPrecondition) << "live";
  EXPECT_EQ(a->Take(2 * 256, 2 * 256).code(), Code::kFailedPrecondition) << "part of it is live";
  ASSERT_OK(a->Take(3 * 256, 256));  // the front of the free [3, 5): [4, 5) stays free
  EXPECT_EQ(a->free_bytes(), 256u);
  ASSERT_OK(a->CheckInvariants());
  ASSERT_OK(a->Free(*x));
  EXPECT_EQ(a->stats().free_ranges, 2u) << "[2, 3) and [4, 5): 3 is away";
  auto run = a->TakeFit(256);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(a->LengthAt(*run), 0u) << "taken, not live";
  EXPECT_EQ(a->allocated_bytes(), 0u);
  EXPECT_EQ(a->away_bytes(), 7u * 256);
  ASSERT_OK(a->CheckInvariants());
  // A full allocator gives a run away and takes it back whole.
  auto full = OffsetAllocator::Create(4 * 256, 256);
  ASSERT_TRUE(full.ok());
  auto middle = full->TakeFit(2 * 256);
  ASSERT_TRUE(middle.ok());
  EXPECT_EQ(full->free_bytes(), 2u * 256);
  ASSERT_OK(full->Give(*middle, 2 * 256));
  EXPECT_EQ(full->stats().free_ranges, 1u);
  ASSERT_OK(full->CheckInvariants());
}

// The model: which alignment units are taken.
struct Model {
  std::vector<bool> used;
  bool HasHole(uint64_t units) const {
    uint64_t run = 0;
    for (bool u : used) {
      run = u ? 0 : run + 1;
      if (run >= units) return true;
    }
    return false;
  }
};

TEST(OffsetAllocatorTest, RandomizedAgainstAModel) {
  constexpr uint64_t kAlign = 256, kUnits = 2048;
  for (uint32_t seed : {1u, 2u, 3u, 42u}) {
    auto a = OffsetAllocator::Create(kUnits * kAlign, kAlign);
    ASSERT_TRUE(a.ok());
    Model model{std::vector<bool>(kUnits, false)};
    std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, requested bytes
    std::mt19937_64 rng(seed);
    for (int step = 0; step < 20000; ++step) {
      bool alloc = live.empty() || rng() % 100 < 55;
      if (alloc) {
        // Mostly small (shared pages), now and then large.
        uint64_t bytes = rng() % 10 == 0 ? 1 + rng() % (64 * kAlign) : 1 + rng() % (2 * kAlign);
        uint64_t units = (bytes + kAlign - 1) / kAlign;
        auto off = a->Allocate(bytes);
        if (!off.ok()) {
          ASSERT_EQ(off.status().code(), Code::kResourceExhausted);
          ASSERT_FALSE(model.HasHole(units)) << "seed " << seed << " step " << step
                                             << ": refused " << units << " units with a hole";
          continue;
        }
        ASSERT_EQ(*off % kAlign, 0u);
        ASSERT_LE(*off / kAlign + units, kUnits);
        for (uint64_t u = *off / kAlign; u < *off / kAlign + units; ++u) {
          ASSERT_FALSE(model.used[u]) << "seed " << seed << " step " << step << ": overlap";
          model.used[u] = true;
        }
        live.emplace_back(*off, bytes);
      } else {
        size_t i = rng() % live.size();
        auto [off, bytes] = live[i];
        live[i] = live.back();
        live.pop_back();
        ASSERT_OK(a->Free(off));
        uint64_t units = (bytes + kAlign - 1) / kAlign;
        for (uint64_t u = off / kAlign; u < off / kAlign + units; ++u) model.used[u] = false;
      }
      if (step % 64 == 0) ASSERT_OK(a->CheckInvariants());
      uint64_t used_units = 0;
      for (bool u : model.used) used_units += u ? 1 : 0;
      ASSERT_EQ(a->allocated_bytes(), used_units * kAlign);
    }
    for (auto [off, bytes] : live) ASSERT_OK(a->Free(off));
    ASSERT_OK(a->CheckInvariants());
    EXPECT_EQ(a->stats().free_ranges, 1u);  // everything merged back
  }
}

}  // namespace
}  // namespace nanokv::kvd
