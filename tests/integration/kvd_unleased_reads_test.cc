// Batch gets without a lease through a real kvd (ARCHITECTURE.md, "Reads
// without a lease"): a get asks kvd once per chunk of keys and takes no
// lease where the read table covers the copy; a get of what it read before
// asks nothing (the read cache), nor one of a copy kvd's directory lists
// on pages the reader mapped before; a copy whose object went, moved or was
// replaced while it ran never stands. NANOKV_TEST_BACKEND=cuda runs the
// same against GPU pages.
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "ipc/wire/object_codec.h"
#include "nanokv/object_header.h"
#include "nanokv/object_store.h"
#include "tests/integration/device_memory_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

// Every object on device 0, where the test's buffers are: this process
// gives no other device access to the store's pages (two GPUs under cuda).
class KvdUnleasedReadsTest : public DeviceMemoryFixture {
 protected:
  void SetUp() override {
    KvdFixture::SetUp();
    // The test store, but a write is reclaimed only after 10 s: a put slowed
    // by a busy machine must not fail the racing writer.
    StartKvd(32, {"--config", WriteConfig("object_store:\n  size: 16MiB\n  policy: fifo\n  lease_ttl: 5s\n"
                                          "  write_timeout: 10s\n")});
    OpenDeviceBackend();
  }
};

TEST_F(KvdUnleasedReadsTest, AGetAgainAsksKvdNothingAndAGoneObjectIsNotReadFromWhereItWas) {
  auto writer = OpenStore();
  auto reader = OpenStore();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  constexpr size_t kObjects = 16, kBytes = 100'000;
  std::vector<std::string> keys;
  for (size_t i = 0; i < kObjects; ++i) {
    keys.push_back("again:" + std::to_string(i));
    ASSERT_OK(writer->Put(keys.back(), ObjectPattern(kBytes, static_cast<uint8_t>(i)), 0));
  }
  auto buffer = Buffer(kObjects * kBytes);
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t i = 0; i < kObjects; ++i) items.push_back({keys[i], base + i * kBytes, kBytes});
  auto check = [&](size_t i, uint8_t seed) {
    EXPECT_EQ(Read(base + i * kBytes, kBytes), ObjectPattern(kBytes, seed)) << keys[i];
  };
  for (const auto& got : reader->BatchGetToDevice(items)) ASSERT_OK(got.status());
  const uint64_t sent = reader->requests_sent();
  ASSERT_OK(backend_->Fill(base, 0, kObjects * kBytes));
  for (const auto& got : reader->BatchGetToDevice(items)) ASSERT_OK(got.status());
  EXPECT_EQ(reader->requests_sent(), sent);
  for (size_t i = 0; i < kObjects; ++i) check(i, static_cast<uint8_t>(i));
  // One get the same way.
  ASSERT_OK(reader->GetToDevice(keys[3], base, kBytes).status());
  EXPECT_EQ(reader->requests_sent(), sent);

  // Four removed, two of them put again with other bytes (in the space the
  // others left, or elsewhere): the kept locations do not stand.
  for (size_t i : {2, 5, 9, 14}) ASSERT_OK(writer->Remove(keys[i]));
  ASSERT_OK(writer->Put(keys[5], ObjectPattern(kBytes, 200), 0));
  ASSERT_OK(writer->Put(keys[14], ObjectPattern(kBytes, 201), 0));
  std::vector<Result<uint64_t>> got = reader->BatchGetToDevice(items);
  for (size_t i = 0; i < kObjects; ++i) {
    if (i == 2 || i == 9) {
      EXPECT_EQ(got[i].status().code(), Code::kNotFound) << keys[i];
      continue;
    }
    ASSERT_OK(got[i].status());
    check(i, i == 5 ? 200 : i == 14 ? 201 : static_cast<uint8_t>(i));
  }
  EXPECT_EQ(reader->GetToDevice(keys[9], base, kBytes).status().code(), Code::kNotFound);
  // A destination too small is refused from a kept location too.
  EXPECT_EQ(reader->GetToDevice(keys[0], base, kBytes - 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(reader->GetToDevice(keys[0], nullptr, kBytes).status().code(), Code::kInvalidArgument);
}

// A first read of an object on pages this reader mapped before asks kvd
// nothing: kvd's location directory lists it from its commit on. A removed
// one is not read from where it was; one put again is read where it is now.
TEST_F(KvdUnleasedReadsTest, AFirstReadOnPagesMappedBeforeFindsTheCopyInKvdsDirectory) {
  auto writer = OpenStore();
  auto reader = OpenStore();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  constexpr size_t kBytes = 8192, kObjects = 8;
  ASSERT_OK(writer->Put("first", ObjectPattern(kBytes, 1), 0));
  auto buffer = Buffer(kObjects * kBytes);
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  ASSERT_OK(reader->GetToDevice("first", base, kBytes).status());  // asks kvd; maps the page
  auto page_of = [&](const std::string& key) {
    auto plan = writer->GetLocation(key);
    EXPECT_OK(plan.status());
    return plan.ok() ? plan->payload_offset / plan->page_bytes : ~uint64_t{0};
  };
  std::vector<std::string> keys;
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t i = 0; i < kObjects; ++i) {
    keys.push_back("next:" + std::to_string(i));
    ASSERT_OK(writer->Put(keys.back(), ObjectPattern(kBytes, static_cast<uint8_t>(10 + i)), 0));
    // The writer's page has room: its next objects go beside the first.
    ASSERT_EQ(page_of(keys.back()), page_of("first")) << keys.back();
  }
  for (size_t i = 0; i < kObjects; ++i) items.push_back({keys[i], base + i * kBytes, kBytes});
  const uint64_t sent = reader->requests_sent();
  std::vector<Result<uint64_t>> got = reader->BatchGetToDevice(items);
  EXPECT_EQ(reader->requests_sent(), sent) << "found in kvd's directory";
  for (size_t i = 0; i < kObjects; ++i) {
    ASSERT_OK(got[i].status());
    EXPECT_EQ(Read(base + i * kBytes, kBytes), ObjectPattern(kBytes, static_cast<uint8_t>(10 + i))) << keys[i];
  }

  // One removed, one put again with other bytes, one new: the reader's kept
  // locations of the first two do not stand; the new one is found.
  ASSERT_OK(writer->Remove(keys[1]));
  ASSERT_OK(writer->Remove(keys[2]));
  ASSERT_OK(writer->Put(keys[2], ObjectPattern(kBytes, 99), 0));
  ASSERT_OK(writer->Put("fresh", ObjectPattern(kBytes, 77), 0));
  ASSERT_EQ(page_of("fresh"), page_of("first"));
  EXPECT_EQ(reader->GetToDevice(keys[1], base, kBytes).status().code(), Code::kNotFound);
  ASSERT_OK(reader->GetToDevice(keys[2], base, kBytes).status());
  EXPECT_EQ(Read(base, kBytes), ObjectPattern(kBytes, 99));
  const uint64_t before_fresh = reader->requests_sent();
  ASSERT_OK(reader->GetToDevice("fresh", base, kBytes).status());
  EXPECT_EQ(reader->requests_sent(), before_fresh);
  EXPECT_EQ(Read(base, kBytes), ObjectPattern(kBytes, 77));
}

// Reads from kept locations ask kvd nothing, so kvd's eviction order would
// not see them: the store tells kvd of them in one request a second after
// the first, and the object's idle time starts again there.
TEST_F(KvdUnleasedReadsTest, ReadsFromKeptLocationsReachKvdASecondLate) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr size_t kBytes = 4096;
  ASSERT_OK(store->Put("hot", ObjectPattern(kBytes, 1), 0));
  auto buffer = Buffer(kBytes);
  ASSERT_NE(buffer, nullptr);
  auto idle_ms = [&] {
    auto listed = store->List();
    EXPECT_OK(listed.status());
    for (const ObjectEntry& e : listed.ok() ? *listed : std::vector<ObjectEntry>{}) {
      if (e.key == "hot") return e.idle_ms;
    }
    return uint64_t{0};
  };
  ASSERT_OK(store->GetToDevice("hot", buffer->get(), kBytes).status());  // asks kvd: touched now
  std::this_thread::sleep_for(1500ms);
  const uint64_t sent = store->requests_sent();
  ASSERT_OK(store->GetToDevice("hot", buffer->get(), kBytes).status());  // kept: noted, nothing sent
  EXPECT_EQ(store->requests_sent(), sent);
  const uint64_t before = idle_ms();
  EXPECT_GE(before, 1400u) << "kvd has not heard of the kept read";
  std::this_thread::sleep_for(1100ms);
  ASSERT_OK(store->GetToDevice("hot", buffer->get(), kBytes).status());  // a second on: kvd is told
  const uint64_t after = idle_ms();
  EXPECT_LT(after, before) << "kvd heard of the kept reads";
}

// Keys of the longest kind, more than one request takes by count and by
// bytes (a datagram holds neither 256 keys of 256 bytes nor their plans):
// the get asks in as many requests as they need and answers each.
TEST_F(KvdUnleasedReadsTest, LongKeysGoInAsManyRequestsAsTheyNeed) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const size_t n = wire::kMaxObjectBatch + 40, bytes = 512;
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) {
    std::string key = "long:" + std::to_string(i) + ":";
    key.resize(kMaxObjectKeyBytes, 'k');
    keys.push_back(key);
    ASSERT_OK(store->Put(key, ObjectPattern(bytes, static_cast<uint8_t>(i)), 0));
  }
  auto buffer = Buffer(n * bytes);
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t i = 0; i < n; ++i) items.push_back({keys[i], base + i * bytes, bytes});
  const uint64_t before = store->requests_sent();
  std::vector<Result<uint64_t>> got = store->BatchGetToDevice(items);
  const uint64_t asked = store->requests_sent() - before;
  EXPECT_GE(asked, n * kMaxObjectKeyBytes / wire::kMaxObjectBatchKeyBytes);
  const std::vector<std::byte> back = Read(base, n * bytes);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_OK(got[i].status());
    ASSERT_EQ(std::vector<std::byte>(back.begin() + i * bytes, back.begin() + (i + 1) * bytes),
              ObjectPattern(bytes, static_cast<uint8_t>(i)));
  }
}

// Objects that name their key and version in every byte, replaced (removed
// and put again) by a writer while a reader batch-gets them: a get that
// answers an object gave that key's bytes of one version, whole, and a
// key's versions never go back. A reader that kept its copies without the
// read table's word fails this (stale and reused space).
std::vector<std::byte> Versioned(size_t key, uint32_t version, size_t bytes) {
  std::vector<std::byte> out(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t word = (uint64_t{version} << 32) | (uint64_t{static_cast<uint32_t>(key)} << 8) | (i / 8 % 251);
    std::memcpy(out.data() + i, &word, std::min<size_t>(8, bytes - i));
  }
  return out;
}

TEST_F(KvdUnleasedReadsTest, AReaderRacingReplacementsGetsWholeVersionsThatNeverGoBack) {
  auto writer = OpenStore();
  auto reader = OpenStore();
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(reader, nullptr);
  constexpr size_t kKeys = 8, kBytes = 256 * 1024;
  auto key = [](size_t k) { return "race:" + std::to_string(k); };
  for (size_t k = 0; k < kKeys; ++k) ASSERT_OK(writer->Put(key(k), Versioned(k, 1, kBytes), 0));
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> versions{1};
  std::thread replace([&] {
    for (uint32_t v = 2; !stop.load(); ++v) {
      for (size_t k = 0; k < kKeys; ++k) {
        // A reader's lease (a copy read again) holds it a moment.
        Status removed = writer->Remove(key(k));
        while (removed.code() == Code::kFailedPrecondition && !stop.load()) removed = writer->Remove(key(k));
        Status put = writer->Put(key(k), Versioned(k, v, kBytes), 0);
        if (!put.ok()) ADD_FAILURE() << key(k) << " version " << v << ": " << put.ToString();
      }
      versions.store(v);
    }
  });
  auto buffer = Buffer(kKeys * kBytes);
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  std::vector<std::string> names;
  for (size_t k = 0; k < kKeys; ++k) names.push_back(key(k));
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t k = 0; k < kKeys; ++k) items.push_back({names[k], base + k * kBytes, kBytes});
  std::vector<uint32_t> seen(kKeys, 0);
  size_t answered = 0, torn = 0;
  const auto until = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < until && torn == 0) {
    std::vector<Result<uint64_t>> got = reader->BatchGetToDevice(items);
    const std::vector<std::byte> back = Read(base, kKeys * kBytes);
    for (size_t k = 0; k < kKeys; ++k) {
      if (!got[k].ok()) {
        // Between the remove and the put's commit.
        const Code code = got[k].status().code();
        EXPECT_TRUE(code == Code::kNotFound || code == Code::kFailedPrecondition) << got[k].status().ToString();
        continue;
      }
      ++answered;
      uint32_t version = 0;
      std::memcpy(&version, back.data() + k * kBytes + 4, sizeof(version));
      const std::vector<std::byte> want = Versioned(k, version, kBytes);
      if (std::memcmp(back.data() + k * kBytes, want.data(), kBytes) != 0 || version < seen[k]) {
        ++torn;
        ADD_FAILURE() << key(k) << ": not a whole version " << version << " (seen " << seen[k] << ")";
      }
      seen[k] = std::max(seen[k], version);
    }
  }
  stop.store(true);
  replace.join();
  EXPECT_EQ(torn, 0u);
  EXPECT_GT(answered, kKeys) << "the reader got objects";
  EXPECT_GT(versions.load(), 3u) << "the writer replaced them while the reader read";
}

}  // namespace
}  // namespace nanokv::testing
