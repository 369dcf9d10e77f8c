// Streams (backend.h): the same tests on every backend present, as the
// conformance suite runs. host always runs (CI); cuda and hip run where a
// device is found (the GPU machine runs this binary from scripts/gpu-bundle.sh)
// and skip cleanly, with the reason, where none is. What is the host
// backend's own (copies run at SyncStream) is in host_backend_test.cc.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "tests/unit/gpu/backend_test_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::gpu {
namespace {

using testing::CheckPattern;
using testing::Pattern;

class BackendStream : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto opened = OpenBackend(GetParam());
    if (!opened.ok()) {
      ASSERT_NE(GetParam(), "host") << opened.status().ToString();
      GTEST_SKIP() << GetParam() << " backend not available here: " << opened.status().ToString();
    }
    backend_ = std::move(opened).value();
    auto info = backend_->GetDeviceInfo(0);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    gran_ = info->granularity;
  }

  void TearDown() override {
    if (!backend_) return;
    if (mapped_) EXPECT_OK(b().Unmap(base_, gran_));
    if (page_.valid()) EXPECT_OK(b().ReleasePage(page_));
    if (base_ != 0) EXPECT_OK(b().FreeRange(base_, gran_));
  }

  Backend& b() { return *backend_; }

  // One page of device 0 mapped at base_, read-write for device 0.
  void MapPage() {
    auto base = b().ReserveRange(gran_, 0);
    ASSERT_TRUE(base.ok()) << base.status().ToString();
    base_ = *base;
    auto page = b().CreatePage(0, gran_);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    page_ = *page;
    ASSERT_OK(b().Map(base_, gran_, page_));
    mapped_ = true;
    const int zero[] = {0};
    ASSERT_OK(b().SetAccess(base_, gran_, zero));
  }

  void* At(size_t offset) const { return reinterpret_cast<void*>(base_ + offset); }

  std::unique_ptr<Backend> backend_;
  size_t gran_ = 0;
  uintptr_t base_ = 0;
  PageHandle page_;
  bool mapped_ = false;
};

TEST_P(BackendStream, CopiesOnOneStreamRunInOrderAndAreDoneBySync) {
  ASSERT_NO_FATAL_FAILURE(MapPage());
  auto stream = b().CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const size_t half = gran_ / 2;
  const std::vector<uint8_t> a = Pattern(half, 1);
  const std::vector<uint8_t> c = Pattern(half / 2, 2);
  std::vector<uint8_t> back(half);
  // a, then c over a's first half, then all of it to the second half on the
  // device, then back to the host: each copy sees the ones before it.
  ASSERT_OK(b().CopyAsync(At(0), a.data(), half, CopyKind::kHostToDevice, *stream));
  ASSERT_OK(b().CopyAsync(At(0), c.data(), c.size(), CopyKind::kHostToDevice, *stream));
  ASSERT_OK(b().CopyAsync(At(half), At(0), half, CopyKind::kDeviceToDevice, *stream));
  ASSERT_OK(b().CopyAsync(back.data(), At(half), half, CopyKind::kDeviceToHost, *stream));
  ASSERT_OK(b().SyncStream(*stream));
  std::vector<uint8_t> want = a;
  std::memcpy(want.data(), c.data(), c.size());
  EXPECT_TRUE(back == want) << "the stream ran its copies out of order, or SyncStream returned early";
  EXPECT_OK(b().SyncStream(*stream));  // nothing queued: a no-op
  EXPECT_OK(b().DestroyStream(*stream));
}

TEST_P(BackendStream, StreamCopiesAreDeviceWorkAndCountedApart) {
  ASSERT_NO_FATAL_FAILURE(MapPage());
  auto stream = b().CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const uint64_t work = b().device_work_calls();
  const uint64_t streamed = b().stream_copy_calls();
  const std::vector<uint8_t> data = Pattern(4096, 3);
  ASSERT_OK(b().CopyAsync(At(0), data.data(), data.size(), CopyKind::kHostToDevice, *stream));
  ASSERT_OK(b().SyncStream(*stream));
  ASSERT_OK(CheckPattern(b(), base_, data.size(), 3));  // a Copy: device work, on no stream
  EXPECT_EQ(b().device_work_calls() - work, 2u);
  EXPECT_EQ(b().stream_copy_calls() - streamed, 1u);
  EXPECT_OK(b().DestroyStream(*stream));
}

TEST_P(BackendStream, UnknownAndDestroyedStreamsAreRefusedByName) {
  EXPECT_EQ(b().CreateStream(b().device_count()).status().code(), Code::kNotFound);
  EXPECT_EQ(b().CreateStream(-1).status().code(), Code::kNotFound);
  ASSERT_NO_FATAL_FAILURE(MapPage());
  uint8_t byte = 1;
  for (StreamHandle bad : {StreamHandle{}, StreamHandle{0x5eed}}) {
    Status refused = b().CopyAsync(At(0), &byte, 1, CopyKind::kHostToDevice, bad);
    EXPECT_EQ(refused.code(), Code::kNotFound) << refused.ToString();
    EXPECT_NE(refused.message().find("no stream handle"), std::string::npos) << refused.ToString();
    EXPECT_EQ(b().SyncStream(bad).code(), Code::kNotFound);
    EXPECT_EQ(b().DestroyStream(bad).code(), Code::kNotFound);
  }
  auto stream = b().CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  ASSERT_OK(b().CopyAsync(At(0), &byte, 1, CopyKind::kHostToDevice, *stream));
  ASSERT_OK(b().SyncStream(*stream));
  ASSERT_OK(b().DestroyStream(*stream));
  EXPECT_EQ(b().CopyAsync(At(0), &byte, 1, CopyKind::kHostToDevice, *stream).code(), Code::kNotFound);
  EXPECT_EQ(b().SyncStream(*stream).code(), Code::kNotFound);
  EXPECT_EQ(b().DestroyStream(*stream).code(), Code::kNotFound);
  auto next = b().CreateStream(0);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_NE(*next, *stream) << "a destroyed stream's handle is never handed out again";
  uint8_t got = 0;
  ASSERT_OK(b().CopyAsync(&got, At(0), 1, CopyKind::kDeviceToHost, *next));
  ASSERT_OK(b().SyncStream(*next));
  EXPECT_EQ(got, 1);
  EXPECT_OK(b().DestroyStream(*next));
}

// A stream's copy is checked as Copy is: a write into a read-only mapping,
// or any copy into a mapping without access, would fault on a GPU.
TEST_P(BackendStream, AStreamRefusesWhatCopyRefuses) {
  ASSERT_NO_FATAL_FAILURE(MapPage());
  uint8_t byte = 5;
  ASSERT_OK(b().Copy(At(0), &byte, 1, CopyKind::kHostToDevice));
  const int zero[] = {0};
  ASSERT_OK(b().SetAccess(base_, gran_, zero, Access::kReadOnly));
  auto stream = b().CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  byte = 9;
  EXPECT_EQ(b().CopyAsync(At(0), &byte, 1, CopyKind::kHostToDevice, *stream).code(), Code::kPermissionDenied);
  EXPECT_EQ(b().CopyAsync(At(1), At(0), 1, CopyKind::kDeviceToDevice, *stream).code(), Code::kPermissionDenied);
  ASSERT_OK(b().CopyAsync(&byte, At(0), 1, CopyKind::kDeviceToHost, *stream));  // reads go
  ASSERT_OK(b().SyncStream(*stream));
  EXPECT_EQ(byte, 5);
  EXPECT_EQ(b().CopyAsync(At(0), nullptr, 1, CopyKind::kHostToDevice, *stream).code(), Code::kInvalidArgument);
  EXPECT_EQ(b().CopyAsync(At(gran_ - 1), &byte, 2, CopyKind::kHostToDevice, *stream).code(), Code::kInvalidArgument)
      << "past the range";
  ASSERT_OK(b().SetAccess(base_, gran_, {}));
  EXPECT_EQ(b().CopyAsync(&byte, At(0), 1, CopyKind::kDeviceToHost, *stream).code(), Code::kPermissionDenied)
      << "a mapping without access";
  EXPECT_OK(b().DestroyStream(*stream));
}

// Each thread its own stream (the tier worker's, beside others'): nothing
// of one stream waits for or disturbs another's.
TEST_P(BackendStream, StreamsOfManyThreadsKeepTheirOwnOrder) {
  ASSERT_NO_FATAL_FAILURE(MapPage());
  constexpr int kThreads = 4;
  const size_t share = gran_ / kThreads;
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      results[t] = [&]() -> Status {
        NANOKV_ASSIGN_OR_RETURN(StreamHandle stream, b().CreateStream(0));
        for (uint32_t round = 0; round < 20; ++round) {
          const std::vector<uint8_t> data = Pattern(share, static_cast<uint32_t>(t) * 100 + round);
          std::vector<uint8_t> back(share);
          NANOKV_RETURN_IF_ERROR(b().CopyAsync(At(t * share), data.data(), share, CopyKind::kHostToDevice, stream));
          NANOKV_RETURN_IF_ERROR(b().CopyAsync(back.data(), At(t * share), share, CopyKind::kDeviceToHost, stream));
          NANOKV_RETURN_IF_ERROR(b().SyncStream(stream));
          if (back != data) return Status::Internal("thread " + std::to_string(t) + " read back other bytes");
        }
        return b().DestroyStream(stream);
      }();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const Status& result : results) EXPECT_OK(result);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendStream, ::testing::Values("host", "cuda", "hip"),
                         [](const ::testing::TestParamInfo<std::string>& param) { return param.param; });

}  // namespace
}  // namespace nanokv::gpu
