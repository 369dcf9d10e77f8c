// The cuda backend's streams (gpu::Backend::CreateStream) are non-blocking:
// their copies run while the legacy default stream, which Backend::Copy and
// every plain cuMemcpy of the process use, is held up. That is why kvd's
// tier worker copies on one (docs/ARCHITECTURE.md, "Device work in kvd"):
// its demotions and promotions neither wait behind the transfer agent's
// copies nor make them wait. The semantics every backend shares (order,
// SyncStream, refusals) are tests/unit/gpu/backend_stream_test.cc's.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "gpu/backend.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::gpu {
namespace {

using namespace std::chrono_literals;

// A host function on a stream: the stream waits until *flag is true. It
// makes no CUDA call, as a host function must not.
void CUDART_CB HoldUntilReleased(void* flag) {
  auto* released = static_cast<std::atomic<bool>*>(flag);
  while (!released->load()) std::this_thread::sleep_for(1ms);
}

// Pinned host memory, so the copies are truly asynchronous.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) {
    if (cudaMallocHost(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

TEST(BackendStreamGpuTest, AStreamCopiesWhileTheLegacyDefaultStreamIsHeld) {
  NANOKV_SKIP_WITHOUT_GPU();
  auto made = MakeCudaBackend();
  if (!made.ok()) GTEST_SKIP() << "no cuda backend here: " << made.status().ToString();
  Backend& backend = **made;
  auto info = backend.GetDeviceInfo(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const size_t bytes = info->granularity;
  auto base = backend.ReserveRange(bytes, 0);
  auto page = backend.CreatePage(0, bytes);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_OK(backend.Map(*base, bytes, *page));
  const int zero[] = {0};
  ASSERT_OK(backend.SetAccess(*base, bytes, zero));
  void* device = reinterpret_cast<void*>(*base);
  PinnedBuffer in(bytes), out(bytes);
  ASSERT_TRUE(in.get() != nullptr && out.get() != nullptr);
  const std::vector<uint8_t> pattern = nanokv::testing::Pattern(7, bytes);
  std::memcpy(in.get(), pattern.data(), bytes);
  auto stream = backend.CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();

  // cudart runs in the device's primary context, the backend's too: one
  // legacy default stream. Hold it up, then copy on the backend's stream.
  CUDA_ASSERT(cudaSetDevice(0));
  std::atomic<bool> released{false};
  CUDA_ASSERT(cudaLaunchHostFunc(cudaStreamLegacy, HoldUntilReleased, &released));
  auto copied = std::async(std::launch::async, [&]() -> Status {
    NANOKV_RETURN_IF_ERROR(backend.CopyAsync(device, in.get(), bytes, CopyKind::kHostToDevice, *stream));
    NANOKV_RETURN_IF_ERROR(backend.CopyAsync(out.get(), device, bytes, CopyKind::kDeviceToHost, *stream));
    return backend.SyncStream(*stream);
  });
  const bool finished = copied.wait_for(20s) == std::future_status::ready;
  released.store(true);  // whatever happened: the legacy stream goes on
  EXPECT_TRUE(finished) << "the stream's copies waited for the legacy default stream: it is not non-blocking";
  ASSERT_OK(copied.get());
  EXPECT_EQ(std::memcmp(out.get(), pattern.data(), bytes), 0) << "the copies did not land in order";
  CUDA_ASSERT(cudaDeviceSynchronize());

  ASSERT_OK(backend.DestroyStream(*stream));
  ASSERT_OK(backend.Unmap(*base, bytes));
  ASSERT_OK(backend.ReleasePage(*page));
  ASSERT_OK(backend.FreeRange(*base, bytes));
}

// Many copies queued at once, big enough to be running while more are
// queued, still read back in order: the tier worker's payload then READY
// header, at scale.
TEST(BackendStreamGpuTest, QueuedCopiesLandInOrder) {
  NANOKV_SKIP_WITHOUT_GPU();
  auto made = MakeCudaBackend();
  if (!made.ok()) GTEST_SKIP() << "no cuda backend here: " << made.status().ToString();
  Backend& backend = **made;
  auto info = backend.GetDeviceInfo(0);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const size_t bytes = 32 * info->granularity;  // 64 MiB on an H100
  auto base = backend.ReserveRange(bytes, 0);
  auto page = backend.CreatePage(0, bytes);
  ASSERT_TRUE(base.ok() && page.ok());
  ASSERT_OK(backend.Map(*base, bytes, *page));
  const int zero[] = {0};
  ASSERT_OK(backend.SetAccess(*base, bytes, zero));
  auto* device = reinterpret_cast<uint8_t*>(*base);
  PinnedBuffer first(bytes), second(bytes), out(bytes);
  ASSERT_TRUE(first.get() != nullptr && second.get() != nullptr && out.get() != nullptr);
  const std::vector<uint8_t> a = nanokv::testing::Pattern(1, bytes), b = nanokv::testing::Pattern(2, bytes);
  std::memcpy(first.get(), a.data(), bytes);
  std::memcpy(second.get(), b.data(), bytes);
  auto stream = backend.CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  for (int round = 0; round < 4; ++round) {
    // The whole of `first`, then `second` over its last 4 KiB (a header
    // after its payload), then all of it back.
    ASSERT_OK(backend.CopyAsync(device, first.get(), bytes, CopyKind::kHostToDevice, *stream));
    ASSERT_OK(backend.CopyAsync(device + bytes - 4096, second.get(), 4096, CopyKind::kHostToDevice, *stream));
    ASSERT_OK(backend.CopyAsync(out.get(), device, bytes, CopyKind::kDeviceToHost, *stream));
    ASSERT_OK(backend.SyncStream(*stream));
    ASSERT_EQ(std::memcmp(out.get(), a.data(), bytes - 4096), 0) << "round " << round;
    ASSERT_EQ(std::memcmp(out.get() + bytes - 4096, b.data(), 4096), 0) << "round " << round;
  }
  ASSERT_OK(backend.DestroyStream(*stream));
  ASSERT_OK(backend.Unmap(*base, bytes));
  ASSERT_OK(backend.ReleasePage(*page));
  ASSERT_OK(backend.FreeRange(*base, bytes));
}

}  // namespace
}  // namespace nanokv::gpu
