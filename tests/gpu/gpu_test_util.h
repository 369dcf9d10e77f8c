// What the kernels' GPU tests share: skip without a usable GPU, check runtime
// calls, RAII device buffers, a deterministic byte pattern.
#ifndef NANOKV_TESTS_GPU_GPU_TEST_UTIL_H_
#define NANOKV_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tests/gpu/pattern.h"

// In SetUp (or a test body): skips unless a CUDA device is present and usable.
#define NANOKV_SKIP_WITHOUT_GPU()                                                         \
  do {                                                                                    \
    int n_ = 0;                                                                           \
    cudaError_t e_ = cudaGetDeviceCount(&n_);                                             \
    if (e_ != cudaSuccess || n_ == 0) {                                                   \
      (void)cudaGetLastError();                                                           \
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount: "                              \
                   << (e_ != cudaSuccess ? cudaGetErrorName(e_) : "0 devices") << ")"; \
    }                                                                                     \
  } while (0)

#define CUDA_ASSERT(expr)                                                    \
  do {                                                                       \
    cudaError_t e_ = (expr);                                                 \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorName(e_);     \
  } while (0)

namespace nanokv::testing {

// cudaMalloc'd bytes, freed on destruction. Check ok() after construction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  bool ok() const { return ptr_ != nullptr; }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  char* bytes_at(std::size_t offset) const { return static_cast<char*>(ptr_) + offset; }
  std::size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

inline std::vector<std::uint8_t> Pattern(std::uint64_t seed, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = PatternByte(seed, i);
  return v;
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_GPU_GPU_TEST_UTIL_H_
