// kernels::ForkStreams / JoinStreams, which spread a batch's puts over
// several streams: the forked streams start only after the caller's earlier
// work, and the caller's stream goes on only after theirs. The pool's
// streams are non-blocking, so nothing but the fork and the join orders
// them: without either, the copies below read a source not yet written, or
// are still running when the caller's stream says it is done.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/kv_kernels.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kernels {
namespace {

using testing::DeviceBuffer;

TEST(StreamFanGpuTest, ForkedStreamsKeepTheCallersOrderOnBothSides) {
  NANOKV_SKIP_WITHOUT_GPU();
  constexpr size_t kSlow = size_t{256} << 20, kPiece = size_t{16} << 20;
  constexpr int kWays = kMaxFanStreams;
  cudaStream_t stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceBuffer slow_src(kSlow), slow_dst(kSlow), pattern(kPiece), source(kPiece), copies(kWays * kPiece);
  ASSERT_TRUE(slow_src.ok() && slow_dst.ok() && pattern.ok() && source.ok() && copies.ok());
  const std::vector<std::uint8_t> expected = testing::Pattern(11, kPiece);
  CUDA_ASSERT(cudaMemcpy(pattern.get(), expected.data(), kPiece, cudaMemcpyHostToDevice));
  std::vector<std::uint8_t> back(kPiece);
  for (int round = 0; round < 4; ++round) {
    CUDA_ASSERT(cudaMemset(source.get(), 0, kPiece));
    CUDA_ASSERT(cudaMemset(copies.get(), 0, copies.size()));
    CUDA_ASSERT(cudaDeviceSynchronize());
    // The caller's stream: slow work, then the source's bytes.
    CUDA_ASSERT(cudaMemcpyAsync(slow_dst.get(), slow_src.get(), kSlow, cudaMemcpyDeviceToDevice, stream));
    CUDA_ASSERT(cudaMemcpyAsync(source.get(), pattern.get(), kPiece, cudaMemcpyDeviceToDevice, stream));
    void* forked[kWays] = {};
    ASSERT_OK(ForkStreams(stream, kWays, forked));
    for (int i = 0; i < kWays; ++i) {
      EXPECT_NE(forked[i], static_cast<void*>(stream));
      CUDA_ASSERT(cudaMemcpyAsync(copies.bytes_at(i * kPiece), source.get(), kPiece, cudaMemcpyDeviceToDevice,
                                  static_cast<cudaStream_t>(forked[i])));
    }
    ASSERT_OK(JoinStreams(stream, forked, kWays));
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    // Read back through a stream of its own (the legacy stream would wait
    // for blocking streams only, which these are not either).
    for (int i = 0; i < kWays; ++i) {
      CUDA_ASSERT(cudaMemcpyAsync(back.data(), copies.bytes_at(i * kPiece), kPiece, cudaMemcpyDeviceToHost, stream));
      CUDA_ASSERT(cudaStreamSynchronize(stream));
      ASSERT_EQ(back, expected) << "round " << round << ", forked stream " << i;
    }
  }
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

TEST(StreamFanGpuTest, BadArgumentsAreRefused) {
  NANOKV_SKIP_WITHOUT_GPU();
  void* forked[kMaxFanStreams + 1] = {};
  EXPECT_EQ(ForkStreams(nullptr, 2, forked).code(), Code::kInvalidArgument);
  cudaStream_t stream = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EXPECT_EQ(ForkStreams(stream, 0, forked).code(), Code::kInvalidArgument);
  EXPECT_EQ(ForkStreams(stream, kMaxFanStreams + 1, forked).code(), Code::kInvalidArgument);
  EXPECT_EQ(JoinStreams(stream, nullptr, 2).code(), Code::kInvalidArgument);
  CUDA_ASSERT(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace nanokv::kernels
