// A DriverBackend over a fake driver, for the tests of what the cuda and hip
// backends share (the record, undo when the driver refuses, which devices
// lose access, streams, teardown), run on every machine since CI has no GPU:
// driver_backend_test.cc and driver_backend_streams_test.cc.
#ifndef NANOKV_TESTS_UNIT_GPU_FAKE_DRIVER_BACKEND_H_
#define NANOKV_TESTS_UNIT_GPU_FAKE_DRIVER_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/driver_backend.h"

namespace nanokv::gpu::testing {

// Keeps no memory: hands out handles and addresses, logs each operation, and
// fails the one named in `refuse`. The log outlives the backend, for teardown.
class FakeDriverBackend final : public DriverBackend {
 public:
  static constexpr size_t kGran = size_t{2} << 20;

  explicit FakeDriverBackend(std::shared_ptr<std::vector<std::string>> log)
      : DriverBackend("FAKE"), log_(std::move(log)) {}
  ~FakeDriverBackend() override { ReleaseEverything(); }

  std::string_view name() const override { return "fake"; }
  int device_count() const override { return 2; }
  Result<DeviceInfo> GetDeviceInfo(int device) override {
    NANOKV_RETURN_IF_ERROR(CheckDevice(device));
    return DeviceInfo{device, "fake", kGran, 64 * kGran};
  }
  Result<size_t> GetFreeMemory(int) override { return 64 * kGran; }

  std::string refuse;           // the operation to fail
  uint64_t import_handle = 0;   // what MemImport answers
  uint64_t access_devices = 0;  // MemSetAccess's last arguments
  uint64_t access_grant = 0;
  bool access_read_only = false;
  int copy_device = -1;      // Memcpy's (or MemcpyAsync's) last device
  uint64_t copy_stream = 0;  // MemcpyAsync's last stream, the driver's handle
  int stream_device = -1;    // StreamCreate's last device

 private:
  Status Log(std::string operation) {
    log_->push_back(operation);
    if (operation != refuse) return Status::OK();
    return Status(Code::kInternal, "refused", operation, "FAKE_ERROR");
  }

  Result<size_t> ReadyDevice(int) override { return kGran; }
  int AmbientDevice() const override { return 0; }
  Result<uint64_t> MemCreate(int, size_t) override {
    NANOKV_RETURN_IF_ERROR(Log("MemCreate"));
    return next_handle_++;
  }
  Result<int> MemExport(int, uint64_t) override { return Status::Unsupported("no export"); }
  Result<uint64_t> MemImport(int, int, size_t) override {
    NANOKV_RETURN_IF_ERROR(Log("MemImport"));
    return import_handle;
  }
  Status MemRelease(int, uint64_t) override { return Log("MemRelease"); }
  Result<uintptr_t> AddressReserve(int, size_t size, size_t) override {
    NANOKV_RETURN_IF_ERROR(Log("AddressReserve"));
    uintptr_t base = next_base_;
    next_base_ += size + kGran;
    return base;
  }
  Status AddressFree(uintptr_t, size_t) override { return Log("AddressFree"); }
  Status MemMap(int, uintptr_t, size_t, uint64_t) override { return Log("MemMap"); }
  Status MemSetAccess(int, uintptr_t, size_t, uint64_t devices, uint64_t grant, bool read_only) override {
    access_devices = devices;
    access_grant = grant;
    access_read_only = read_only;
    return Log("MemSetAccess");
  }
  Result<bool> MemGetAccess(int, uintptr_t, int) override { return false; }
  Status MemUnmap(int, uintptr_t, size_t) override { return Log("MemUnmap"); }
  Status Memcpy(int device, void*, const void*, size_t, CopyKind) override {
    copy_device = device;
    return Log("Memcpy");
  }
  Status Memset(int, void*, uint8_t, size_t) override { return Log("Memset"); }
  Result<uint64_t> StreamCreate(int device) override {
    NANOKV_RETURN_IF_ERROR(Log("StreamCreate"));
    stream_device = device;
    return next_handle_++;
  }
  Status MemcpyAsync(int device, void*, const void*, size_t, CopyKind, uint64_t stream) override {
    copy_device = device;
    copy_stream = stream;
    return Log("MemcpyAsync");
  }
  Status StreamSynchronize(int, uint64_t) override { return Log("StreamSynchronize"); }
  Status StreamDestroy(int, uint64_t) override { return Log("StreamDestroy"); }

  std::shared_ptr<std::vector<std::string>> log_;
  uint64_t next_handle_ = 0x100;
  uintptr_t next_base_ = uintptr_t{0x7e0000000000};
};

class DriverBackendFakeTest : public ::testing::Test {
 protected:
  static constexpr size_t kGran = FakeDriverBackend::kGran;
  std::shared_ptr<std::vector<std::string>> log_ = std::make_shared<std::vector<std::string>>();
  std::unique_ptr<FakeDriverBackend> fake_ = std::make_unique<FakeDriverBackend>(log_);
  FakeDriverBackend& b() { return *fake_; }
};

}  // namespace nanokv::gpu::testing

#endif  // NANOKV_TESTS_UNIT_GPU_FAKE_DRIVER_BACKEND_H_
