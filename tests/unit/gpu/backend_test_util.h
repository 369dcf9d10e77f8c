// Shared by the backend conformance suite and its peer process: a byte
// pattern that differs per seed and per position, written and checked through
// the backend's own copies so the same code runs on host and GPU memory.
#ifndef NANOKV_TESTS_UNIT_GPU_BACKEND_TEST_UTIL_H_
#define NANOKV_TESTS_UNIT_GPU_BACKEND_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/backend.h"

namespace nanokv::gpu::testing {

inline std::vector<uint8_t> Pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> out(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<uint8_t>(x);
  }
  return out;
}

inline Status WritePattern(Backend& backend, uintptr_t address, size_t bytes, uint32_t seed) {
  std::vector<uint8_t> data = Pattern(bytes, seed);
  return backend.Copy(reinterpret_cast<void*>(address), data.data(), bytes,
                      CopyKind::kHostToDevice);
}

// OK when the bytes at `address` are Pattern(bytes, seed); else names the
// first differing offset.
inline Status CheckPattern(Backend& backend, uintptr_t address, size_t bytes, uint32_t seed) {
  std::vector<uint8_t> got(bytes);
  NANOKV_RETURN_IF_ERROR(backend.Copy(got.data(), reinterpret_cast<const void*>(address), bytes,
                                      CopyKind::kDeviceToHost));
  std::vector<uint8_t> want = Pattern(bytes, seed);
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != want[i]) {
      return Status::Internal("pattern " + std::to_string(seed) + " differs at byte " +
                              std::to_string(i) + ": got " + std::to_string(got[i]) +
                              ", want " + std::to_string(want[i]));
    }
  }
  return Status::OK();
}

}  // namespace nanokv::gpu::testing

#endif  // NANOKV_TESTS_UNIT_GPU_BACKEND_TEST_UTIL_H_
