// The host tier under a real kvd's object store (the host backend: both
// tiers are host memory, with the same rules): a working set three times
// the store, read back at random through libkv, is all there byte-exact;
// /metrics counts the moves and the hits per tier, and kvctl objects shows
// each object's tier and each tier's use.
#include <atomic>
#include <random>
#include <thread>

#include "nanokv/object_store.h"
#include "tests/integration/metrics_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kObjects = 42;  // 42 MiB: three times the store's payload

class KvdObjectTierTest : public MetricsFixture {
 protected:
  // 16 MiB store (14 MiB of payload), 48 MiB of host tier under it.
  void StartWithTier() {
    StartKvdWithMetrics(32,
                        {"--config", WriteConfig("object_store:\n  size: 16MiB\n  policy: lru\n  host_tier: 48MiB\n")});
  }

  // A call as an engine retries it: a host-tier object, or a put the tier
  // worker has not made room for yet, answers kUnavailable (nothing is
  // dropped for it) until the worker has moved objects.
  static Code CodeOf(const Status& status) { return status.code(); }
  template <typename T>
  static Code CodeOf(const Result<T>& result) {
    return result.status().code();
  }
  template <typename Call>
  static auto Retried(Call call) {
    for (int attempt = 0;; ++attempt) {
      auto out = call();
      if (out.ok() || CodeOf(out) != Code::kUnavailable || attempt == 2000) return out;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  void PutWorkingSet(ObjectStore& store) {
    for (int i = 0; i < kObjects; ++i) {
      Status put = Retried([&] { return store.Put("w" + std::to_string(i), ObjectPattern(kMiB, uint8_t(i))); });
      ASSERT_OK(put);
    }
  }

  std::optional<double> Sample(const std::string& name, const std::map<std::string, std::string>& labels) {
    auto scraped = Scrape();
    if (!scraped.ok()) return std::nullopt;
    auto samples = ParseExposition(*scraped);
    if (!samples.ok()) return std::nullopt;
    return FindSample(*samples, name, labels);
  }
};

TEST_F(KvdObjectTierTest, AWorkingSetThreeTimesTheStoreIsAllThereByteExact) {
  StartWithTier();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  PutWorkingSet(*store);
  if (HasFatalFailure()) return;
  auto listed = store->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), size_t{kObjects});  // nothing dropped
  size_t in_host = 0;
  for (const ObjectEntry& entry : *listed) in_host += entry.host_tier ? 1 : 0;
  EXPECT_GT(in_host, 0u);
  std::mt19937 random(7);
  for (int n = 0; n < 2 * kObjects; ++n) {
    const int i = static_cast<int>(random() % kObjects);
    auto got = Retried([&] { return store->Get("w" + std::to_string(i)); });
    ASSERT_TRUE(got.ok()) << "w" << i << ": " << got.status().ToString();
    EXPECT_EQ(*got, ObjectPattern(kMiB, uint8_t(i))) << "w" << i;
  }
  listed = store->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), size_t{kObjects});
}

TEST_F(KvdObjectTierTest, PutsGetsAndRemovesRaceTheTierWorkerAndNothingReadsWrong) {
  StartKvdWithMetrics(32, {"--check-invariants", "--config",
                           WriteConfig("object_store:\n  size: 16MiB\n  policy: lru\n  host_tier: 48MiB\n")});
  constexpr int kKeys = 40;  // 40 MiB over a 14 MiB store: the worker moves all the time
  auto body = [&](int seed, std::atomic<int>* wrong, std::atomic<int>* failed) {
    auto store = OpenStore();
    if (store == nullptr) return failed->fetch_add(1), void();
    std::mt19937 random(seed);
    for (int n = 0; n < 300; ++n) {
      const int i = static_cast<int>(random() % kKeys);
      const std::string key = "r" + std::to_string(i);
      switch (random() % 3) {
        case 0: {  // a put; the key may exist already
          Status put = Retried([&] { return store->Put(key, ObjectPattern(kMiB, uint8_t(i))); });
          if (!put.ok() && put.code() != Code::kAlreadyExists) {
            failed->fetch_add(1);
            ADD_FAILURE() << "put " << key << ": " << put.ToString();
          }
          break;
        }
        case 1: {  // a get: whatever tier it was in, the same bytes; or gone, or being put again
          auto got = Retried([&] { return store->Get(key); });
          if (got.ok() && *got != ObjectPattern(kMiB, uint8_t(i))) wrong->fetch_add(1);
          const Code code = got.ok() ? Code::kOk : got.status().code();
          if (code != Code::kOk && code != Code::kNotFound && code != Code::kFailedPrecondition) {
            failed->fetch_add(1);
            ADD_FAILURE() << "get " << key << ": " << got.status().ToString();
          }
          break;
        }
        default: {  // a remove: gone, or leased by the other thread's get
          Status removed = store->Remove(key);
          if (!removed.ok() && removed.code() != Code::kNotFound && removed.code() != Code::kFailedPrecondition) {
            failed->fetch_add(1);
            ADD_FAILURE() << "remove " << key << ": " << removed.ToString();
          }
        }
      }
    }
  };
  std::atomic<int> wrong{0}, failed{0};
  std::thread a(body, 1, &wrong, &failed), b(body, 2, &wrong, &failed);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0) << "a get read other bytes";
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(kvd_.Log().find("invariant broken"), std::string::npos) << kvd_.Log();
  EXPECT_TRUE(WaitFor(
      [&] {
        return Sample("nanokv_object_store_demotions_total", {{"device", "0"}}).value_or(0) > 0;
      },
      10s))
      << "the worker moved objects meanwhile";
  // Everything still listed reads back whole.
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto listed = store->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const ObjectEntry& entry : *listed) {
    const int i = std::stoi(entry.key.substr(1));
    auto got = Retried([&] { return store->Get(entry.key); });
    ASSERT_TRUE(got.ok()) << entry.key << ": " << got.status().ToString();
    EXPECT_EQ(*got, ObjectPattern(kMiB, uint8_t(i))) << entry.key;
  }
}

TEST_F(KvdObjectTierTest, MetricsAndKvctlShowTheTiers) {
  StartWithTier();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  PutWorkingSet(*store);
  if (HasFatalFailure()) return;
  // w0 went down first (LRU); reading it brings it back up.
  auto got = Retried([&] { return store->Get("w0"); });
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(Retried([&] { return store->Get("w" + std::to_string(kObjects - 1)); }).ok());
  // kvd publishes the index's counts with its state, at least once a second.
  const std::map<std::string, std::string> dev0{{"device", "0"}};
  auto positive = [&](const std::string& name, const std::map<std::string, std::string>& labels) {
    return WaitFor([&] { return Sample(name, labels).value_or(0) > 0; }, 10s);
  };
  EXPECT_TRUE(positive("nanokv_object_store_demotions_total", dev0));
  EXPECT_TRUE(positive("nanokv_object_store_promotions_total", dev0));
  EXPECT_TRUE(positive("nanokv_object_store_hits_total", {{"device", "0"}, {"tier", "host"}}));
  EXPECT_TRUE(positive("nanokv_object_store_hits_total", {{"device", "0"}, {"tier", "gpu"}}));
  EXPECT_TRUE(positive("nanokv_object_store_host_used_bytes", dev0));
  EXPECT_EQ(Sample("nanokv_object_store_host_capacity_bytes", dev0).value_or(0), double(48 * kMiB));

  Ran json = Kvctl({"objects", ipc_, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_NE(json.out.find("\"tier\":\"host\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"tier\":\"gpu\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"host_bytes\":" + std::to_string(48 * kMiB)), std::string::npos) << json.out;
  Ran table = Kvctl({"objects", ipc_});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("TIER"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("host tier "), std::string::npos) << table.out;
}

}  // namespace
}  // namespace nanokv::testing
