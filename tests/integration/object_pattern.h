// The bytes the object store's integration tests write and check.
#ifndef NANOKV_TESTS_INTEGRATION_OBJECT_PATTERN_H_
#define NANOKV_TESTS_INTEGRATION_OBJECT_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nanokv::testing {

inline std::vector<std::byte> ObjectPattern(size_t n, uint8_t seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = std::byte(static_cast<uint8_t>(seed + i * 13 + i / 4093));
  return out;
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_OBJECT_PATTERN_H_
