// The prefix cache across nodes: two real kvds and a real master, an engine
// on each node. One computes a prompt and stores its chunks (on the other
// node, as the master routes them); the other looks the prefix up and loads
// it byte-exact. The same API as on the node's store (prefix_cache_test.cc).
#include <cstring>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/prefix_cache.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

constexpr uint32_t kChunk = 8;
constexpr uint32_t kLayers = 2;
constexpr uint64_t kTokenBytes = 128;
constexpr uint32_t kPlanes = kLayers * 2;

class PrefixCacheClusterTest : public ClusterDeviceFixture {
 protected:
  static PrefixCacheOptions Options(const std::string& segment = "") {
    PrefixCacheOptions o;
    o.space = {.model = "qwen2", .dtype = "bf16", .layout = "thd", .salt = ""};
    o.layout = {.layers = kLayers, .planes_per_layer = 2, .token_bytes = kTokenBytes};
    o.chunk_tokens = kChunk;
    o.cluster_write.preferred_segment = segment;
    return o;
  }

  static std::vector<std::byte> Pattern(uint64_t tokens, uint32_t plane) {
    std::vector<std::byte> out(tokens * kTokenBytes);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 13 + plane * 29 + 3) & 0xff);
    return out;
  }

  std::vector<PrefixPlane> Planes(uint64_t tokens, bool patterned) {
    std::vector<PrefixPlane> planes;
    for (uint32_t p = 0; p < kPlanes; ++p) {
      gpu::DeviceBuffer* buffer = NewBuffer(tokens * kTokenBytes);
      if (buffer == nullptr) return {};
      void* at = buffer->get();
      std::vector<std::byte> bytes = patterned ? Pattern(tokens, p) : std::vector<std::byte>(tokens * kTokenBytes);
      EXPECT_OK(backend_->Copy(at, bytes.data(), bytes.size(), gpu::CopyKind::kHostToDevice));
      planes.push_back({at, tokens});
    }
    return planes;
  }

  std::vector<std::byte> Read(const PrefixPlane& plane, uint64_t tokens) {
    return ClusterDeviceFixture::Read(plane.base, tokens * kTokenBytes);
  }
};

TEST_F(PrefixCacheClusterTest, TwoNodesShareAPrefix) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto c0 = Client(0);
  auto c1 = Client(1);
  ASSERT_TRUE(c0 && c1);
  // n0's engine writes its chunks onto n1.
  auto writer = PrefixCache::OnCluster(c0.get(), Options("n1"));
  auto reader = PrefixCache::OnCluster(c1.get(), Options());
  ASSERT_TRUE(writer.ok() && reader.ok()) << writer.status().ToString() << reader.status().ToString();
  std::vector<int32_t> prompt(30);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(5000 + i * 3);
  EXPECT_EQ(*(*reader)->Lookup(prompt), 0u);
  auto written = (*writer)->Store(prompt, Planes(30, true), 0);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, 3u);
  auto keys = (*writer)->ChunkKeys(prompt);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(Where(*c0, PrefixCache::ObjectKey((*keys)[1])), std::vector<std::string>{"n1"});
  // n1's engine: another prompt sharing the first 26 tokens hits 3 chunks
  // (24 tokens) and loads them byte-exact.
  std::vector<int32_t> next = prompt;
  next.resize(26);
  next.resize(40, 77);
  auto hit = (*reader)->Lookup(next);
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_EQ(*hit, 24u);
  std::vector<PrefixPlane> into = Planes(40, false);
  auto loaded = (*reader)->Load(next, *hit, into);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, 24u);
  for (uint32_t p = 0; p < kPlanes; ++p) {
    std::vector<std::byte> got = Read(into[p], 24);
    std::vector<std::byte> want = Pattern(30, p);
    EXPECT_TRUE(std::memcmp(got.data(), want.data(), got.size()) == 0) << "plane " << p;
  }
  // The reader stores its new chunks (from 24 on): chunks 3 and 4 of `next`.
  EXPECT_EQ(*(*reader)->Store(next, into, *loaded), 2u);
  EXPECT_EQ(*(*writer)->Lookup(next), 40u);
  // A middle chunk removed from the cluster: the prefix ends before it, on either node.
  ASSERT_OK(c0->Remove(PrefixCache::ObjectKey((*keys)[1])));
  EXPECT_EQ(*(*reader)->Lookup(next), 8u);
  EXPECT_EQ(*(*writer)->Lookup(prompt), 8u);
}

}  // namespace
}  // namespace nanokv::testing
