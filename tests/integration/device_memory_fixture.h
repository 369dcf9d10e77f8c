// KvdFixture with device memory of this process on the backend kvd runs
// (device 0): buffers for device gets and puts, and reading them back.
#ifndef NANOKV_TESTS_INTEGRATION_DEVICE_MEMORY_FIXTURE_H_
#define NANOKV_TESTS_INTEGRATION_DEVICE_MEMORY_FIXTURE_H_

#include <cstddef>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {

class DeviceMemoryFixture : public KvdFixture {
 protected:
  // Opens backend_ (Backend(): the one kvd runs).
  void OpenDeviceBackend() {
    auto backend = gpu::OpenBackend(Backend());
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(*backend);
  }

  std::unique_ptr<gpu::DeviceBuffer> Buffer(size_t bytes) {
    auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, bytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
    return buffer.ok() ? std::move(*buffer) : nullptr;
  }

  std::vector<std::byte> Read(const void* device, size_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_OK(backend_->Copy(out.data(), device, bytes, gpu::CopyKind::kDeviceToHost));
    return out;
  }

  std::unique_ptr<gpu::Backend> backend_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_DEVICE_MEMORY_FIXTURE_H_
