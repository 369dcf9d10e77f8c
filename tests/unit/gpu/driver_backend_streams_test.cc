// DriverBackend's streams over a fake driver (fake_driver_backend.h): what
// cuda and hip share, run on every machine since CI has no GPU. The
// semantics themselves (order, SyncStream, read-only refusal) are
// backend_stream_test.cc's, on every backend present.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "tests/unit/gpu/fake_driver_backend.h"

namespace nanokv::gpu {
namespace {

using testing::DriverBackendFakeTest;

// Streams (backend.h): handles are the backend's own numbers, a copy on one
// runs on the stream's device, and what cuda or hip would fault on or
// crash on (an unknown handle) never reaches the driver.
TEST_F(DriverBackendFakeTest, AStreamCopiesOnItsOwnDeviceAndRefusesWhatItCannotReach) {
  EXPECT_EQ(b().CreateStream(2).status().code(), Code::kNotFound);
  auto base = b().ReserveRange(kGran, 0);
  auto page = b().CreatePage(1, kGran);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_TRUE(b().Map(*base, kGran, *page).ok());
  const int one[] = {1};
  ASSERT_TRUE(b().SetAccess(*base, kGran, one).ok());
  auto on_one = b().CreateStream(1);
  auto on_zero = b().CreateStream(0);
  ASSERT_TRUE(on_one.ok() && on_zero.ok());
  EXPECT_NE(*on_one, *on_zero);
  EXPECT_EQ(b().stream_device, 0) << "made on its device";

  log_->clear();
  uint8_t byte = 7;
  void* device = reinterpret_cast<void*>(*base);
  const uint64_t calls = b().device_work_calls();
  ASSERT_TRUE(b().CopyAsync(device, &byte, 1, CopyKind::kHostToDevice, *on_one).ok());
  EXPECT_EQ(b().copy_device, 1);
  EXPECT_NE(b().copy_stream, on_one->value) << "the driver gets its own handle, not ours";
  EXPECT_EQ(b().CopyAsync(device, &byte, 1, CopyKind::kHostToDevice, *on_zero).code(), Code::kPermissionDenied)
      << "device 0 has no access there, and its stream cannot hand the copy on";
  EXPECT_EQ(b().CopyAsync(device, &byte, 1, CopyKind::kHostToDevice, StreamHandle{0xbad}).code(), Code::kNotFound);
  EXPECT_EQ(b().SyncStream(StreamHandle{0xbad}).code(), Code::kNotFound);
  EXPECT_EQ(b().DestroyStream(StreamHandle{}).code(), Code::kNotFound);
  EXPECT_EQ(*log_, std::vector<std::string>{"MemcpyAsync"}) << "refusals never reach the driver";
  EXPECT_EQ(b().device_work_calls() - calls, 3u) << "every CopyAsync is device work";
  EXPECT_EQ(b().stream_copy_calls(), 3u);

  ASSERT_TRUE(b().SetAccess(*base, kGran, one, Access::kReadOnly).ok());
  EXPECT_EQ(b().CopyAsync(device, &byte, 1, CopyKind::kHostToDevice, *on_one).code(), Code::kPermissionDenied);
  EXPECT_TRUE(b().CopyAsync(&byte, device, 1, CopyKind::kDeviceToHost, *on_one).ok()) << "reads still go";
  EXPECT_TRUE(b().SyncStream(*on_one).ok());
  EXPECT_EQ(log_->back(), "StreamSynchronize");

  b().refuse = "StreamDestroy";
  EXPECT_FALSE(b().DestroyStream(*on_one).ok());
  b().refuse.clear();
  EXPECT_TRUE(b().SyncStream(*on_one).ok()) << "a refused destroy keeps the stream";
  EXPECT_TRUE(b().DestroyStream(*on_one).ok());
  EXPECT_EQ(b().SyncStream(*on_one).code(), Code::kNotFound);
  EXPECT_EQ(b().DestroyStream(*on_one).code(), Code::kNotFound);
  ASSERT_TRUE(b().Unmap(*base, kGran).ok());
  ASSERT_TRUE(b().FreeRange(*base, kGran).ok());
  ASSERT_TRUE(b().ReleasePage(*page).ok());

  log_->clear();
  fake_.reset();
  EXPECT_EQ(*log_, std::vector<std::string>{"StreamDestroy"}) << "the stream callers left";
}

}  // namespace
}  // namespace nanokv::gpu
