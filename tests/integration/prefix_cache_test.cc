// The prefix cache over a real kvd's object store (host backend here, cuda
// with NANOKV_TEST_BACKEND=cuda): keys that are a stable chain inside a
// namespace, lookups that stop at the first hole, chunks of every plane
// byte-exact after a load and in views, eviction of a chunk ending the
// prefix there, and hostile inputs refused with an error naming them.
#include <cstring>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/prefix_cache.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

constexpr uint32_t kChunk = 4;
constexpr uint32_t kLayers = 3;
constexpr uint64_t kTokenBytes = 64;
constexpr uint32_t kPlanes = kLayers * 2;

class PrefixCacheTest : public KvdFixture {
 protected:
  void SetUp() override {
    KvdFixture::SetUp();
    StartKvd(32, {"--config", WriteConfig(kTestStoreYaml)});
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
    auto backend = gpu::OpenBackend(Backend());
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(*backend);
  }
  void TearDown() override {
    buffers_.clear();
    store_.reset();
    KvdFixture::TearDown();
  }

  static PrefixCacheOptions Options(const std::string& salt = "tenant-a", const std::string& model = "llama") {
    PrefixCacheOptions o;
    o.space = {.model = model, .dtype = "bf16", .layout = "thd", .salt = salt};
    o.layout = {.layers = kLayers, .planes_per_layer = 2, .token_bytes = kTokenBytes};
    o.chunk_tokens = kChunk;
    o.preferred_device = 0;
    return o;
  }

  std::unique_ptr<PrefixCache> Cache(const PrefixCacheOptions& o = Options()) {
    auto cache = PrefixCache::OnNode(store_.get(), o);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return cache.ok() ? std::move(cache).value() : nullptr;
  }

  // Planes of `tokens` tokens each in device memory, every byte a function
  // of (seed, plane, offset), or `fill`.
  std::vector<PrefixPlane> Planes(uint64_t tokens, int seed, std::byte fill = std::byte{0}) {
    std::vector<PrefixPlane> planes;
    for (uint32_t p = 0; p < kPlanes; ++p) {
      auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, tokens * kTokenBytes);
      EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
      if (!buffer.ok()) return {};
      std::vector<std::byte> bytes =
          seed >= 0 ? Pattern(tokens, seed, p) : std::vector<std::byte>(tokens * kTokenBytes, fill);
      EXPECT_OK(backend_->Copy((*buffer)->get(), bytes.data(), bytes.size(), gpu::CopyKind::kHostToDevice));
      planes.push_back({(*buffer)->get(), tokens});
      buffers_.push_back(std::move(buffer).value());
    }
    return planes;
  }

  static std::vector<std::byte> Pattern(uint64_t tokens, int seed, uint32_t plane) {
    std::vector<std::byte> out(tokens * kTokenBytes);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 7 + plane * 31 + seed * 101) & 0xff);
    return out;
  }

  std::vector<std::byte> Read(const PrefixPlane& plane, uint64_t tokens) {
    std::vector<std::byte> out(tokens * kTokenBytes);
    EXPECT_OK(backend_->Copy(out.data(), plane.base, out.size(), gpu::CopyKind::kDeviceToHost));
    return out;
  }

  static std::vector<int32_t> Tokens(size_t n, int32_t first = 100) {
    std::vector<int32_t> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = first + static_cast<int32_t>(i);
    return t;
  }

  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<gpu::Backend> backend_;
  std::vector<std::unique_ptr<gpu::DeviceBuffer>> buffers_;
};

TEST_F(PrefixCacheTest, KeysAreAStableChainInsideTheNamespace) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(18);
  auto keys = cache->ChunkKeys(tokens);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  // Only full chunks have keys; the digests are SHA-256 over the namespace
  // and layout, then each chunk's little-endian tokens after the previous
  // digest (computed independently with Python's hashlib).
  ASSERT_EQ(keys->size(), 4u);
  EXPECT_EQ((*keys)[0], "99a97a1cb7b8781ac9d48c0673da2ee6542fef8d685ed72e7564e22d87e6be1b");
  EXPECT_EQ((*keys)[3], "82bb578bf9e791365289df60d4ebec928eae6691456c29ff1049e3f6d65b8d0c");
  EXPECT_EQ(PrefixCache::ObjectKey((*keys)[0]), "kvc:" + (*keys)[0]);
  // A chunk's key covers every token before and in it, none after.
  std::vector<int32_t> changed = tokens;
  changed[5] = 7;  // in chunk 1
  auto other = cache->ChunkKeys(changed);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)[0], (*keys)[0]);
  for (size_t c = 1; c < 4; ++c) EXPECT_NE((*other)[c], (*keys)[c]) << c;
  // Every namespace field, the chunk size and the layout isolate.
  std::vector<PrefixCacheOptions> others(7, Options());
  others[0].space.model = "qwen2";
  others[1].space.dtype = "fp16";
  others[2].space.layout = "htd";
  others[3].space.salt = "tenant-b";
  others[4].chunk_tokens = 2;
  others[5].layout.layers = 2;
  others[6].layout.token_bytes = 32;
  for (size_t i = 0; i < others.size(); ++i) {
    auto keyed = Cache(others[i]);
    ASSERT_NE(keyed, nullptr);
    auto k = keyed->ChunkKeys(tokens);
    ASSERT_TRUE(k.ok());
    EXPECT_NE((*k)[0], (*keys)[0]) << "option set " << i;
  }
  // Fields are length-prefixed: moving a byte between two fields is another namespace.
  PrefixCacheOptions a = Options(), b = Options();
  a.space.dtype = "bf16x";
  a.space.layout = "hd";
  b.space.dtype = "bf16";
  b.space.layout = "xhd";
  EXPECT_NE(*Cache(a)->ChunkKeys(tokens), *Cache(b)->ChunkKeys(tokens));
}

TEST_F(PrefixCacheTest, StoreThenLoadIsByteExactForEveryPlane) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(18);
  EXPECT_EQ(*cache->Lookup(tokens), 0u);
  std::vector<PrefixPlane> kv = Planes(18, 1);
  auto written = cache->Store(tokens, kv, 0);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, 4u);  // 16 of the 18 tokens: the tail is no full chunk
  EXPECT_EQ(*cache->Lookup(tokens), 16u);
  // A second store finds every chunk there and writes none.
  EXPECT_EQ(*cache->Store(tokens, kv, 0), 0u);
  // A longer prompt with the same start hits the same 16 tokens.
  std::vector<int32_t> longer = Tokens(40);
  EXPECT_EQ(*cache->Lookup(longer), 16u);
  // Into memory that held something else: every plane's 16 tokens exact,
  // the rest untouched.
  std::vector<PrefixPlane> into = Planes(18, -1, std::byte{0xEE});
  auto loaded = cache->Load(tokens, 16, into);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, 16u);
  for (uint32_t p = 0; p < kPlanes; ++p) {
    std::vector<std::byte> got = Read(into[p], 18);
    std::vector<std::byte> want = Pattern(18, 1, p);
    EXPECT_TRUE(std::memcmp(got.data(), want.data(), 16 * kTokenBytes) == 0) << "plane " << p;
    EXPECT_EQ(got[16 * kTokenBytes], std::byte{0xEE}) << "plane " << p;
  }
  // Read in place: a view per chunk, its planes end to end, each that
  // chunk of its plane.
  auto views = cache->Views(tokens, 8);
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  ASSERT_EQ(views->size(), 2u);
  const uint64_t part = kChunk * kTokenBytes;
  for (size_t chunk = 0; chunk < views->size(); ++chunk) {
    ASSERT_EQ((*views)[chunk].size(), kPlanes * part);
    ASSERT_EQ(cache->chunk_object_bytes(), kPlanes * part);
    std::vector<std::byte> in_place(kPlanes * part);
    ASSERT_OK(backend_->Copy(in_place.data(), (*views)[chunk].data(), in_place.size(), gpu::CopyKind::kDeviceToHost));
    for (uint32_t p = 0; p < kPlanes; ++p) {
      std::vector<std::byte> want = Pattern(18, 1, p);
      EXPECT_TRUE(std::memcmp(in_place.data() + p * part, want.data() + chunk * part, part) == 0)
          << "chunk " << chunk << " plane " << p;
    }
  }
}

TEST_F(PrefixCacheTest, AStoreFromStartWritesOnlyTheChunksFromThere) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(16);
  std::vector<PrefixPlane> kv = Planes(16, 2);
  // Tokens [0, 9) came from elsewhere: chunks 2 and 3 are written (chunk 2
  // holds new tokens 9-11), chunks 0 and 1 are not.
  EXPECT_EQ(*cache->Store(tokens, kv, 9), 2u);
  EXPECT_EQ(*cache->Lookup(tokens), 0u);  // chunk 0 is missing: no prefix at all
  EXPECT_EQ(*cache->Store(tokens, kv, 0), 2u);
  EXPECT_EQ(*cache->Lookup(tokens), 16u);
  EXPECT_EQ(*cache->Store(tokens, kv, 16), 0u);  // nothing new
}

TEST_F(PrefixCacheTest, TheLongestPrefixStopsAtTheFirstHole) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(20);
  std::vector<PrefixPlane> kv = Planes(20, 3);
  ASSERT_EQ(*cache->Store(tokens, kv, 0), 5u);
  auto keys = cache->ChunkKeys(tokens);
  ASSERT_TRUE(keys.ok());
  // The middle chunk goes (kvctl evict of its key): the prefix is the two
  // chunks before it, though chunks 3 and 4 are still stored.
  ASSERT_OK(store_->Remove(PrefixCache::ObjectKey((*keys)[2])));
  EXPECT_EQ(*cache->Lookup(tokens), 8u);
  // Loading more than is there answers the prefix that is.
  std::vector<PrefixPlane> into = Planes(20, -1);
  auto loaded = cache->Load(tokens, 20, into);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(*loaded, 8u);
  // Stored again, the prefix is whole.
  EXPECT_EQ(*cache->Store(tokens, kv, 8), 1u);
  EXPECT_EQ(*cache->Lookup(tokens), 20u);
}

// A scratch of two chunks' objects: five chunks move in three rounds each
// way (gather and put, get and scatter), byte-exact, and a hole in the
// second round ends the load there without the third being got.
TEST_F(PrefixCacheTest, ChunksMoveThroughASmallScratchInRounds) {
  PrefixCacheOptions o = Options();
  o.staging_bytes = 2 * kPlanes * kChunk * kTokenBytes;
  auto cache = Cache(o);
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(20);
  ASSERT_EQ(*cache->Store(tokens, Planes(20, 8), 0), 5u);
  ASSERT_EQ(*cache->Lookup(tokens), 20u);
  std::vector<PrefixPlane> into = Planes(20, -1, std::byte{0xEE});
  ASSERT_EQ(*cache->Load(tokens, 20, into), 20u);
  for (uint32_t p = 0; p < kPlanes; ++p) EXPECT_EQ(Read(into[p], 20), Pattern(20, 8, p)) << "plane " << p;

  auto keys = cache->ChunkKeys(tokens);
  ASSERT_TRUE(keys.ok());
  ASSERT_OK(store_->Remove(PrefixCache::ObjectKey((*keys)[3])));  // the second round's second chunk
  std::vector<PrefixPlane> again = Planes(20, -1, std::byte{0xEE});
  ASSERT_EQ(*cache->Load(tokens, 20, again), 12u);
  for (uint32_t p = 0; p < kPlanes; ++p) {
    std::vector<std::byte> got = Read(again[p], 20), want = Pattern(20, 8, p);
    EXPECT_TRUE(std::memcmp(got.data(), want.data(), 12 * kTokenBytes) == 0) << "plane " << p;
    EXPECT_EQ(got[12 * kTokenBytes], std::byte{0xEE}) << "plane " << p << ": a chunk after the hole was written";
  }
}

// A paged engine's block table: every (chunk, plane) its own block, in a
// pool in shuffled order. Blocks and planes name the same objects: what one
// form stores the other loads, byte-exact.
TEST_F(PrefixCacheTest, ABlockTableStoresAndLoadsTheSameChunksAsPlanes) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(13);  // three full chunks and a tail
  const size_t chunks = 3, blocks_n = chunks * kPlanes;
  const uint64_t part = kChunk * kTokenBytes;
  auto pool = gpu::DeviceBuffer::Create(*backend_, 0, 2 * blocks_n * part);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  auto* base = static_cast<std::byte*>((*pool)->get());
  std::vector<void*> table(blocks_n), other(blocks_n);
  for (size_t i = 0; i < blocks_n; ++i) {
    table[i] = base + ((i * 7) % blocks_n) * part;             // shuffled
    other[i] = base + (blocks_n + (i * 5) % blocks_n) * part;  // another half, shuffled otherwise
  }
  // The blocks hold what planes of seed 9 would.
  for (size_t c = 0; c < chunks; ++c) {
    for (uint32_t p = 0; p < kPlanes; ++p) {
      std::vector<std::byte> want = Pattern(13, 9, p);
      ASSERT_OK(backend_->Copy(table[c * kPlanes + p], want.data() + c * part, part, gpu::CopyKind::kHostToDevice));
    }
  }
  auto written = cache->StoreBlocks(tokens, table, 0);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, 3u);
  EXPECT_EQ(*cache->Lookup(tokens), 12u);
  // Loaded as planes: the same bytes a plane store would have made.
  std::vector<PrefixPlane> into = Planes(13, -1, std::byte{0xEE});
  ASSERT_EQ(*cache->Load(tokens, 12, into), 12u);
  for (uint32_t p = 0; p < kPlanes; ++p) {
    std::vector<std::byte> got = Read(into[p], 13), want = Pattern(13, 9, p);
    EXPECT_TRUE(std::memcmp(got.data(), want.data(), 12 * kTokenBytes) == 0) << "plane " << p;
  }
  // Loaded as blocks, into other blocks.
  ASSERT_EQ(*cache->LoadBlocks(tokens, 8, std::span<void* const>(other.data(), 2 * kPlanes)), 8u);
  for (size_t c = 0; c < 2; ++c) {
    for (uint32_t p = 0; p < kPlanes; ++p) {
      std::vector<std::byte> got(part), want = Pattern(13, 9, p);
      ASSERT_OK(backend_->Copy(got.data(), other[c * kPlanes + p], part, gpu::CopyKind::kDeviceToHost));
      EXPECT_TRUE(std::memcmp(got.data(), want.data() + c * part, part) == 0) << "chunk " << c << " plane " << p;
    }
  }
  // A table of the wrong size, a null block where one is read.
  auto refused = [](const auto& result, const std::string& says) {
    EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
    EXPECT_NE(result.status().ToString().find(says), std::string::npos) << result.status().ToString();
  };
  refused(cache->LoadBlocks(tokens, 8, table), "18 blocks given, 2 chunks of 6 planes need 12");
  std::vector<void*> holed = table;
  holed[kPlanes + 2] = nullptr;
  refused(cache->StoreBlocks(tokens, holed, 0), "block 8 (chunk 1, plane 2) has no memory");
  // From token 8: chunk 2 only (stored already, so none written); chunk 1's null block is not read.
  EXPECT_EQ(*cache->StoreBlocks(tokens, holed, 8), 0u);
}

TEST_F(PrefixCacheTest, TheStoresEvictionEndsThePrefixWhereAChunkWent) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  const std::vector<int32_t> tokens = Tokens(16);
  ASSERT_EQ(*cache->Store(tokens, Planes(16, 4), 0), 4u);
  ASSERT_EQ(*cache->Lookup(tokens), 16u);
  // The store fills up with other objects: FIFO evicts the oldest first,
  // the prefix's first chunk among them, so its later chunks are no hit.
  const std::vector<std::byte> filler(1 << 20, std::byte{1});
  for (int i = 0; i < 20; ++i) ASSERT_OK(store_->Put("filler:" + std::to_string(i), filler, 0));
  auto info = store_->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_GT(info->devices[0].evictions, 0u);
  EXPECT_EQ(*cache->Lookup(tokens), 0u);
  EXPECT_EQ(*cache->Load(tokens, 16, Planes(16, -1)), 0u);
}

TEST_F(PrefixCacheTest, NamespacesAndSaltsDoNotShare) {
  auto a = Cache(Options("tenant-a"));
  auto b = Cache(Options("tenant-b"));
  auto other_model = Cache(Options("tenant-a", "qwen2"));
  auto a_again = Cache(Options("tenant-a"));
  ASSERT_TRUE(a && b && other_model && a_again);
  const std::vector<int32_t> tokens = Tokens(12);
  ASSERT_EQ(*a->Store(tokens, Planes(12, 5), 0), 3u);
  EXPECT_EQ(*b->Lookup(tokens), 0u);
  EXPECT_EQ(*other_model->Lookup(tokens), 0u);
  EXPECT_EQ(*a_again->Lookup(tokens), 12u);
  // Tenant b computes the same prompt: its own chunks, a's untouched.
  EXPECT_EQ(*b->Store(tokens, Planes(12, 6), 0), 3u);
  std::vector<PrefixPlane> into = Planes(12, -1);
  ASSERT_EQ(*a_again->Load(tokens, 12, into), 12u);
  EXPECT_EQ(Read(into[0], 12), Pattern(12, 5, 0));
}

TEST_F(PrefixCacheTest, HostileInputsAreRefusedNamingWhatIsWrong) {
  auto cache = Cache();
  ASSERT_NE(cache, nullptr);
  auto refused = [](const auto& result, const std::string& says) {
    EXPECT_EQ(result.status().code(), Code::kInvalidArgument) << result.status().ToString();
    EXPECT_NE(result.status().ToString().find(says), std::string::npos) << result.status().ToString();
  };
  const std::vector<int32_t> none;
  refused(cache->Lookup(none), "no tokens");
  refused(cache->Store(none, {}, 0), "no tokens");
  // A billion tokens: refused on the count, before one is read.
  const std::vector<int32_t> few = Tokens(8);
  const std::span<const int32_t> billion(few.data(), size_t{1'000'000'000});
  refused(cache->Lookup(billion), "1000000000 tokens (at most 4194304)");
  refused(cache->Load(billion, 0, {}), "1000000000 tokens");
  // Planes that do not match the layout.
  std::vector<PrefixPlane> kv = Planes(8, 7);
  std::vector<PrefixPlane> short_kv(kv.begin(), kv.end() - 1);
  refused(cache->Store(few, short_kv, 0), "5 planes given, the layout has 6 (3 layers of 2)");
  std::vector<PrefixPlane> small = kv;
  small[4].capacity_tokens = 6;
  refused(cache->Store(few, small, 0), "plane 4 holds 6 tokens, 8 needed");
  std::vector<PrefixPlane> null_plane = kv;
  null_plane[1].base = nullptr;
  refused(cache->Load(few, 8, null_plane), "plane 1 has no memory");
  refused(cache->Load(few, 6, kv), "not a whole number of 4-token chunks");
  refused(cache->Load(few, 12, kv), "not a whole number");
  refused(cache->Store(few, kv, 9), "start 9 is past the 8 tokens");
  EXPECT_EQ(*cache->Lookup(few), 0u);  // nothing was stored by any of it
  // Options out of bounds.
  auto bad = [&](auto edit, const std::string& says) {
    PrefixCacheOptions o = Options();
    edit(o);
    refused(PrefixCache::OnNode(store_.get(), o), says);
  };
  bad([](PrefixCacheOptions& o) { o.space.model.clear(); }, "names no model");
  bad([](PrefixCacheOptions& o) { o.chunk_tokens = 0; }, "chunk_tokens 0");
  bad([](PrefixCacheOptions& o) { o.layout.layers = 0; }, "0 layers");
  bad([](PrefixCacheOptions& o) { o.layout.layers = 100000; }, "100000 layers");
  bad([](PrefixCacheOptions& o) { o.layout.token_bytes = 0; }, "token_bytes 0");
  bad([](PrefixCacheOptions& o) { o.space.salt.assign(300, 's'); }, "salt of 300 bytes");
  refused(PrefixCache::OnNode(nullptr, Options()), "no object store");
}

}  // namespace
}  // namespace nanokv::testing
