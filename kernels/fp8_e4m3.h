// FP8 E4M3 (the OCP "FN" format NVIDIA calls __NV_E4M3: bias 7, no infinity,
// NaN = S.1111.111, largest finite 448, smallest normal 2^-6, subnormal step
// 2^-9) and the fp16/bf16 -> float conversions the quantizing append needs.
// Integer-only and header-only, for the host and both device compilers: the
// host tests check the device's arithmetic with the same code, and HIP from
// ROCm 5.2 has no fp8 type to lean on.
//
// Encode rounds to nearest, ties to even, and saturates: |x| >= 448 and +-inf
// give +-448, NaN gives 0x7F. For |x| <= 448 the error of one encode is at most
//   |x| / 16          when |x| >= 2^-6 (half a unit of the 3-bit mantissa), and
//   2^-10             below (half the subnormal step),
// so |x - Decode(Encode(x))| <= max(|x| / 16, 2^-10).
#ifndef NANOKV_KERNELS_FP8_E4M3_H_
#define NANOKV_KERNELS_FP8_E4M3_H_

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define NANOKV_HD __host__ __device__
#else
#define NANOKV_HD
#endif

namespace nanokv::fp8 {

inline constexpr float kE4M3Max = 448.0f;
inline constexpr std::uint8_t kE4M3MaxCode = 0x7E;
inline constexpr std::uint8_t kE4M3NaN = 0x7F;

NANOKV_HD inline std::uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)  // nvcc device code; host and HIP (clang) take memcpy
  return __float_as_uint(f);
#else
  std::uint32_t u;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

NANOKV_HD inline float BitsFloat(std::uint32_t u) {
#if defined(__CUDA_ARCH__)  // nvcc device code; host and HIP (clang) take memcpy
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// IEEE binary16 bits -> float (exact).
NANOKV_HD inline float HalfToFloat(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * BitsFloat(0x33800000u);  // 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// bfloat16 bits -> float (exact: bf16 is float's upper half).
NANOKV_HD inline float Bf16ToFloat(std::uint16_t b) {
  return BitsFloat(static_cast<std::uint32_t>(b) << 16);
}

// float -> E4M3, round to nearest even, saturating (see the top of the file).
NANOKV_HD inline std::uint8_t EncodeE4M3(float x) {
  std::uint32_t bits = FloatBits(x);
  std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return sign | kE4M3NaN;                  // NaN
  if (abs_bits >= 0x43E00000u) return sign | kE4M3MaxCode;             // >= 448, inf
  int e = static_cast<int>(abs_bits >> 23) - 127;                      // unbiased
  if (e < -6) {  // E4M3 subnormal range: a count of 2^-9 steps, 0..8
    if ((abs_bits >> 23) == 0) return sign;  // float zero or denormal
    std::uint32_t full = (abs_bits & 0x7FFFFFu) | 0x800000u;  // value = full * 2^(e-23)
    int shift = 14 - e;  // value / 2^-9 = full >> shift; shift >= 21
    if (shift > 31) return sign;
    std::uint32_t q = full >> shift;
    std::uint32_t rem = full & ((1u << shift) - 1u);
    std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint8_t>(sign | q);  // q == 8 is the smallest normal, 0x08
  }
  std::uint32_t mant = abs_bits & 0x7FFFFFu;
  std::uint32_t r = mant >> 20;
  std::uint32_t rem = mant & 0xFFFFFu;
  if (rem > 0x80000u || (rem == 0x80000u && (r & 1u))) ++r;
  if (r == 8) {
    r = 0;
    ++e;
  }
  std::uint32_t code = (static_cast<std::uint32_t>(e + 7) << 3) | r;
  if (code > kE4M3MaxCode) code = kE4M3MaxCode;  // unreachable below 448; kept as a guard
  return static_cast<std::uint8_t>(sign | code);
}

NANOKV_HD inline float DecodeE4M3(std::uint8_t c) {
  std::uint32_t sign = static_cast<std::uint32_t>(c & 0x80u) << 24;
  std::uint32_t exp = (c >> 3) & 0xFu;
  std::uint32_t mant = c & 0x7u;
  if (exp == 0xF && mant == 7) return BitsFloat(sign | 0x7FC00000u);
  if (exp == 0) {
    float v = static_cast<float>(mant) * BitsFloat(0x3B000000u);  // 2^-9
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 120u) << 23) | (mant << 20));
}

}  // namespace nanokv::fp8

#endif  // NANOKV_KERNELS_FP8_E4M3_H_
