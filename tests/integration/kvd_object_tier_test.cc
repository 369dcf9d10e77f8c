// The host tier under a real kvd's object store (the host backend: both
// tiers are host memory, with the same rules): a working set three times
// the store, read back at random through libkv, is all there byte-exact,
// and kvd's stats count what moved.
#include <random>
#include <thread>

#include "nanokv/object_store.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

class KvdObjectTierTest : public KvdFixture {
 protected:
  // A get as an engine retries it: a host-tier object answers kUnavailable
  // while kvd's tier worker moves it back into the store.
  static Result<std::vector<std::byte>> Get(ObjectStore& store, const std::string& key) {
    for (int attempt = 0;; ++attempt) {
      auto got = store.Get(key);
      if (got.ok() || got.status().code() != Code::kUnavailable || attempt == 2000) return got;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

TEST_F(KvdObjectTierTest, AWorkingSetThreeTimesTheStoreIsAllThereByteExact) {
  // 16 MiB store (14 MiB of payload), 48 MiB of host tier under it.
  StartKvd(32, {"--config", WriteConfig("object_store:\n  size: 16MiB\n  policy: lru\n  host_tier: 48MiB\n")});
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kObjects = 42;  // 42 MiB: three times the store's payload
  for (int i = 0; i < kObjects; ++i) {
    Status put;
    // A put the tier worker has not made room for yet answers
    // kUnavailable (nothing is dropped for it); it succeeds once the worker
    // has moved victims down.
    for (int attempt = 0; attempt < 2000; ++attempt) {
      put = store->Put("w" + std::to_string(i), ObjectPattern(kMiB, uint8_t(i)));
      if (put.code() != Code::kUnavailable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_OK(put);
  }
  auto listed = store->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->size(), size_t{kObjects});  // nothing dropped
  std::mt19937 random(7);
  for (int n = 0; n < 2 * kObjects; ++n) {
    const int i = static_cast<int>(random() % kObjects);
    auto got = Get(*store, "w" + std::to_string(i));
    ASSERT_TRUE(got.ok()) << "w" << i << ": " << got.status().ToString();
    EXPECT_EQ(*got, ObjectPattern(kMiB, uint8_t(i))) << "w" << i;
  }
  listed = store->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), size_t{kObjects});
}

}  // namespace
}  // namespace nanokv::testing
