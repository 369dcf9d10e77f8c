// The FP8 E4M3 codec the quantizing paged append runs on the device, checked
// on the host (the same header-only code): every code, rounding, saturation
// and the error bound the kernels document.
#include "kernels/fp8_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace nanokv::fp8 {
namespace {

TEST(Fp8E4M3, KnownCodes) {
  EXPECT_EQ(DecodeE4M3(0x00), 0.0f);
  EXPECT_EQ(DecodeE4M3(0x38), 1.0f);           // exponent 7 = bias
  EXPECT_EQ(DecodeE4M3(0x7E), 448.0f);         // largest finite
  EXPECT_EQ(DecodeE4M3(0xFE), -448.0f);
  EXPECT_EQ(DecodeE4M3(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(DecodeE4M3(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(DecodeE4M3(0x7F)));
  EXPECT_TRUE(std::isnan(DecodeE4M3(0xFF)));
}

TEST(Fp8E4M3, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    if ((code & 0x7F) == 0x7F) continue;  // NaN
    const float v = DecodeE4M3(code);
    if (code == 0x80) {
      EXPECT_EQ(EncodeE4M3(v), 0x80);  // -0 keeps its sign
      continue;
    }
    EXPECT_EQ(EncodeE4M3(v), code) << "code " << c << " value " << v;
  }
}

TEST(Fp8E4M3, RoundsToNearestEven) {
  // 1.0 (0x38) and 1.125 (0x39): the midpoint goes to the even mantissa 0x38.
  EXPECT_EQ(EncodeE4M3(1.0625f), 0x38);
  // 1.125 (0x39) and 1.25 (0x3A): the midpoint 1.1875 goes to 0x3A.
  EXPECT_EQ(EncodeE4M3(1.1875f), 0x3A);
  EXPECT_EQ(EncodeE4M3(1.07f), 0x39);
  // Subnormals: step 2^-9; 2.5 steps -> 2, 3.5 steps -> 4.
  EXPECT_EQ(EncodeE4M3(2.5f * std::ldexp(1.0f, -9)), 0x02);
  EXPECT_EQ(EncodeE4M3(3.5f * std::ldexp(1.0f, -9)), 0x04);
  // Half the smallest subnormal ties to 0; a little more rounds up.
  EXPECT_EQ(EncodeE4M3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(EncodeE4M3(std::ldexp(1.01f, -10)), 0x01);
  // Just under the smallest normal rounds up into it.
  EXPECT_EQ(EncodeE4M3(std::ldexp(1.0f, -6) * 0.99f), 0x08);
}

TEST(Fp8E4M3, Saturates) {
  EXPECT_EQ(EncodeE4M3(448.0f), 0x7E);
  EXPECT_EQ(EncodeE4M3(463.9f), 0x7E);
  EXPECT_EQ(EncodeE4M3(1e6f), 0x7E);
  EXPECT_EQ(EncodeE4M3(-1e30f), 0xFE);
  EXPECT_EQ(EncodeE4M3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(EncodeE4M3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(EncodeE4M3(std::numeric_limits<float>::quiet_NaN()) & 0x7F, 0x7F);
  EXPECT_EQ(EncodeE4M3(std::numeric_limits<float>::denorm_min()), 0x00);
}

// The bound of fp8_e4m3.h: |x - D(E(x))| <= max(|x| / 16, 2^-10) for |x| <= 448.
TEST(Fp8E4M3, ErrorBoundHoldsAndIsNearlyTight) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-14, 8);
  double worst_ratio = 0;
  for (int i = 0; i < 2000000; ++i) {
    float x = std::ldexp(mant(rng), exp(rng));
    if (i & 1) x = -x;
    if (std::fabs(x) > 448.0f) continue;
    const float err = std::fabs(x - DecodeE4M3(EncodeE4M3(x)));
    const float bound = std::fmax(std::fabs(x) / 16.0f, std::ldexp(1.0f, -10));
    ASSERT_LE(err, bound) << "x = " << x;
    worst_ratio = std::fmax(worst_ratio, err / bound);
  }
  EXPECT_GT(worst_ratio, 0.45);  // the bound is not loose by more than ~2x
}

TEST(Fp8E4M3, HalfAndBf16ToFloat) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8200), -std::ldexp(1.0f, -15));  // subnormal 512 * 2^-24
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC040), -3.0f);
  // Every finite half converts exactly: compare with an independent formula.
  for (int h = 0; h < 0x10000; ++h) {
    const int e = (h >> 10) & 0x1F;
    if (e == 31) continue;
    const int m = h & 0x3FF;
    double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    if (h & 0x8000) v = -v;
    ASSERT_EQ(HalfToFloat(static_cast<std::uint16_t>(h)), static_cast<float>(v)) << h;
  }
}

}  // namespace
}  // namespace nanokv::fp8
