// The host tier under the object store, on the real host backend (both
// tiers are host memory then, with the same rules): demotion under
// pressure, promotion, gets from each tier byte-exact, the races of a move
// with a get or a remove, eviction from the host tier, and refusals.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "daemon/objects/object_recovery.h"
#include "tests/unit/daemon/object_store_fixture.h"

namespace nanokv::kvd {
namespace {

class ObjectTierTest : public ObjectStoreTest {
 protected:
  void SetUp() override {
    ObjectStoreTest::SetUp();
    config_.host_tier = 8 * kPage;  // 16 MiB per device under a 10 MiB store
  }

  // A get as an engine makes it, from whichever tier the object is in;
  // then the tier worker's round its kick asks for (a host-tier object
  // read is promoted, for the next get to read from the store).
  Result<std::vector<std::byte>> Get(const std::string& key, uint64_t now_ns) {
    auto got = GetUnderLease(key, now_ns);
    store_->RunTierWork(now_ns);
    return got;
  }

  ObjectIndex::TierMove Demote(int device, uint64_t now_ns) {
    auto move = store_->BeginDemotion(device, now_ns);
    EXPECT_TRUE(move.has_value());
    if (!move) return {};
    EXPECT_TRUE(store_->FinishMove(*move, store_->CopyMove(*move), now_ns));
    return *move;
  }

  StoreDeviceStats Stats(int device) { return store_->Stats()[static_cast<size_t>(device)]; }

  // What a kvd started now would bring back of device 0's store: the
  // journal file as it stands and the header pages as they are (a kill -9
  // leaves both, the page keeper holds the pages).
  static Result<JournaledStores> ReadJournal(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return ObjectJournal::Decode(bytes);
  }

  static bool Journaled(const std::string& path, const std::string& key) {
    auto decoded = ReadJournal(path);
    if (!decoded.ok()) return false;
    for (const JournaledStore& store : decoded->devices) {
      for (const JournaledObject& object : store.objects) {
        if (object.key == key) return true;
      }
    }
    return false;
  }

  RecoveredStore WhatARestartFinds(const std::string& path) {
    auto decoded = ReadJournal(path);
    EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
    if (!decoded.ok() || decoded->devices.empty()) return {};
    const JournaledStore& previous = decoded->devices[0];
    auto base = store_->StoreBase(previous.device);
    std::vector<std::vector<std::byte>> headers;
    for (uint32_t page : previous.header_pages) {
      headers.emplace_back(kPage);
      std::memcpy(headers.back().data(), reinterpret_cast<const void*>(*base + uint64_t{page} * kPage), kPage);
    }
    return ScanStore(previous, kPage, headers, /*host_tier_back=*/true);
  }
};

TEST_F(ObjectTierTest, OffUnlessItsKeySetsASize) {
  config_.host_tier = 0;
  Open();
  EXPECT_FALSE(store_->has_host_tier());
  PutMany("k", 10, kMiB);  // past the 10 MiB store: eviction drops
  EXPECT_FALSE(store_->BeginDemotion(0, 20 * kMs).has_value());
  EXPECT_EQ(store_->RunTierWork(20 * kMs), 0u);
  EXPECT_GT(Stats(0).evictions, 0u);
  EXPECT_EQ(Stats(0).host_capacity, 0u);
  EXPECT_EQ(Stats(0).demotions, 0u);
  Check();
}

TEST_F(ObjectTierTest, PressureDemotesInsteadOfDroppingAndEveryObjectReadsBackByteExact) {
  Open();
  // 20 MiB into a 10 MiB store, the tier worker's round after each put.
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK(PutByPlan("k" + std::to_string(i), Pattern(kMiB, uint8_t(i)), 0, (1 + i) * kMs));
    store_->RunTierWork((1 + i) * kMs);
    Check();
  }
  const StoreDeviceStats s = Stats(0);
  EXPECT_EQ(s.evictions, 0u);  // nothing dropped
  EXPECT_GT(s.demotions, 0u);
  EXPECT_EQ(s.objects, 20u);                          // both tiers
  EXPECT_LE(s.payload_used, s.payload_capacity / 2);  // the worker keeps the store at low_watermark
  for (int i = 0; i < 20; ++i) {
    auto got = Get("k" + std::to_string(i), (100 + i) * kMs);
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, Pattern(kMiB, uint8_t(i))) << "k" << i;
    Check();
  }
  // The last one read from the host tier was promoted after: read again,
  // it is a store hit.
  ASSERT_OK(Get("k19", 200 * kMs).status());
  EXPECT_GT(Stats(0).promotions, 0u);
  EXPECT_GT(Stats(0).host_hits, 0u);
  EXPECT_GT(Stats(0).gpu_hits, 0u);
}

TEST_F(ObjectTierTest, AWriteWithNoRoomWaitsForTheWorkerInsteadOfDropping) {
  Open();
  PutMany("f", 10, kMiB);  // the 10 MiB store, full; no tier worker round yet
  auto refused = PutByPlan("late", Pattern(kMiB, 42), 0, 20 * kMs);
  EXPECT_EQ(refused.code(), Code::kUnavailable) << refused.ToString();
  EXPECT_EQ(Stats(0).evictions, 0u);
  EXPECT_EQ(Stats(0).objects, 10u);
  Check();
  EXPECT_GT(store_->RunTierWork(21 * kMs), 0u);
  ASSERT_OK(PutByPlan("late", Pattern(kMiB, 42), 0, 22 * kMs));
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(Has("f" + std::to_string(i)));
  Check();
}

// Under low_watermark a write can still find no room (here: larger than
// what is free): told "ask again", it gets a move per ask until it fits,
// not "ask again" for ever.
TEST_F(ObjectTierTest, AWriteRefusedUnderTheLowWatermarkGetsRoomMadeForIt) {
  Open();
  // Filled to just under the mark, then a write larger than what is free.
  uint64_t now = 1;
  const double low = config_.low_watermark * static_cast<double>(Stats(0).payload_capacity);
  for (int i = 0; static_cast<double>(Stats(0).payload_used + kMiB) < low; ++i) {
    ASSERT_OK(PutByPlan("f" + std::to_string(i), Pattern(kMiB, uint8_t(i)), 0, ++now * kMs));
  }
  const auto big = Pattern(Stats(0).payload_capacity - Stats(0).payload_used + kMiB, 9);
  Status put = PutByPlan("big", big, 0, now * kMs);
  EXPECT_EQ(put.code(), Code::kUnavailable) << put.ToString();
  for (int asks = 0; put.code() == Code::kUnavailable && asks < 8; ++asks) {
    EXPECT_EQ(store_->RunTierWork(++now * kMs), 1u) << "one move per refused write";
    put = PutByPlan("big", big, 0, ++now * kMs);
  }
  ASSERT_OK(put);
  EXPECT_GT(Stats(0).demotions, 0u);
  EXPECT_EQ(Stats(0).evictions, 0u);
  Check();
}

// A host-tier object larger than the room the store has while it sits
// under the low mark: its reads ask the worker for room, one demotion a
// round, until it fits. Before, nothing demoted under the mark and the
// reads were told "ask again" for ever.
TEST_F(ObjectTierTest, APromotionWithNoRoomUnderTheLowWatermarkGetsRoomMadeForIt) {
  Open();
  uint64_t now = 1;
  const auto big = Pattern(5 * kMiB + 5, 3);  // more than the marks are apart (0.9 - 0.5 of 10 MiB here)
  ASSERT_OK(PutByPlan("big", big, 0, ++now * kMs));
  Demote(0, ++now * kMs);
  const double low = config_.low_watermark * static_cast<double>(Stats(0).payload_capacity);
  for (int i = 0; static_cast<double>(Stats(0).payload_used + kMiB) < low; ++i) {
    ASSERT_OK(PutByPlan("f" + std::to_string(i), Pattern(kMiB, uint8_t(i)), 0, ++now * kMs));
  }
  const double high = config_.high_watermark * static_cast<double>(Stats(0).payload_capacity);
  ASSERT_GT(static_cast<double>(Stats(0).payload_used + big.size()), high)
      << "the test needs a store with no room: used " << Stats(0).payload_used << " of " << Stats(0).payload_capacity
      << ", host objects " << Stats(0).host_objects << ", demotions " << Stats(0).demotions;
  // The read is served from the host tier and queues the promotion; the
  // worker's rounds then make room, one demotion each, until it fits.
  auto got = Get("big", ++now * kMs);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, big);
  for (int round = 0; round < 12 && Stats(0).promotions == 0; ++round) store_->RunTierWork(++now * kMs);
  auto located = store_->GetLocation("big", ++now * kMs);
  ASSERT_OK(located.status());
  EXPECT_EQ(located->tier, ObjectTier::kGpu) << "promoted into the room made for it";
  EXPECT_GT(Stats(0).demotions, 1u);
  EXPECT_EQ(Stats(0).promotions, 1u);
  EXPECT_EQ(Stats(0).evictions, 0u);
  Check();
}

TEST_F(ObjectTierTest, APromotedObjectIsReadyInTheStoreAtANewEpoch) {
  Open();
  const auto bytes = Pattern(3 * kMiB + 17, 5);  // spans pages, odd length
  ASSERT_OK(PutByPlan("p", bytes, 0, 1 * kMs));
  auto before = store_->GetLocation("p", 2 * kMs);
  ASSERT_OK(before.status());
  Demote(0, 3 * kMs);
  Check();
  EXPECT_EQ(Stats(0).host_objects, 1u);
  EXPECT_EQ(Stats(0).payload_used, 0u);  // its store space is free
  auto located = store_->GetLocation("p", 4 * kMs);
  ASSERT_OK(located.status());
  EXPECT_EQ(located->tier, ObjectTier::kHost);
  EXPECT_EQ(Stats(0).host_hits, 1u);
  EXPECT_EQ(store_->RunTierWork(5 * kMs), 1u);
  Check();
  auto after = store_->GetLocation("p", 6 * kMs);
  ASSERT_OK(after.status());
  EXPECT_TRUE(EpochIsNewer(after->epoch, before->epoch));
  const ObjectHeader header = HeaderOnDevice(*after);
  EXPECT_EQ(header.state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(header.epoch, after->epoch);
  EXPECT_EQ(header.payload_base, after->payload_offset);
  EXPECT_EQ(header.bytes_total, bytes.size());
  auto got = GetUnderLease("p", 7 * kMs);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, bytes);
  EXPECT_EQ(Stats(0).promotions, 1u);
  EXPECT_EQ(Stats(0).host_used, 0u);
}

// Issue 32: a move copies on the tier worker's own stream (non-blocking,
// so it neither waits for kvd's other device work nor holds it up), the
// READY header queued after the bytes and both waited for before the move
// finishes. The host backend runs a stream's copies only at SyncStream, so
// a move that did not wait would read back stale bytes here.
TEST_F(ObjectTierTest, AMoveCopiesOnTheTierStreamAndWaitsForIt) {
  Open();
  const auto bytes = Pattern(2 * kMiB + 5, 9);
  ASSERT_OK(PutByPlan("s", bytes, 0, 1 * kMs));
  const uint64_t streamed = backend_->stream_copy_calls();
  uint64_t work = backend_->device_work_calls();
  Demote(0, 2 * kMs);
  EXPECT_EQ(backend_->stream_copy_calls() - streamed, 1u) << "the bytes, down";
  EXPECT_EQ(backend_->device_work_calls() - work, 1u) << "nothing on the default stream besides";
  auto down = GetUnderLease("s", 3 * kMs);  // from the host tier; asks for its promotion
  ASSERT_OK(down.status());
  EXPECT_TRUE(*down == bytes) << "the demotion finished before its copy ran";
  work = backend_->device_work_calls();
  EXPECT_EQ(store_->RunTierWork(4 * kMs), 1u);
  EXPECT_EQ(backend_->stream_copy_calls() - streamed, 3u) << "the bytes, then their READY header, up";
  EXPECT_EQ(backend_->device_work_calls() - work, 2u) << "nothing on the default stream besides";
  Check();
  auto located = store_->GetLocation("s", 5 * kMs);
  ASSERT_OK(located.status());
  EXPECT_EQ(located->tier, ObjectTier::kGpu);
  EXPECT_EQ(HeaderOnDevice(*located).state, static_cast<uint32_t>(ObjectState::kReady));
  auto got = GetUnderLease("s", 6 * kMs);
  ASSERT_OK(got.status());
  EXPECT_TRUE(*got == bytes) << "the promotion finished before its copy ran";
}

TEST_F(ObjectTierTest, ARemoveMidDemotionWinsAndFreesBothTiers) {
  Open();
  ASSERT_OK(PutByPlan("r", Pattern(kMiB, 1), 0, 1 * kMs));
  auto move = store_->BeginDemotion(0, 2 * kMs);
  ASSERT_TRUE(move.has_value());
  Check();
  ASSERT_OK(store_->Remove("r", 3 * kMs));
  Check();  // the host reservation is kept for the copy still running
  EXPECT_FALSE(store_->FinishMove(*move, store_->CopyMove(*move), 4 * kMs));
  Check();
  EXPECT_FALSE(Has("r"));
  EXPECT_EQ(Stats(0).host_used, 0u);
  EXPECT_EQ(Stats(0).payload_used, 0u);
  EXPECT_EQ(Stats(0).demotions, 0u);
}

TEST_F(ObjectTierTest, AGetMidDemotionReadsTheStoreCopyAndALeaseKeepsItThere) {
  Open();
  const auto bytes = Pattern(kMiB, 9);
  ASSERT_OK(PutByPlan("g", bytes, 0, 1 * kMs));
  auto move = store_->BeginDemotion(0, 2 * kMs);
  ASSERT_TRUE(move.has_value());
  // Readable throughout: a reader leases the store's copy and reads it.
  auto lease = store_->AcquireLease("g", kHolder, 3 * kMs);
  ASSERT_OK(lease.status());
  auto read = CopyOut("g", 3 * kMs);
  ASSERT_OK(read.status());
  EXPECT_EQ(*read, bytes);
  // The lease cancels the demotion: the reader's bytes stay where it reads.
  EXPECT_FALSE(store_->FinishMove(*move, store_->CopyMove(*move), 4 * kMs));
  Check();
  EXPECT_EQ(Stats(0).host_used, 0u);
  read = CopyOut("g", 5 * kMs);
  ASSERT_OK(read.status());
  EXPECT_EQ(*read, bytes);
  ASSERT_OK(store_->ReleaseLease("g", lease->id, 5 * kMs));
  // Unleased, it goes down the next time, and comes back whole.
  Demote(0, 6 * kMs);
  Check();
  auto got = Get("g", 7 * kMs);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, bytes);
}

TEST_F(ObjectTierTest, ARemoveMidPromotionWinsAndTheReservationGoesAtItsEnd) {
  Open();
  ASSERT_OK(PutByPlan("m", Pattern(2 * kMiB, 3), 0, 1 * kMs));
  Demote(0, 2 * kMs);
  EXPECT_EQ(store_->GetLocation("m", 3 * kMs)->tier, ObjectTier::kHost);
  auto move = store_->BeginPromotion(0, 4 * kMs);
  ASSERT_TRUE(move.has_value());
  Check();
  ASSERT_OK(store_->Remove("m", 5 * kMs));
  Check();
  // The store space stays reserved while the copy may write it: a producer
  // opening now gets other space.
  EXPECT_GT(Stats(0).payload_used, 0u);
  EXPECT_FALSE(store_->FinishMove(*move, store_->CopyMove(*move), 6 * kMs));
  Check();
  EXPECT_EQ(Stats(0).payload_used, 0u);
  EXPECT_EQ(Stats(0).host_used, 0u);
  EXPECT_FALSE(Has("m"));
}

TEST_F(ObjectTierTest, AFullHostTierDropsItsOwnVictims) {
  config_.host_tier = 2 * kPage;  // 4 MiB
  Open();
  for (int i = 0; i < 12; ++i) {
    ASSERT_OK(PutByPlan("h" + std::to_string(i), Pattern(kMiB, uint8_t(i)), 0, (1 + i) * kMs));
    store_->RunTierWork((1 + i) * kMs);
    Check();
  }
  const StoreDeviceStats s = Stats(0);
  EXPECT_GT(s.host_evictions, 0u);
  EXPECT_LE(s.host_used, s.host_capacity);
  // The oldest went from the host tier; the newest is still in the store.
  EXPECT_FALSE(Has("h0"));
  auto newest = Get("h11", 50 * kMs);
  ASSERT_OK(newest.status());
  EXPECT_EQ(*newest, Pattern(kMiB, 11));
}

TEST_F(ObjectTierTest, HostTierObjectsLeaveOnRemoveAndPinsStayInTheStore) {
  Open();
  ASSERT_OK(PutByPlan("a", Pattern(kMiB, 1), 0, 1 * kMs));
  ASSERT_OK(PutByPlan("pinned", Pattern(kMiB, 2), 0, 1 * kMs));
  ASSERT_OK(store_->SetPin("pinned", ObjectPin::kHard));
  Demote(0, 2 * kMs);
  EXPECT_FALSE(store_->BeginDemotion(0, 3 * kMs).has_value());  // a hard pin never leaves the store
  ASSERT_OK(store_->Remove("a", 4 * kMs));
  Check();
  EXPECT_EQ(Stats(0).host_objects, 0u);
  EXPECT_EQ(Stats(0).host_used, 0u);
}

TEST_F(ObjectTierTest, AKillMidDemotionLosesNothingReady) {
  char dir[] = "/tmp/nanokv_tier_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/objects";
  Open();
  ASSERT_OK(store_->StartJournal(path));
  // Down first, so "d" lands past the host tier's first page: an offset a
  // stale record could name in the store too.
  ASSERT_OK(PutByPlan("filler", Pattern(2 * kMiB + 512, 1), 0, 1 * kMs));
  Demote(0, 1 * kMs);
  const auto bytes = Pattern(kMiB + 3, 4);
  ASSERT_OK(PutByPlan("d", bytes, 0, 1 * kMs));
  auto move = store_->BeginDemotion(0, 2 * kMs);
  ASSERT_TRUE(move.has_value());
  ASSERT_OK(store_->CopyMove(*move));
  // Killed here, before FinishMove: the journal still vouches for the
  // store's copy, whose header and bytes are untouched.
  // (The filler comes back from the host tier.)
  RecoveredStore found = WhatARestartFinds(path);
  ASSERT_EQ(found.objects.size(), 2u) << (found.reasons.empty() ? "" : found.reasons[0]);
  EXPECT_EQ(found.objects[0].key, "filler");
  EXPECT_EQ(found.objects[0].tier, Tier::kHost);
  EXPECT_EQ(found.objects[1].key, "d");
  EXPECT_EQ(found.objects[1].tier, Tier::kGpu);
  auto base = store_->StoreBase(0);
  ASSERT_OK(base.status());
  std::vector<std::byte> in_store(bytes.size());
  std::memcpy(in_store.data(), reinterpret_cast<const void*>(*base + found.objects[1].payload_offset), bytes.size());
  EXPECT_EQ(in_store, bytes);
  EXPECT_TRUE(store_->FinishMove(*move, Status::OK(), 3 * kMs));
  Check();
  // Down in the host tier it is journaled there, with no store slot (a pin
  // journals it again): a restart brings it back from the host tier, once.
  ASSERT_OK(store_->SetPin("d", ObjectPin::kSoft));
  EXPECT_TRUE(Journaled(path, "d"));
  found = WhatARestartFinds(path);
  ASSERT_EQ(found.objects.size(), 2u) << "d and the filler, both down";
  for (const JournaledObject& object : found.objects) {
    EXPECT_EQ(object.tier, Tier::kHost) << object.key;
    EXPECT_EQ(object.slot, 0u) << object.key;
    if (object.key == "d") {
      EXPECT_EQ(object.payload_offset, move->target);
      EXPECT_EQ(object.pin, ObjectPin::kSoft);
    }
  }
  EXPECT_EQ(found.moves_cut, 0u) << "the store's record went once the host tier's was written";
  // Back in the store it is journaled again, at its new slot and epoch.
  EXPECT_EQ(store_->GetLocation("d", 4 * kMs)->tier, ObjectTier::kHost);
  EXPECT_EQ(store_->RunTierWork(5 * kMs), 1u);
  found = WhatARestartFinds(path);
  ASSERT_EQ(found.objects.size(), 2u) << (found.reasons.empty() ? "" : found.reasons[0]);
  auto located = store_->GetLocation("d", 6 * kMs);
  ASSERT_OK(located.status());
  size_t store_records = 0;
  for (const JournaledObject& object : found.objects) {
    if (object.tier != Tier::kGpu) continue;
    ++store_records;
    EXPECT_EQ(object.key, "d");
    EXPECT_EQ(object.epoch, located->epoch);
  }
  EXPECT_EQ(store_records, 1u);
  store_.reset();  // a stop removes the journal
  rmdir(dir);
}

TEST_F(ObjectTierTest, AHostTierLargerThanTheMachineIsRefusedNamingItsKey) {
  config_.host_tier = uint64_t{1} << 60;
  auto store = ObjectIndex::Create(*backend_, *node_, config_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kInvalidArgument);
  EXPECT_NE(store.status().ToString().find("object_store.host_tier"), std::string::npos) << store.status().ToString();
  EXPECT_OK(CheckHostTier(ObjectStoreConfig{}, 2));
}

}  // namespace
}  // namespace nanokv::kvd
