// A v2 slab's allocation and announce ring (nanokv/device/slab.h, the
// producer's; ipc/ring/announce_ring.h, kvd's), with producers as host
// threads (the host backend's producers; the same atomics and orders as a
// kernel's): allocation races with no overlap and every object read once,
// a spent slab and a full ring, a record reserved and never written, and
// forged records that poison only their own ring.
#include "ipc/ring/announce_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <xxhash.h>
#include <gtest/gtest.h>

#include "nanokv/device/slab.h"
#include "tests/util/status_matchers.h"

namespace nanokv::ipc {
namespace {

using device::AllocateInSlab;
using device::Announce;
using device::SlabAllocation;
using device::SlabCode;
using device::SlabCursor;

// kvd's ring for a slab and the producer's cursor and view of it.
struct Slab {
  AnnounceRing kvd;
  AnnounceRing producer;  // the producer's own mapping of the memfd
  SlabCursor cursor{};
  device::AnnounceRing view{};

  Slab(uint32_t records, uint64_t payload_bytes, uint32_t header_slots) {
    int fd = -1;
    auto made = AnnounceRing::Create(records, {payload_bytes, header_slots}, &fd);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    kvd = std::move(*made);
    auto attached = AnnounceRing::Attach(fd);
    EXPECT_TRUE(attached.ok()) << attached.status().ToString();
    producer = std::move(*attached);
    close(fd);
    cursor = {0, payload_bytes, 0, header_slots, 0, records, 256, 0};
    view = {producer.header(), producer.records()};
  }

  SlabCode Put(const std::string& key, uint64_t bytes, SlabAllocation* where = nullptr) {
    SlabAllocation at{};
    SlabCode code = AllocateInSlab(&cursor, view, bytes, &at);
    if (code != SlabCode::kOk) return code;
    if (where != nullptr) *where = at;
    return Announce(view, cursor, at, bytes, XXH64(key.data(), key.size(), 0), 1, key.data(),
                    static_cast<uint32_t>(key.size()));
  }
};

TEST(AnnounceRingTest, ProducerThreadsAllocateWithoutOverlapAndKvdReadsEachObjectOnce) {
  constexpr int kThreads = 8;
  constexpr uint64_t kPayload = 4 << 20;
  Slab slab(64, kPayload, 1500);
  // The producers write through kvd's own mapping here: TSan tracks memory
  // by address, so two mappings of one memfd (as two processes have) would
  // hide the stamps' and `consumed`'s orders from it.
  slab.view = {slab.kvd.header(), slab.kvd.records()};
  std::atomic<bool> done{false};
  std::map<std::string, AnnouncedObject> read;
  Status failed;
  std::thread kvd([&] {
    // Polls until the producers are done and nothing more is there.
    for (;;) {
      const bool last = done.load();
      auto got = slab.kvd.Poll(16);
      if (!got.ok()) {
        failed = got.status();
        return;
      }
      for (auto& o : *got) {
        if (!read.emplace(o.key, o).second) failed = Status::Internal("read twice: " + o.key);
      }
      if (last && got->empty()) return;
    }
  });
  std::vector<std::vector<std::pair<std::string, uint64_t>>> put(kThreads);
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int n = 0;; ++n) {
        const std::string key = "slab:t" + std::to_string(t) + ":" + std::to_string(n);
        const uint64_t bytes = 1 + rng() % 8192;
        SlabCode code;
        while ((code = slab.Put(key, bytes)) == SlabCode::kRingFull) std::this_thread::yield();
        if (code == SlabCode::kSlabFull) return;
        ASSERT_EQ(code, SlabCode::kOk);
        put[t].emplace_back(key, bytes);
      }
    });
  }
  for (auto& p : producers) p.join();
  done = true;
  kvd.join();
  ASSERT_OK(failed);
  size_t total = 0;
  for (const auto& mine : put) {
    for (const auto& [key, bytes] : mine) {
      auto it = read.find(key);
      ASSERT_NE(it, read.end()) << key << " was never read";
      EXPECT_EQ(it->second.bytes, bytes);
      EXPECT_EQ(it->second.payload_offset % 256, 0u);
      EXPECT_LE(it->second.payload_offset + bytes, kPayload) << key;
      ++total;
    }
  }
  EXPECT_EQ(read.size(), total);
  EXPECT_GT(total, 500u);  // 4 MiB of at most 8 KiB each: the payload ran out, or the slots
  // Every reservation was read: the objects and the two or more void records
  // of the allocations that found the slab spent.
  EXPECT_EQ(slab.kvd.consumed(), slab.cursor.announce_next);
  // The counts run past the slab only by the adds of threads that found it
  // spent together (one each at most for the slots).
  EXPECT_LE(slab.cursor.headers_next, 1500u + kThreads);
}

TEST(AnnounceRingTest, ASpentSlabLeavesAVoidRecordAndAFullRingTakesNothing) {
  Slab slab(4, 1 << 20, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(slab.Put("k" + std::to_string(i), 100), SlabCode::kOk);
  EXPECT_EQ(slab.Put("k3", 100), SlabCode::kSlabFull);  // no header slot: a void record
  // Four records reserved, none read: the ring is full and takes nothing.
  const SlabCursor before = slab.cursor;
  SlabAllocation at{};
  EXPECT_EQ(AllocateInSlab(&slab.cursor, slab.view, 100, &at), SlabCode::kRingFull);
  EXPECT_EQ(slab.cursor.announce_next, before.announce_next);
  EXPECT_EQ(slab.cursor.payload_next, before.payload_next);
  auto got = slab.kvd.Poll(100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[2].key, "k2");
  EXPECT_EQ(slab.kvd.consumed(), 4u);
  EXPECT_EQ(slab.producer.header()->consumed, 4u);  // the producer sees it
  // Read, the ring has room again; the slab is still spent.
  EXPECT_EQ(slab.Put("k4", 100), SlabCode::kSlabFull);
  EXPECT_EQ(AllocateInSlab(&slab.cursor, slab.view, 0, &at), SlabCode::kBadSize);
}

TEST(AnnounceRingTest, ARecordReservedAndNotYetWrittenHoldsBackTheOnesAfterIt) {
  Slab slab(8, 1 << 20, 16);
  SlabAllocation torn{};
  ASSERT_EQ(AllocateInSlab(&slab.cursor, slab.view, 64, &torn), SlabCode::kOk);  // a producer mid-write
  ASSERT_EQ(slab.Put("after", 64), SlabCode::kOk);
  auto got = slab.kvd.Poll(100);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());  // in ring order: nothing past the unwritten record
  EXPECT_EQ(slab.kvd.consumed(), 0u);
  const std::string key = "first";
  ASSERT_EQ(Announce(slab.view, slab.cursor, torn, 64, XXH64(key.data(), key.size(), 0), 1, key.data(), 5),
            SlabCode::kOk);
  got = slab.kvd.Poll(100);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].key, "first");
  EXPECT_EQ((*got)[1].key, "after");
}

// Each forgery, written over a record the producer stamped, poisons that
// ring with an error naming the rule; another slab's ring reads on.
TEST(AnnounceRingTest, AForgedRecordPoisonsItsOwnRingOnly) {
  const std::vector<std::pair<std::string, std::function<void(device::AnnounceRecord&)>>> forgeries = {
      {"header slot 99 is outside the slab's 16", [](auto& r) { r.header_slot = 99; }},
      {"header slot 0 was announced before", [](auto& r) { r.header_slot = 0; }},
      {"are outside the slab's 1048576 bytes", [](auto& r) { r.payload_offset = ~uint64_t{0} - 10; }},
      {"overlap an object announced before", [](auto& r) { r.payload_offset = 100; }},
      {"a key of 0 bytes", [](auto& r) { r.key_bytes = 0; }},
      {"a key of 257 bytes", [](auto& r) { r.key_bytes = 257; }},
      {"its key has a byte no key may have", [](auto& r) { r.key[1] = ' '; }},
      {"the key's hash is not the one announced", [](auto& r) { r.key_hash ^= 1; }},
      {"kind 7 is no record's", [](auto& r) { r.kind = 7; }},
      {"its stamp 77 is no lap's", [](auto& r) { r.stamp = 77; }},
  };
  for (const auto& [says, forge] : forgeries) {
    SCOPED_TRACE(says);
    Slab slab(8, 1 << 20, 16), neighbour(8, 1 << 20, 16);
    ASSERT_EQ(slab.Put("honest", 4096), SlabCode::kOk);
    ASSERT_EQ(slab.Put("forged", 4096), SlabCode::kOk);
    forge(slab.producer.records()[1]);
    auto got = slab.kvd.Poll(100);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), Code::kProtocolError);
    EXPECT_NE(got.status().ToString().find(says), std::string::npos) << got.status().ToString();
    EXPECT_EQ(slab.kvd.Poll(100).status().code(), Code::kProtocolError);  // it stays poisoned
    ASSERT_EQ(neighbour.Put("fine", 4096), SlabCode::kOk);
    auto fine = neighbour.kvd.Poll(100);
    ASSERT_TRUE(fine.ok());
    EXPECT_EQ(fine->size(), 1u);
  }
}

TEST(AnnounceRingTest, WhatIsNotARingIsRefused) {
  int fd = -1;
  EXPECT_EQ(AnnounceRing::Create(3, {1, 1}, &fd).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(AnnounceRing::Create(1u << 17, {1, 1}, &fd).status().code(), Code::kInvalidArgument);
  // An unsealed file of a ring's size.
  int plain = memfd_create("not-a-ring", MFD_CLOEXEC);
  ASSERT_GE(plain, 0);
  ASSERT_EQ(ftruncate(plain, static_cast<off_t>(AnnounceRing::FileBytes(8))), 0);
  EXPECT_EQ(AnnounceRing::Attach(plain).status().code(), Code::kProtocolError);
  close(plain);
  // A ring whose header lies about its size.
  auto made = AnnounceRing::Create(8, {1 << 20, 16}, &fd);
  ASSERT_TRUE(made.ok());
  made->header()->records = 16;
  auto lied = AnnounceRing::Attach(fd);
  EXPECT_EQ(lied.status().code(), Code::kProtocolError) << lied.status().ToString();
  close(fd);
}

}  // namespace
}  // namespace nanokv::ipc
