// The host tier across kvd restarts (issue 32): the object journal records
// host-tier objects with their tier and the page keeper holds the host
// tier's memfds, so after a kill -9 every READY object of both tiers reads
// back byte-exact, in the tier it was in; a kill while the tier worker
// moves objects leaves each in exactly one tier, nothing lost; a host tier
// of another size drops its objects by name; a journal record with a tier
// that is none is refused naming its key. kvd checks its invariants
// (--check-invariants) all along.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <xxhash.h>
#include <gtest/gtest.h>

#include "nanokv/object_store.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kObjects = 30;  // 30 MiB over a 14 MiB store: more than half goes down

class KvdTierRestartTest : public KvdFixture {
 protected:
  // 16 MiB store over a 48 MiB host tier (or `host_tier`).
  void Start(const std::string& host_tier = "48MiB") {
    StartKvd(32, {"--check-invariants", "--config",
                  WriteConfig("object_store:\n  size: 16MiB\n  policy: fifo\n  write_timeout: 300ms\n  host_tier: " +
                              host_tier + "\n")});
  }
  void KillAndStart(const std::string& host_tier = "48MiB") {
    kvd_.Signal(SIGKILL);
    ASSERT_TRUE(kvd_.Wait(10s).has_value());
    Start(host_tier);
  }

  // As an engine retries: a host-tier object (promoted meanwhile) or a put
  // waiting for the worker answers kUnavailable.
  template <typename Call>
  static auto Retried(Call call) {
    for (int attempt = 0;; ++attempt) {
      auto out = call();
      if (out.ok() || out.status().code() != Code::kUnavailable || attempt == 2000) return out;
      std::this_thread::sleep_for(5ms);
    }
  }
  static Status PutRetried(ObjectStore& store, const std::string& key, const std::vector<std::byte>& bytes) {
    for (int attempt = 0;; ++attempt) {
      Status put = store.Put(key, bytes);
      if (put.ok() || put.code() != Code::kUnavailable || attempt == 2000) return put;
      std::this_thread::sleep_for(5ms);
    }
  }
  static std::vector<std::byte> Bytes(int i) { return ObjectPattern(kMiB + 17 * i, static_cast<uint8_t>(i + 1)); }

  void PutAll(ObjectStore& store) {
    for (int i = 0; i < kObjects; ++i) ASSERT_OK(PutRetried(store, "t" + std::to_string(i), Bytes(i)));
  }

  // Key -> whether it is in the host tier; every key once.
  std::map<std::string, bool> Tiers(ObjectStore& store) {
    std::map<std::string, bool> out;
    auto listed = store.List();
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    if (!listed.ok()) return out;
    for (const ObjectEntry& entry : *listed) {
      EXPECT_TRUE(out.emplace(entry.key, entry.host_tier).second) << entry.key << " listed twice";
    }
    return out;
  }

  // Waits until the tier worker has nothing left to move down.
  void Settle(ObjectStore& store) {
    size_t last = 0;
    WaitFor(
        [&] {
          size_t down = 0;
          for (const auto& [key, host] : Tiers(store)) down += host ? 1 : 0;
          const bool same = down == last && down > 0;
          last = down;
          return same;
        },
        10s);
  }

  void ExpectAllByteExact(ObjectStore& store) {
    for (int i = 0; i < kObjects; ++i) {
      auto got = Retried([&] { return store.Get("t" + std::to_string(i)); });
      ASSERT_TRUE(got.ok()) << "t" << i << ": " << got.status().ToString() << "\n" << kvd_.Log();
      EXPECT_TRUE(*got == Bytes(i)) << "t" << i << " came back with other bytes";
    }
  }

  std::string JournalPath() const { return dir_.path() + "/" + ipc_ + ".objects"; }
};

TEST_F(KvdTierRestartTest, BothTiersComeBackByteExactInTheirTiersAfterAKill9) {
  Start();
  std::map<std::string, bool> before;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    PutAll(*store);
    if (HasFatalFailure()) return;
    Settle(*store);
    before = Tiers(*store);
  }
  size_t down = 0;
  for (const auto& [key, host] : before) down += host ? 1 : 0;
  ASSERT_GE(down, 14u) << "the working set is more than the store";
  KillAndStart();
  EXPECT_NE(kvd_.Log().find("a host tier of 24 pages under the store, the previous kvd's"), std::string::npos)
      << kvd_.Log();
  EXPECT_NE(kvd_.Log().find("device 0: recovered " + std::to_string(kObjects) + " objects"), std::string::npos)
      << kvd_.Log();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Tiers(*store), before) << "every object back, each in the tier it was in";
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->devices[0].host_objects, down);
  ExpectAllByteExact(*store);  // promotes and demotes again as it reads
  // Read, moved, and killed again: still all there.
  KillAndStart();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Tiers(*store).size(), size_t{kObjects});
  ExpectAllByteExact(*store);
  EXPECT_TRUE(kvd_.Running()) << "its invariants held all along:\n" << kvd_.Log();
}

TEST_F(KvdTierRestartTest, AKillWhileTheWorkerMovesLeavesEachObjectInOneTierAndNothingLost) {
  Start();
  for (int round = 0; round < 3; ++round) {
    {
      auto store = OpenStore();
      ASSERT_NE(store, nullptr);
      // The first round fills the store; later ones read everything (moves
      // up and down) and are killed while the worker still moves.
      if (round == 0) {
        PutAll(*store);
      } else {
        for (int i = kObjects - 1; i >= 0; --i) (void)store->Get("t" + std::to_string(i));
      }
      if (HasFatalFailure()) return;
    }
    KillAndStart();
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    const auto tiers = Tiers(*store);
    EXPECT_EQ(tiers.size(), size_t{kObjects}) << "round " << round << "\n" << kvd_.Log();
    size_t down = 0;
    for (const auto& [key, host] : tiers) down += host ? 1 : 0;
    auto info = store->Info();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->devices[0].objects, size_t{kObjects}) << "counted once";
    EXPECT_EQ(info->devices[0].host_objects, down);
    ExpectAllByteExact(*store);
  }
  EXPECT_TRUE(kvd_.Running()) << kvd_.Log();
}

TEST_F(KvdTierRestartTest, AHostTierOfAnotherSizeDropsItsObjectsByName) {
  Start();
  std::map<std::string, bool> before;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    PutAll(*store);
    if (HasFatalFailure()) return;
    Settle(*store);
    before = Tiers(*store);
  }
  KillAndStart("40MiB");
  const std::string log = kvd_.Log();
  EXPECT_NE(log.find("object_store.host_tier changed (24 pages before the restart, 20 now)"), std::string::npos) << log;
  std::string first_down;
  for (const auto& [key, host] : before) {
    if (host && first_down.empty()) first_down = key;
  }
  ASSERT_FALSE(first_down.empty());
  EXPECT_NE(log.find("objects of the previous kvd's host tier are dropped"), std::string::npos) << log;
  EXPECT_NE(log.find("'" + first_down + "'"), std::string::npos) << "the dropped keys are named\n" << log;
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const auto after = Tiers(*store);
  for (const auto& [key, host] : before) {
    EXPECT_EQ(after.contains(key), !host) << key << ": the store's objects stay, the host tier's go";
  }
  EXPECT_TRUE(kvd_.Running()) << log;
}

// A record whose checksum matches but whose tier is none: the next kvd
// skips it, naming the key, and starts with the rest.
TEST_F(KvdTierRestartTest, AJournalRecordWithABadTierIsRefusedNamingItsKey) {
  Start();
  std::map<std::string, bool> before;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    PutAll(*store);
    if (HasFatalFailure()) return;
    Settle(*store);
    before = Tiers(*store);
  }
  std::string victim;
  for (const auto& [key, host] : before) {
    if (host && victim.empty()) victim = key;
  }
  ASSERT_FALSE(victim.empty());
  kvd_.Signal(SIGKILL);
  ASSERT_TRUE(kvd_.Wait(10s).has_value());
  {
    // The record: key at byte 48, tier at 308, checksum (xxhash64 of bytes
    // 8..320, seeded by device << 32 | record) first; the seed is found by
    // matching the checksum kvd wrote.
    std::fstream file(JournalPath(), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.is_open());
    std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const std::string needle = std::string(1, static_cast<char>(victim.size())) + '\0';
    size_t record = std::string::npos;
    for (size_t at = bytes.find(victim); at != std::string::npos; at = bytes.find(victim, at + 1)) {
      if (at >= 48 && bytes.compare(at - 4, 2, needle) == 0 && bytes[at + victim.size()] == '\0') {
        record = at - 48;
        break;
      }
    }
    ASSERT_NE(record, std::string::npos) << "the victim's record";
    uint64_t checksum = 0;
    std::memcpy(&checksum, bytes.data() + record, 8);
    ASSERT_EQ(static_cast<uint8_t>(bytes[record + 308]), 1) << "recorded in the host tier";
    std::optional<uint64_t> seed;
    for (uint64_t index = 0; index < 32768 && !seed; ++index) {
      if (XXH64(bytes.data() + record + 8, 312, index) == checksum) seed = index;
    }
    ASSERT_TRUE(seed.has_value());
    bytes[record + 308] = 7;
    checksum = XXH64(bytes.data() + record + 8, 312, *seed);
    std::memcpy(bytes.data() + record, &checksum, 8);
    file.seekp(0);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  Start();
  const std::string log = kvd_.Log();
  EXPECT_NE(log.find("('" + victim + "') skipped: no such tier 7"), std::string::npos) << log;
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Get(victim).status().code(), Code::kNotFound);
  EXPECT_EQ(Tiers(*store).size(), before.size() - 1) << "the rest come back";
  EXPECT_TRUE(kvd_.Running()) << log;
}

}  // namespace
}  // namespace nanokv::testing
