// BlockAllocator: fixed cases (best fit, coalescing, fragmentation, the dump,
// every bad input), then a randomized run against a reference model: a byte
// per block and a linear scan that predicts exactly which run best fit must
// return. The default run is about 2 million operations (a few seconds);
// NANOKV_BLOCK_FUZZ_OPS=<n> runs n instead, NANOKV_BLOCK_FUZZ_SEED=<s> picks
// the seed (printed on failure).
#include "libkv/cache/block_allocator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace nanokv::cache {
namespace {

BlockAllocator Make(size_t blocks) {
  auto made = BlockAllocator::Create(blocks);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

TEST(BlockAllocatorTest, CreateRefusesBadSizes) {
  EXPECT_EQ(BlockAllocator::Create(0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(BlockAllocator::Create(size_t{BlockAllocator::kMaxBlocks} + 1).status().code(),
            Code::kInvalidArgument);
  BlockAllocator a = Make(10);
  EXPECT_EQ(a.total_blocks(), 10u);
  EXPECT_EQ(a.free_blocks(), 10u);
  EXPECT_EQ(a.used_blocks(), 0u);
  EXPECT_EQ(a.largest_free_run(), 10u);
  EXPECT_EQ(a.fragmentation(), 0.0);
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, AllocatesFromTheFrontAndCoalescesOnFree) {
  BlockAllocator a = Make(16);
  auto r1 = a.Allocate(4);
  auto r2 = a.Allocate(4);
  auto r3 = a.Allocate(4);
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_EQ(*r1, (BlockRun{0, 4}));
  EXPECT_EQ(*r2, (BlockRun{4, 4}));
  EXPECT_EQ(*r3, (BlockRun{8, 4}));
  EXPECT_EQ(a.used_blocks(), 12u);
  EXPECT_TRUE(a.IsAllocated(*r2));
  EXPECT_FALSE(a.IsAllocated({4, 3}));

  // Free the middle: two free runs [4,+4) and [12,+4).
  ASSERT_OK(a.Free(*r2));
  EXPECT_EQ(a.free_run_count(), 2u);
  EXPECT_EQ(a.largest_free_run(), 4u);
  EXPECT_DOUBLE_EQ(a.fragmentation(), 0.5);
  // Merge with the run before and after: all one run again.
  ASSERT_OK(a.Free(*r1));
  EXPECT_EQ(a.free_run_count(), 2u);  // [0,+8) and [12,+4)
  ASSERT_OK(a.Free(*r3));
  EXPECT_EQ(a.free_run_count(), 1u);
  EXPECT_EQ(a.largest_free_run(), 16u);
  EXPECT_EQ(a.fragmentation(), 0.0);
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, BestFitPicksTheShortestRunThatFits) {
  BlockAllocator a = Make(20);
  std::vector<BlockRun> runs;
  for (uint32_t n : {3u, 2u, 5u, 1u, 4u, 5u}) runs.push_back(*a.Allocate(n));
  // Free holes of 3 (at 0), 5 (at 5) and 4 (at 11); [15,+5) is allocated,
  // nothing else free.
  ASSERT_OK(a.Free(runs[0]));
  ASSERT_OK(a.Free(runs[2]));
  ASSERT_OK(a.Free(runs[4]));
  EXPECT_EQ(a.free_blocks(), 12u);
  auto four = a.Allocate(4);
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(*four, (BlockRun{11, 4}));  // the 4-hole, not the first hole that fits
  auto two = a.Allocate(2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (BlockRun{0, 2}));  // the 3-hole is the shortest that fits
  auto six = a.Allocate(6);
  EXPECT_EQ(six.status().code(), Code::kResourceExhausted);
  EXPECT_NE(six.status().message().find("fragmented"), std::string_view::npos)
      << six.status().ToString();
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, BadInputIsAnErrorNotACrash) {
  BlockAllocator a = Make(8);
  EXPECT_EQ(a.Allocate(0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(a.Allocate(9).status().code(), Code::kInvalidArgument);
  auto run = a.Allocate(3);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(a.Free({0, 2}).code(), Code::kInvalidArgument);  // wrong length
  EXPECT_EQ(a.Free({1, 2}).code(), Code::kNotFound);         // inside a run
  EXPECT_EQ(a.Free({5, 1}).code(), Code::kNotFound);         // a free block
  EXPECT_EQ(a.Free({0, 0}).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.Free({7, 2}).code(), Code::kInvalidArgument);  // past the end
  EXPECT_EQ(a.Free({8, 1}).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.Free({0xffffffffu, 0xffffffffu}).code(), Code::kInvalidArgument);
  ASSERT_OK(a.Free(*run));
  EXPECT_EQ(a.Free(*run).code(), Code::kNotFound);  // double free
  EXPECT_EQ(a.free_blocks(), 8u);
  auto all = a.Allocate(8);
  ASSERT_TRUE(all.ok());
  auto none = a.Allocate(1);
  EXPECT_EQ(none.status().code(), Code::kResourceExhausted);
  EXPECT_NE(none.status().message().find("not enough"), std::string_view::npos);
  EXPECT_EQ(a.fragmentation(), 0.0);  // nothing free
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, SplitMakesTwoRunsFreedOnTheirOwn) {
  BlockAllocator a = Make(8);
  auto run = a.Allocate(5);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(a.Split({0, 4}, 2).code(), Code::kNotFound);  // not the run as allocated
  EXPECT_EQ(a.Split({1, 4}, 2).code(), Code::kNotFound);
  EXPECT_EQ(a.Split(*run, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.Split(*run, 5).code(), Code::kInvalidArgument);
  ASSERT_OK(a.Split(*run, 2));
  EXPECT_TRUE(a.IsAllocated({0, 2}));
  EXPECT_TRUE(a.IsAllocated({2, 3}));
  EXPECT_EQ(a.Free(*run).code(), Code::kInvalidArgument);  // the old run is gone
  EXPECT_EQ(a.allocated_run_count(), 2u);
  EXPECT_EQ(a.used_blocks(), 5u);
  EXPECT_OK(a.CheckInvariants());
  ASSERT_OK(a.Free({2, 3}));
  EXPECT_OK(a.CheckInvariants());
  ASSERT_OK(a.Free({0, 2}));
  EXPECT_EQ(a.free_blocks(), 8u);
  EXPECT_EQ(a.largest_free_run(), 8u);
  EXPECT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, DumpBlockMapIsReadable) {
  BlockAllocator a = Make(10);
  auto r1 = a.Allocate(3);
  auto r2 = a.Allocate(2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_OK(a.Free(*r1));
  std::string dump = a.DumpBlockMap();
  EXPECT_NE(dump.find("10 blocks, 2 used, 8 free in 2 runs (longest 5)"), std::string::npos)
      << dump;
  EXPECT_NE(dump.find("...XX....."), std::string::npos) << dump;
  EXPECT_NE(dump.find("free runs: [0, +3) [5, +5)"), std::string::npos) << dump;

  // A large allocator: one character per several blocks, ':' for a mix.
  BlockAllocator big = Make(65536);
  ASSERT_TRUE(big.Allocate(17).ok());
  std::string big_dump = big.DumpBlockMap(64);
  EXPECT_NE(big_dump.find("one character = 16 blocks"), std::string::npos) << big_dump;
  EXPECT_NE(big_dump.find("X:...."), std::string::npos);
  EXPECT_LT(big_dump.size(), 8000u);
}

// The reference model: a byte per block, its own list of runs, and a scan.
class Model {
 public:
  explicit Model(size_t total) : used_(total, 0) {}

  struct Scan {
    size_t free_blocks = 0, largest = 0, runs = 0;
    bool found = false;
    BlockRun best;  // the shortest free run >= want, lowest start
  };
  Scan Look(uint32_t want) const {
    Scan s;
    size_t best_length = SIZE_MAX;
    for (size_t i = 0; i < used_.size();) {
      if (used_[i]) {
        ++i;
        continue;
      }
      size_t start = i;
      while (i < used_.size() && !used_[i]) ++i;
      size_t length = i - start;
      s.free_blocks += length;
      s.largest = std::max(s.largest, length);
      ++s.runs;
      if (want > 0 && length >= want && length < best_length) {
        best_length = length;
        s.found = true;
        s.best = {static_cast<BlockId>(start), want};
      }
    }
    return s;
  }
  void Mark(BlockRun run, uint8_t value) {
    std::fill(used_.begin() + run.first, used_.begin() + run.first + run.count, value);
  }

 private:
  std::vector<uint8_t> used_;
};

long long EnvOr(const char* name, long long fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoll(value) : fallback;
}

// One randomized run of `ops` operations on `total` blocks. The fill target
// moves every few thousand operations, so the allocator is seen empty, half
// full, nearly full and fragmented.
void RandomRun(size_t total, long long ops, uint64_t seed) {
  SCOPED_TRACE("total " + std::to_string(total) + ", seed " + std::to_string(seed));
  BlockAllocator a = Make(total);
  Model model(total);
  std::mt19937_64 rng(seed);
  std::vector<BlockRun> live;
  double target_fill = 0.5;
  const uint32_t max_run = static_cast<uint32_t>(std::max<size_t>(1, total / 4));
  auto run_size = [&] {
    // Mostly short runs (decode-sized), some long (prefill), a few bad.
    uint32_t pick = rng() % 100;
    if (pick < 2) return uint32_t{0};
    if (pick < 3) return static_cast<uint32_t>(total + 1 + rng() % 3);
    if (pick < 70) return static_cast<uint32_t>(1 + rng() % std::min<uint32_t>(8, max_run));
    return static_cast<uint32_t>(1 + rng() % max_run);
  };
  for (long long op = 0; op < ops; ++op) {
    if (op % 4096 == 0) target_fill = std::uniform_real_distribution<double>(0.05, 1.0)(rng);
    double fill = static_cast<double>(a.used_blocks()) / static_cast<double>(total);
    uint32_t dice = rng() % 100;
    if (dice < 3 && !live.empty()) {
      // A bad free: wrong length, or the inside of a run, or out of range.
      BlockRun run = live[rng() % live.size()];
      BlockRun bad = run.count > 1 && rng() % 2 ? BlockRun{run.first, run.count - 1}
                                                : BlockRun{run.first, run.count + 1};
      if (rng() % 3 == 0) bad = {static_cast<BlockId>(total + rng() % 5), 1};
      Status refused = a.Free(bad);
      ASSERT_FALSE(refused.ok()) << "op " << op << ": freed " << bad.first << "+" << bad.count;
    } else if (!live.empty() && (fill > target_fill || dice < 40)) {
      size_t index = rng() % live.size();
      BlockRun run = live[index];
      ASSERT_OK(a.Free(run));
      model.Mark(run, 0);
      live[index] = live.back();
      live.pop_back();
      if (dice < 50) {  // and sometimes free it again
        ASSERT_EQ(a.Free(run).code(), Code::kNotFound) << "op " << op << ": double free";
      }
    } else {
      uint32_t want = run_size();
      Model::Scan before = model.Look(want > total ? 0 : want);
      ASSERT_EQ(a.free_blocks(), before.free_blocks) << "op " << op;
      ASSERT_EQ(a.largest_free_run(), before.largest) << "op " << op;
      ASSERT_EQ(a.free_run_count(), before.runs) << "op " << op;
      double frag = before.free_blocks == 0 ? 0.0
                                            : 1.0 - static_cast<double>(before.largest) /
                                                        static_cast<double>(before.free_blocks);
      ASSERT_DOUBLE_EQ(a.fragmentation(), frag) << "op " << op;
      Result<BlockRun> got = a.Allocate(want);
      if (want == 0 || want > total) {
        ASSERT_EQ(got.status().code(), Code::kInvalidArgument) << "op " << op;
      } else if (!before.found) {
        ASSERT_EQ(got.status().code(), Code::kResourceExhausted) << "op " << op;
      } else {
        ASSERT_TRUE(got.ok()) << "op " << op << ": " << got.status().ToString();
        ASSERT_EQ(*got, before.best) << "op " << op << ": got " << got->first << "+" << got->count
                                     << ", best fit is " << before.best.first;
        model.Mark(*got, 1);
        live.push_back(*got);
      }
    }
    if (op % 512 == 0) ASSERT_OK(a.CheckInvariants());
  }
  ASSERT_OK(a.CheckInvariants());
  for (BlockRun run : live) ASSERT_OK(a.Free(run));
  EXPECT_EQ(a.free_blocks(), total);
  EXPECT_EQ(a.free_run_count(), 1u);
  ASSERT_OK(a.CheckInvariants());
}

TEST(BlockAllocatorTest, RandomizedAgainstAReferenceModel) {
  const long long total_ops = EnvOr("NANOKV_BLOCK_FUZZ_OPS", 2'000'000);
  const uint64_t seed = static_cast<uint64_t>(EnvOr("NANOKV_BLOCK_FUZZ_SEED", 20261122));
  // Work per operation grows with the size (the model scans), so the large
  // allocators get fewer operations.
  const std::vector<std::pair<size_t, double>> shares = {
      {1, 0.02}, {7, 0.15}, {64, 0.3}, {333, 0.3}, {2048, 0.2}, {65536, 0.03}};
  for (size_t i = 0; i < shares.size(); ++i) {
    auto [total, share] = shares[i];
    long long ops = std::max<long long>(1, static_cast<long long>(share * total_ops));
    RandomRun(total, ops, seed + i);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace nanokv::cache
