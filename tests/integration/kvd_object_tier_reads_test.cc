// Gets served from the host tier through a real kvd and libkv (the host
// backend in CI; NANOKV_TEST_BACKEND=cuda on a GPU): a get of a host-tier
// object reads kvd's host pages by the engine's own copy, at once (never
// "ask again"), into host or device memory, singly or in a batch mixing
// tiers; gets race demotions and removes without reading wrong bytes; a
// reader killed mid-read leaves no lease behind.
#include <signal.h>

#include <atomic>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/object_store.h"
#include "tests/integration/metrics_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kObjects = 30;  // 30 MiB over a 14 MiB store: most are in the host tier

class KvdObjectTierReadsTest : public MetricsFixture {
 protected:
  void Start(const std::string& extra = "", std::vector<std::string> flags = {}) {
    flags.push_back("--config");
    // One device: the working set's sizes are that store's, and the test's
    // buffers (device 0's) are reached by no other device (two GPUs under cuda).
    flags.push_back(
        WriteConfig("devices: [0]\nobject_store:\n  size: 16MiB\n  policy: lru\n  host_tier: 48MiB\n" + extra));
    StartKvdWithMetrics(32, flags);
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
    auto backend = gpu::OpenBackend(Backend());
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    backend_ = std::move(*backend);
  }

  // A put waits for the tier worker to make room (kUnavailable: ask again).
  void PutWorkingSet() {
    for (int i = 0; i < kObjects; ++i) {
      Status put;
      for (int attempt = 0; attempt < 2000; ++attempt) {
        put = store_->Put("t" + std::to_string(i), ObjectPattern(kMiB + 13 * i, uint8_t(i)));
        if (put.code() != Code::kUnavailable) break;
        std::this_thread::sleep_for(5ms);
      }
      ASSERT_OK(put);
    }
  }

  std::vector<std::string> InTier(bool host) {
    std::vector<std::string> out;
    auto listed = store_->List();
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    if (!listed.ok()) return out;
    for (const ObjectEntry& entry : *listed) {
      if (entry.host_tier == host) out.push_back(entry.key);
    }
    return out;
  }

  static int Index(const std::string& key) { return std::stoi(key.substr(1)); }
  static std::vector<std::byte> PatternOf(const std::string& key) {
    const int i = Index(key);
    return ObjectPattern(kMiB + 13 * i, uint8_t(i));
  }

  std::vector<std::byte> Read(const void* device, size_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_OK(backend_->Copy(out.data(), device, bytes, gpu::CopyKind::kDeviceToHost));
    return out;
  }

  std::optional<double> Sample(const std::string& name, const std::map<std::string, std::string>& labels) {
    auto scraped = Scrape();
    if (!scraped.ok()) return std::nullopt;
    auto samples = ParseExposition(*scraped);
    if (!samples.ok()) return std::nullopt;
    return FindSample(*samples, name, labels);
  }

  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<gpu::Backend> backend_;
};

TEST_F(KvdObjectTierReadsTest, GetsFromEitherTierAreByteExactAtOnce) {
  Start();
  PutWorkingSet();
  if (HasFatalFailure()) return;
  const std::vector<std::string> host = InTier(true), gpu = InTier(false);
  ASSERT_GE(host.size(), 3u);
  ASSERT_FALSE(gpu.empty());
  // get_location says where the copy is: the host tier's pages.
  auto located = store_->GetLocation(host[0]);
  ASSERT_OK(located.status());
  if (located->tier == ObjectTier::kHost) {
    EXPECT_EQ(located->header_offset, 0u);
    EXPECT_EQ(located->bytes_total, PatternOf(host[0]).size());
  }
  auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, 2 * kMiB);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  for (const std::string& key : {host[1], host[2], gpu[0]}) {
    auto got = store_->Get(key);  // never kUnavailable now
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_EQ(*got, PatternOf(key)) << key;
    auto loaded = store_->GetToDevice(key, (*buffer)->get(), 2 * kMiB);
    ASSERT_TRUE(loaded.ok()) << key << ": " << loaded.status().ToString();
    EXPECT_EQ(*loaded, PatternOf(key).size());
    EXPECT_EQ(Read((*buffer)->get(), *loaded), PatternOf(key)) << key;
  }
  // Host hits counted, and the gets' promotions happen in the background.
  const std::map<std::string, std::string> host_hits{{"device", "0"}, {"tier", "host"}};
  EXPECT_TRUE(WaitFor([&] { return Sample("nanokv_object_store_hits_total", host_hits).value_or(0) >= 4; }, 10s));
  EXPECT_TRUE(WaitFor(
      [&] { return store_->GetLocation(host[1]).ok() && store_->GetLocation(host[1])->tier == ObjectTier::kGpu; }, 10s))
      << "read from the host tier, then promoted";
}

TEST_F(KvdObjectTierReadsTest, ABatchGetMixingTiersIsByteExact) {
  Start();
  PutWorkingSet();
  if (HasFatalFailure()) return;
  ASSERT_FALSE(InTier(true).empty());
  ASSERT_FALSE(InTier(false).empty());
  const size_t room = 2 * kMiB;
  auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, room * kObjects);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  auto* base = static_cast<std::byte*>((*buffer)->get());
  std::vector<std::string> keys;
  for (int i = 0; i < kObjects; ++i) keys.push_back("t" + std::to_string(i));
  std::vector<ObjectStore::DeviceGet> items;
  for (int i = 0; i < kObjects; ++i) items.push_back({keys[i], base + i * room, room});
  auto got = store_->BatchGetToDevice(items);
  ASSERT_EQ(got.size(), items.size());
  for (int i = 0; i < kObjects; ++i) {
    ASSERT_TRUE(got[i].ok()) << keys[i] << ": " << got[i].status().ToString();
    EXPECT_EQ(Read(base + i * room, *got[i]), PatternOf(keys[i])) << keys[i];
  }
}

TEST_F(KvdObjectTierReadsTest, GetsRacingDemotionsAndRemovesReadRightOrNothing) {
  Start("", {"--check-invariants"});
  PutWorkingSet();
  if (HasFatalFailure()) return;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, failed{0}, read{0};
  // A writer keeps the worker demoting (removes and puts again); a reader
  // gets every key, in whatever tier it is, mid-move or mid-remove.
  std::thread writer([&] {
    auto store = OpenStore();
    if (store == nullptr) return failed.fetch_add(1), void();
    std::mt19937 random(3);
    while (!stop.load()) {
      const std::string key = "t" + std::to_string(random() % kObjects);
      Status removed = store->Remove(key);
      if (!removed.ok() && removed.code() != Code::kFailedPrecondition && removed.code() != Code::kNotFound) {
        failed.fetch_add(1);
      }
      Status put = store->Put(key, PatternOf(key));
      if (!put.ok() && put.code() != Code::kUnavailable && put.code() != Code::kAlreadyExists) failed.fetch_add(1);
    }
  });
  auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, 2 * kMiB);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < kObjects; ++i) {
      const std::string key = "t" + std::to_string(i);
      auto got = store_->Get(key);
      if (got.ok()) {
        read.fetch_add(1);
        if (*got != PatternOf(key)) wrong.fetch_add(1);
      } else if (got.status().code() != Code::kNotFound && got.status().code() != Code::kFailedPrecondition) {
        ADD_FAILURE() << key << ": " << got.status().ToString();
      }
      auto loaded = store_->GetToDevice(key, (*buffer)->get(), 2 * kMiB);
      if (loaded.ok()) {
        if (Read((*buffer)->get(), *loaded) != PatternOf(key)) wrong.fetch_add(1);
      } else if (loaded.status().code() != Code::kNotFound && loaded.status().code() != Code::kFailedPrecondition) {
        ADD_FAILURE() << key << ": " << loaded.status().ToString();
      }
    }
  }
  stop.store(true);
  writer.join();
  EXPECT_EQ(wrong.load(), 0) << "a get read other bytes";
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(read.load(), 0);
  EXPECT_EQ(kvd_.Log().find("invariant broken"), std::string::npos) << kvd_.Log();
}

TEST_F(KvdObjectTierReadsTest, AReaderKilledMidReadOfTheHostTierLeavesNoLease) {
  // A lease_ttl longer than the test: only the reader's close can end its lease.
  Start("  lease_ttl: 600s\n", {"--check-invariants"});
  PutWorkingSet();
  if (HasFatalFailure()) return;
  const std::vector<std::string> host = InTier(true);
  ASSERT_FALSE(host.empty());
  const std::string key = host.front();
  Process peer = Process::Start({Binary("NANOKV_OBJECT_PEER", NANOKV_OBJECT_PEER), "read-hold", ipc_, key,
                                 std::to_string(PatternOf(key).size()), std::to_string(Index(key))},
                                {{"NANOKV_RUN_DIR", dir_.path()}, {"NANOKV_TEST_BACKEND", Backend()}},
                                dir_.path() + "/peer_read.log");
  ASSERT_TRUE(WaitFor([&] { return peer.Log().find("reading") != std::string::npos || !peer.Running(); }, 30s))
      << peer.Log();
  ASSERT_TRUE(peer.Running()) << peer.Log();
  EXPECT_NE(peer.Log().find("reading host"), std::string::npos) << peer.Log();
  // Mid-read its lease keeps the object where it is read.
  EXPECT_EQ(store_->Remove(key).code(), Code::kFailedPrecondition);
  peer.Signal(SIGKILL);
  peer.Wait(10s);
  // The dead reader's lease ends with its connection: nothing holds the object.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto listed = store_->List();
        if (!listed.ok()) return false;
        for (const ObjectEntry& entry : *listed) {
          if (entry.leases != 0) return false;
        }
        return true;
      },
      10s));
  EXPECT_TRUE(WaitFor([&] { return store_->Remove(key).ok(); }, 10s));
  EXPECT_EQ(kvd_.Log().find("invariant broken"), std::string::npos) << kvd_.Log();
}

}  // namespace
}  // namespace nanokv::testing
