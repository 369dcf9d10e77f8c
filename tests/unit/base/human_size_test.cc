#include "base/human_size.h"

#include <gtest/gtest.h>

namespace nanokv {
namespace {

TEST(HumanSize, ParsesWhatPeopleWrite) {
  EXPECT_EQ(*ParseBytes("2097152"), 2097152u);
  EXPECT_EQ(*ParseBytes("512M"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("2G"), 2ull << 30);
  EXPECT_EQ(*ParseBytes("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseBytes(" 64 KiB "), 64ull << 10);
  EXPECT_EQ(*ParseBytes("1GB"), 1000000000u);
  EXPECT_EQ(*ParseBytes("7b"), 7u);
}

TEST(HumanSize, RefusesNonsense) {
  for (const char* bad : {"", "-1G", "G", "12Q", "1e400", "5 parsecs", "+3M"}) {
    EXPECT_EQ(ParseBytes(bad).status().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ParseBytes("99999999999T").ok()) << "overflow";
}

TEST(HumanSize, SharesAndResolve) {
  auto share = ParseSizeOrShare("30%");
  ASSERT_TRUE(share.ok());
  EXPECT_TRUE(share->is_fraction());
  EXPECT_EQ(share->Resolve(1000), 300u);
  auto size = ParseSizeOrShare("2G");
  ASSERT_TRUE(size.ok());
  EXPECT_FALSE(size->is_fraction());
  EXPECT_EQ(size->Resolve(1), 2ull << 30);
  EXPECT_FALSE(ParseSizeOrShare("0%").ok());
  EXPECT_FALSE(ParseSizeOrShare("101%").ok());
  EXPECT_FALSE(ParseSizeOrShare("x%").ok());
}

TEST(HumanSize, Formats) {
  EXPECT_EQ(FormatBytes(17), "17 B");
  EXPECT_EQ(FormatBytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.50 GiB");
}

}  // namespace
}  // namespace nanokv
