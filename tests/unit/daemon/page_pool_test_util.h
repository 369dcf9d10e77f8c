// What PagePool's tests share (page_pool_test.cc, page_pool_groups_test.cc):
// a small simulated device on the real host backend, a fixture, a page
// mapped to read and write its bytes, and a backend whose creates fail on
// cue (node_state_test.cc uses it too).
#ifndef NANOKV_TESTS_UNIT_DAEMON_PAGE_POOL_TEST_UTIL_H_
#define NANOKV_TESTS_UNIT_DAEMON_PAGE_POOL_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include <gtest/gtest.h>

#include "daemon/node/page_pool.h"
#include "gpu/backend.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd::pool_testing {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPage = 2 * kMiB;
constexpr size_t kDeviceBytes = 64 * kMiB;  // 32 pages
// The tests of one group's pages grant them all to this one.
constexpr GroupId kGroup = 0;

// Polls `done` until it holds or a generous deadline passes (a slow CI
// machine only makes this take longer, never fail while the code is right).
template <typename Pred>
bool WaitFor(Pred done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class PagePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = gpu::MakeHostBackend(
        gpu::HostBackendOptions{.devices = 1, .granularity = kPage, .device_bytes = kDeviceBytes});
  }

  std::unique_ptr<PagePool> MakePool(PagePoolConfig config) {
    auto pool = PagePool::Create(*backend_, config);
    EXPECT_TRUE(pool.ok()) << pool.status().ToString();
    return pool.ok() ? std::move(pool).value() : nullptr;
  }

  static PagePoolConfig Config(size_t capacity_pages, size_t reserve_pages) {
    PagePoolConfig config;
    config.page_bytes = kPage;
    config.capacity_bytes = capacity_pages * kPage;
    config.reserve_pages = reserve_pages;
    return config;
  }

  size_t DeviceFreeBytes() {
    auto free_bytes = backend_->GetFreeMemory(0);
    EXPECT_TRUE(free_bytes.ok()) << free_bytes.status().ToString();
    return free_bytes.ok() ? *free_bytes : 0;
  }

  std::unique_ptr<gpu::Backend> backend_;
};

// A page of the pool mapped at a reserved address with access for device 0.
class Mapping {
 public:
  Mapping(gpu::Backend& backend, gpu::PageHandle page) : backend_(backend) {
    auto base = backend_.ReserveRange(kPage, 0);
    EXPECT_TRUE(base.ok()) << base.status().ToString();
    if (!base.ok()) return;
    base_ = *base;
    const int devices[] = {0};
    status_ = backend_.Map(base_, kPage, page);
    if (status_.ok()) {
      mapped_ = true;
      status_ = backend_.SetAccess(base_, kPage, devices);
    }
  }
  ~Mapping() {
    if (mapped_) EXPECT_OK(backend_.Unmap(base_, kPage));
    if (base_ != 0) EXPECT_OK(backend_.FreeRange(base_, kPage));
  }
  const Status& status() const { return status_; }
  Status Write(uint8_t value) {
    return backend_.Fill(reinterpret_cast<void*>(base_), value, 1);
  }
  Result<uint8_t> Read() {
    uint8_t byte = 0xEE;
    Status status = backend_.Copy(&byte, reinterpret_cast<const void*>(base_), 1,
                                  gpu::CopyKind::kDeviceToHost);
    if (!status.ok()) return status;
    return byte;
  }

 private:
  gpu::Backend& backend_;
  uintptr_t base_ = 0;
  bool mapped_ = false;
  Status status_ = Status::Internal("not mapped");
};

// A real backend whose next `failures` CreatePage calls fail as a full
// device's do (kOutOfMemory, call "CreatePage"): the one fault a recycle can
// meet once it released the old page, and no real device can be made to
// show it on cue. Everything else goes to `inner`, which must outlive it.
class CreateFailingBackend final : public gpu::Backend {
 public:
  explicit CreateFailingBackend(gpu::Backend& inner) : inner_(inner) {}
  void FailCreates(int failures) { failures_.store(failures); }

  std::string_view name() const override { return inner_.name(); }
  int device_count() const override { return inner_.device_count(); }
  Result<gpu::DeviceInfo> GetDeviceInfo(int device) override {
    return inner_.GetDeviceInfo(device);
  }
  Result<size_t> GetFreeMemory(int device) override { return inner_.GetFreeMemory(device); }
  Result<gpu::PageHandle> CreatePage(int device, size_t size) override {
    if (failures_.load() > 0 && failures_.fetch_sub(1) > 0) {
      return Status(Code::kOutOfMemory, "device full (injected by the test)", "CreatePage",
                    "CUDA_ERROR_OUT_OF_MEMORY");
    }
    return inner_.CreatePage(device, size);
  }
  Result<int> ExportPage(gpu::PageHandle page) override { return inner_.ExportPage(page); }
  Result<int> ExportReadOnly(int fd) override { return inner_.ExportReadOnly(fd); }
  Result<gpu::PageHandle> ImportPage(int fd, int device, size_t size) override {
    return inner_.ImportPage(fd, device, size);
  }
  Status ReleasePage(gpu::PageHandle page) override { return inner_.ReleasePage(page); }
  Result<uintptr_t> ReserveRange(size_t size, size_t alignment) override {
    return inner_.ReserveRange(size, alignment);
  }
  Status FreeRange(uintptr_t base, size_t size) override { return inner_.FreeRange(base, size); }
  Status Map(uintptr_t address, size_t size, gpu::PageHandle page) override {
    return inner_.Map(address, size, page);
  }
  Status SetAccess(uintptr_t address, size_t size, std::span<const int> devices,
                   gpu::Access access = gpu::Access::kReadWrite) override {
    return inner_.SetAccess(address, size, devices, access);
  }
  Result<bool> HasAccess(uintptr_t address, int device) override {
    return inner_.HasAccess(address, device);
  }
  Status Unmap(uintptr_t address, size_t size) override { return inner_.Unmap(address, size); }
  Status Copy(void* dst, const void* src, size_t bytes, gpu::CopyKind kind) override {
    return inner_.Copy(dst, src, bytes, kind);
  }
  Status Fill(void* dst, uint8_t value, size_t bytes) override {
    return inner_.Fill(dst, value, bytes);
  }
  Result<gpu::StreamHandle> CreateStream(int device) override { return inner_.CreateStream(device); }
  Status CopyAsync(void* dst, const void* src, size_t bytes, gpu::CopyKind kind, gpu::StreamHandle stream) override {
    return inner_.CopyAsync(dst, src, bytes, kind, stream);
  }
  Status SyncStream(gpu::StreamHandle stream) override { return inner_.SyncStream(stream); }
  Status DestroyStream(gpu::StreamHandle stream) override { return inner_.DestroyStream(stream); }

 private:
  gpu::Backend& inner_;
  std::atomic<int> failures_{0};
};

}  // namespace nanokv::kvd::pool_testing

#endif  // NANOKV_TESTS_UNIT_DAEMON_PAGE_POOL_TEST_UTIL_H_
