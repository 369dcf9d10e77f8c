// gpu::PinnedPool (gpu/pinned_pool.h) on the host backend: buffers made on
// first need up to the bound, handed out once each, given back, and a free
// one made again larger when every buffer is made and none is large enough
// (a peer with a larger chunk must not wait for ever).
#include "gpu/pinned_pool.h"

#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "gpu/backend.h"

namespace nanokv::gpu {
namespace {

class PinnedPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = OpenBackend("host");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    backend_ = std::move(opened).value();
  }
  std::unique_ptr<Backend> backend_;
};

TEST_F(PinnedPoolTest, HandsOutEachBufferOnceUpToTheBound) {
  PinnedPool pool(*backend_, 3, "test");
  std::set<std::byte*> out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.CanTake());
    std::byte* buffer = pool.Take(4096);
    ASSERT_NE(buffer, nullptr);
    std::memset(buffer, i, 4096);  // all of it is ours (ASan would say otherwise)
    EXPECT_TRUE(out.insert(buffer).second) << "a buffer handed out twice";
  }
  EXPECT_EQ(pool.buffers_made(), 3u);
  EXPECT_FALSE(pool.CanTake());
  EXPECT_EQ(pool.Take(4096), nullptr);
  // Given back: taken again, no new buffer made; a smaller request fits it.
  std::byte* back = *out.begin();
  pool.Give(back);
  EXPECT_TRUE(pool.CanTake());
  EXPECT_EQ(pool.Take(1024), back);
  EXPECT_EQ(pool.buffers_made(), 3u);
  pool.Give(nullptr);  // nothing
}

TEST_F(PinnedPoolTest, AFreeBufferTooSmallIsMadeAgainLarger) {
  PinnedPool pool(*backend_, 2, "test");
  std::byte* a = pool.Take(4096);
  std::byte* b = pool.Take(4096);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // All made, all out: nothing, whatever the size.
  EXPECT_FALSE(pool.CanTake());
  EXPECT_EQ(pool.Take(1 << 20), nullptr);
  // One back, too small for 1 MiB: made again at 1 MiB rather than never.
  pool.Give(a);
  EXPECT_TRUE(pool.CanTake());
  std::byte* large = pool.Take(1 << 20);
  ASSERT_NE(large, nullptr);
  std::memset(large, 7, 1 << 20);
  EXPECT_EQ(pool.buffers_made(), 2u);
  // The larger one serves small requests afterwards too.
  pool.Give(large);
  EXPECT_EQ(pool.Take(4096), large);
}

}  // namespace
}  // namespace nanokv::gpu
