// The batch get's read cache (libkv/client/read_cache.h): least recently
// used locations go first past its capacity; a location found is noted as
// read, and the reads are handed out once, an interval after the first.
#include "libkv/client/read_cache.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace nanokv::client {
namespace {

CachedRead Location(uint32_t epoch) {
  CachedRead read;
  read.pieces.bytes = epoch * 10;
  read.check = {0, epoch, epoch};
  return read;
}

TEST(ReadCacheTest, TheLeastRecentlyUsedGoesFirstAndAPutReplaces) {
  ReadCache cache(2);
  cache.Put("a", Location(1));
  cache.Put("b", Location(2));
  ASSERT_NE(cache.Find("a", 0), nullptr);  // a is now the most recent
  cache.Put("c", Location(3));             // b goes
  EXPECT_EQ(cache.Find("b", 0), nullptr);
  ASSERT_NE(cache.Find("a", 0), nullptr);
  ASSERT_NE(cache.Find("c", 0), nullptr);
  cache.Put("c", Location(4));
  EXPECT_EQ(cache.Find("c", 0)->check.epoch, 4u);
  EXPECT_EQ(cache.size(), 2u);
  cache.Erase("a");
  EXPECT_EQ(cache.Find("a", 0), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  ReadCache off(0);
  off.Put("a", Location(1));
  EXPECT_EQ(off.Find("a", 0), nullptr) << "capacity 0 keeps nothing";
}

TEST(ReadCacheTest, ReadsAreHandedOutOnceAnIntervalAfterTheFirst) {
  constexpr uint64_t kSecond = 1'000'000'000;
  ReadCache cache(8);
  cache.Put("a", Location(1));
  cache.Put("b", Location(2));
  cache.Put("c", Location(3));
  EXPECT_TRUE(cache.TakeReadsIfDue(10 * kSecond, kSecond).empty()) << "nothing read";
  ASSERT_NE(cache.Find("a", 20 * kSecond), nullptr);
  ASSERT_NE(cache.Find("b", 20 * kSecond + kSecond / 2), nullptr);
  ASSERT_NE(cache.Find("a", 20 * kSecond + kSecond / 2), nullptr);  // once is enough
  EXPECT_TRUE(cache.TakeReadsIfDue(20 * kSecond + kSecond / 2, kSecond).empty()) << "not due yet";
  std::vector<std::string> due = cache.TakeReadsIfDue(21 * kSecond, kSecond);
  std::sort(due.begin(), due.end());
  EXPECT_EQ(due, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(cache.TakeReadsIfDue(30 * kSecond, kSecond).empty()) << "handed out once";
  // A read entry that goes (erased, or pushed out) is not handed out.
  ASSERT_NE(cache.Find("c", 40 * kSecond), nullptr);
  cache.Erase("c");
  EXPECT_TRUE(cache.TakeReadsIfDue(50 * kSecond, kSecond).empty());
}

}  // namespace
}  // namespace nanokv::client
