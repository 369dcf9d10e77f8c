// A deterministic byte pattern that host test code and test kernels both
// compute: byte i of object `seed`.
#ifndef NANOKV_TESTS_GPU_PATTERN_H_
#define NANOKV_TESTS_GPU_PATTERN_H_

#include <cstdint>

#if defined(__CUDACC__)
#define NANOKV_TEST_HD __host__ __device__
#else
#define NANOKV_TEST_HD
#endif

namespace nanokv::testing {

NANOKV_TEST_HD inline std::uint8_t PatternByte(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
  x ^= x >> 31;
  return static_cast<std::uint8_t>(x ^ (x >> 17));
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_GPU_PATTERN_H_
