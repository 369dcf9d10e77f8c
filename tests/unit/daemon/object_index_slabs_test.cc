// v2 slabs in the object store's index (object_index_slabs.cc) on the real
// host backend: a producer (threads here, a kernel on cuda) allocates,
// writes and announces objects in a slab with nanokv/device/slab.h's
// functions, kvd polls the ring and indexes them; every end of a slab gives
// back what was never announced. CheckInvariants after steps.
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/objects/object_index.h"
#include "nanokv/device/slab.h"
#include "nanokv/device/slab_publish.h"
#include "tests/unit/daemon/object_store_fixture.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

constexpr uint32_t kProducer = 1000;

// A producer's side of a slab kvd granted: its cursor, the ring mapped from
// the memfd kvd sent, and the store mapped (the host backend's range).
class Producer {
 public:
  Producer(ObjectIndex& store, const SlabGrant& grant) : grant_(grant) {
    auto ring = ipc::AnnounceRing::Attach(grant.ring_fd);
    EXPECT_TRUE(ring.ok()) << ring.status().ToString();
    close(grant.ring_fd);
    ring_ = std::move(ring).value();
    base_ = *store.StoreBase(grant.device);
    cursor_ = {0, grant.payload_bytes, 0, grant.header_slots, 0, grant.ring_records, 256, 0};
  }

  device::AnnounceRing ring() const { return {ring_.header(), ring_.records()}; }

  // Allocate, payload, READY header; Announce when `announce`.
  device::SlabCode Put(const std::string& key, const std::vector<std::byte>& bytes, bool announce = true) {
    device::SlabAllocation at{};
    device::SlabCode code = device::AllocateInSlab(&cursor_, ring(), bytes.size(), &at);
    if (code != device::SlabCode::kOk) return code;
    // The device API's own steps, on the host: begin, payload, READY.
    const device::SlabGeometry slab{reinterpret_cast<char*>(base_ + grant_.payload_offset),
                                    reinterpret_cast<ObjectHeader*>(base_ + grant_.header_offset),
                                    grant_.payload_offset, static_cast<uint32_t>(grant_.page_bytes),
                                    grant_.first_epoch};
    const ObjectHeader header = device::SlabHeader(slab, at, bytes.size(), KeyHash(key));
    auto gone = [&] {  // the slot is not this write's (PutInSlabBlock's answer)
      device::detail::AnnounceVoid(ring(), cursor_, at.ring_index);
      return device::SlabCode::kSlabFull;
    };
    if (!device::BeginInSlab(slab.headers + at.header_slot, header)) return gone();
    std::memcpy(slab.payload + at.payload_offset, bytes.data(), bytes.size());
    if (!device::PublishInSlab(slab.headers + at.header_slot, header.epoch)) return gone();
    if (!announce) return code;
    return device::Announce(ring(), cursor_, at, bytes.size(), header.key_hash, header.epoch, key.data(),
                            static_cast<uint32_t>(key.size()));
  }

  device::SlabCursor& cursor() { return cursor_; }
  const SlabGrant& grant() const { return grant_; }

 private:
  SlabGrant grant_;
  ipc::AnnounceRing ring_;
  uintptr_t base_ = 0;
  device::SlabCursor cursor_{};
};

class SlabTest : public ObjectStoreTest {
 protected:
  Result<SlabGrant> Grant(uint64_t bytes, uint32_t slots = 16, uint64_t held_by = 1, uint32_t owner = kProducer) {
    return store_->GrantSlab({0, bytes, slots, 64}, owner, held_by, kMs);
  }
};

TEST_F(SlabTest, AnnouncedObjectsAreReadByteExact) {
  Open();
  auto grant = Grant(2 * kMiB);
  ASSERT_OK(grant.status());
  Check();
  Producer producer(*store_, *grant);
  ASSERT_EQ(producer.Put("slab:a", Pattern(1000, 1)), device::SlabCode::kOk);
  ASSERT_EQ(producer.Put("slab:b", Pattern(300 * 1024, 2)), device::SlabCode::kOk);
  EXPECT_FALSE(Has("slab:a"));  // not before kvd reads the ring
  EXPECT_EQ(store_->PollSlabs(2 * kMs), 2u);
  Check();
  EXPECT_EQ(*GetUnderLease("slab:a", 3 * kMs), Pattern(1000, 1));
  EXPECT_EQ(*GetUnderLease("slab:b", 3 * kMs), Pattern(300 * 1024, 2));
  auto plan = store_->GetLocation("slab:b", 3 * kMs);
  ASSERT_OK(plan.status());
  EXPECT_EQ(plan->epoch, grant->first_epoch + 1);
  // Announced objects are the producer's, as committed ones.
  EXPECT_EQ(store_->Remove("slab:a", 4 * kMs, kProducer + 1).code(), Code::kPermissionDenied);
  ASSERT_OK(store_->Remove("slab:a", 4 * kMs, kProducer));
  ASSERT_OK(store_->ReleaseSlab(grant->id, kProducer, 5 * kMs));
  Check();
  EXPECT_EQ(*GetUnderLease("slab:b", 6 * kMs), Pattern(300 * 1024, 2));
  EXPECT_EQ(store_->slab_counters().announced, 2u);
  EXPECT_EQ(store_->slab_counters().live, 0u);
  ASSERT_OK(store_->Remove("slab:b", 7 * kMs, kProducer));
  EXPECT_EQ(store_->Stats()[0].payload_used, 0u);
  Check();
}

TEST_F(SlabTest, TwoProducersRaceInTheirOwnSlabs) {
  Open();
  auto a = Grant(3 * kMiB, 64, 1, kProducer), b = Grant(3 * kMiB, 64, 2, kProducer + 1);
  ASSERT_OK(a.status());
  ASSERT_OK(b.status());
  Producer pa(*store_, *a), pb(*store_, *b);
  std::atomic<bool> done{false};
  auto run = [](Producer& p, const std::string& prefix, std::atomic<int>& ok) {
    // Two threads per producer: the cursor's CAS loops are shared.
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 30; ++i) {
          const std::string key = prefix + std::to_string(t) + ":" + std::to_string(i);
          device::SlabCode code;
          while ((code = p.Put(key, Pattern(4000 + i, uint8_t(i + t)))) == device::SlabCode::kRingFull) {
            std::this_thread::yield();
          }
          if (code == device::SlabCode::kOk) ++ok;
        }
      });
    }
    for (auto& th : threads) th.join();
  };
  std::atomic<int> ok_a{0}, ok_b{0};
  std::thread poller([&] {
    while (!done) store_->PollSlabs(2 * kMs, 16);
  });
  std::thread ta([&] { run(pa, "a", ok_a); }), tb([&] { run(pb, "b", ok_b); });
  ta.join();
  tb.join();
  done = true;
  poller.join();
  store_->PollSlabs(2 * kMs);
  EXPECT_EQ(ok_a, 60);
  EXPECT_EQ(ok_b, 60);
  EXPECT_EQ(store_->slab_counters().announced, 120u);
  Check();
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 30; ++i) {
      const std::string suffix = std::to_string(t) + ":" + std::to_string(i);
      EXPECT_EQ(*GetUnderLease("a" + suffix, 3 * kMs), Pattern(4000 + i, uint8_t(i + t)));
      EXPECT_EQ(*GetUnderLease("b" + suffix, 3 * kMs), Pattern(4000 + i, uint8_t(i + t)));
    }
  }
  ASSERT_OK(store_->ReleaseSlab(a->id, kProducer, 4 * kMs));
  ASSERT_OK(store_->ReleaseSlab(b->id, kProducer + 1, 4 * kMs));
  Check();
}

TEST_F(SlabTest, ASpentSlabSaysSlabFull) {
  Open();
  auto grant = Grant(4096, 3);
  ASSERT_OK(grant.status());
  Producer producer(*store_, *grant);
  EXPECT_EQ(producer.Put("x", Pattern(3000, 1)), device::SlabCode::kOk);
  EXPECT_EQ(producer.Put("y", Pattern(2000, 1)), device::SlabCode::kSlabFull);  // no payload left for it: a void record
  EXPECT_EQ(producer.Put("z", Pattern(1000, 2)), device::SlabCode::kOk);        // the rest still fits
  // The release reads the ring whole, past the void record.
  ASSERT_OK(store_->ReleaseSlab(grant->id, kProducer, 2 * kMs));
  EXPECT_TRUE(Has("x"));
  EXPECT_FALSE(Has("y"));
  EXPECT_EQ(*GetUnderLease("z", 3 * kMs), Pattern(1000, 2));
  auto slots = Grant(kMiB, 1);
  ASSERT_OK(slots.status());
  Producer one(*store_, *slots);
  EXPECT_EQ(one.Put("w", Pattern(10, 1)), device::SlabCode::kOk);
  EXPECT_EQ(one.Put("v", Pattern(10, 1)), device::SlabCode::kSlabFull);  // no header slot left
  store_->PollSlabs(4 * kMs);
  EXPECT_TRUE(Has("w"));
  EXPECT_FALSE(Has("v"));
  Check();
}

TEST_F(SlabTest, RefusalsNameTheLimit) {
  Open();
  // 10 MiB of payload under a 0.9 high watermark.
  auto big = Grant(10 * kMiB);
  ASSERT_EQ(big.status().code(), Code::kResourceExhausted);
  EXPECT_NE(big.status().message().find("object_store.high_watermark"), std::string::npos) << big.status().ToString();
  auto slots = Grant(kMiB, 1u << 20);
  ASSERT_EQ(slots.status().code(), Code::kInvalidArgument);
  EXPECT_NE(slots.status().message().find("header slots"), std::string::npos);
  EXPECT_EQ(store_->GrantSlab({0, kMiB, 4, 3}, kProducer, 1, kMs).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->GrantSlab({0, 0, 4, 4}, kProducer, 1, kMs).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->GrantSlab({7, kMiB, 4, 4}, kProducer, 1, kMs).status().code(), Code::kNotFound);
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < config_.max_slabs; ++i) {
    auto g = store_->GrantSlab({static_cast<int>(i % 2), 4096, 1, 2}, kProducer, 1, kMs);
    ASSERT_OK(g.status());
    close(g->ring_fd);
    ids.push_back(g->id);
  }
  auto more = Grant(4096, 1);
  ASSERT_EQ(more.status().code(), Code::kResourceExhausted);
  EXPECT_NE(more.status().message().find("object_store.max_slabs"), std::string::npos);
  Check();
  EXPECT_EQ(store_->ReleaseSlab(ids[0], kProducer + 1, kMs).code(), Code::kPermissionDenied);
  for (uint64_t id : ids) ASSERT_OK(store_->ReleaseSlab(id, kProducer, kMs));
  EXPECT_EQ(store_->ReleaseSlab(ids[0], kProducer, kMs).code(), Code::kNotFound);
  EXPECT_EQ(store_->Stats()[0].payload_used, 0u);
  Check();
}

TEST_F(SlabTest, AClosedConnectionKeepsOnlyWhatWasAnnounced) {
  Open();
  auto grant = Grant(2 * kMiB, 8, 42);
  ASSERT_OK(grant.status());
  Producer producer(*store_, *grant);
  ASSERT_EQ(producer.Put("told", Pattern(5000, 3)), device::SlabCode::kOk);
  ASSERT_EQ(producer.Put("untold", Pattern(5000, 4), /*announce=*/false), device::SlabCode::kOk);
  EXPECT_EQ(store_->ReleaseHeldSlabs(41, 2 * kMs), 0u);
  EXPECT_EQ(store_->ReleaseHeldSlabs(42, 2 * kMs), 1u);  // reads the ring first
  Check();
  EXPECT_EQ(*GetUnderLease("told", 3 * kMs), Pattern(5000, 3));
  EXPECT_FALSE(Has("untold"));
  EXPECT_EQ(store_->Stats()[0].payload_used, 5120u);  // the announced object's rounded bytes only
  EXPECT_EQ(store_->Stats()[0].objects, 1u);
}

TEST_F(SlabTest, AForgedRecordPoisonsOnlyItsSlab) {
  Open();
  auto bad = Grant(kMiB, 8, 1), good = Grant(kMiB, 8, 2);
  ASSERT_OK(bad.status());
  ASSERT_OK(good.status());
  Producer liar(*store_, *bad), honest(*store_, *good);
  ASSERT_EQ(liar.Put("before", Pattern(100, 1)), device::SlabCode::kOk);
  // A record past the slab: a payload offset beyond its bytes.
  device::SlabAllocation at{};
  ASSERT_EQ(device::AllocateInSlab(&liar.cursor(), liar.ring(), 256, &at), device::SlabCode::kOk);
  at.payload_offset = 4 * kMiB;
  ASSERT_EQ(device::Announce(liar.ring(), liar.cursor(), at, 256, KeyHash("forged"), bad->first_epoch + at.header_slot,
                             "forged", 6),
            device::SlabCode::kOk);
  ASSERT_EQ(honest.Put("honest", Pattern(100, 2)), device::SlabCode::kOk);
  store_->PollSlabs(2 * kMs);
  EXPECT_EQ(store_->slab_counters().poisoned, 1u);
  EXPECT_EQ(store_->slab_counters().live, 1u);
  EXPECT_TRUE(Has("before"));
  EXPECT_FALSE(Has("forged"));
  EXPECT_TRUE(Has("honest"));
  Check();
  // A bad hash, and a wrong epoch, each poison their slab too.
  auto hash = Grant(kMiB, 8, 3);
  ASSERT_OK(hash.status());
  Producer hasher(*store_, *hash);
  ASSERT_EQ(device::AllocateInSlab(&hasher.cursor(), hasher.ring(), 256, &at), device::SlabCode::kOk);
  ASSERT_EQ(device::Announce(hasher.ring(), hasher.cursor(), at, 256, KeyHash("other"), hash->first_epoch, "mine", 4),
            device::SlabCode::kOk);
  auto epoch = Grant(kMiB, 8, 4);
  ASSERT_OK(epoch.status());
  Producer stale(*store_, *epoch);
  ASSERT_EQ(device::AllocateInSlab(&stale.cursor(), stale.ring(), 256, &at), device::SlabCode::kOk);
  ASSERT_EQ(device::Announce(stale.ring(), stale.cursor(), at, 256, KeyHash("old"), epoch->first_epoch - 1, "old", 3),
            device::SlabCode::kOk);
  store_->PollSlabs(3 * kMs);
  EXPECT_EQ(store_->slab_counters().poisoned, 3u);
  EXPECT_EQ(store_->slab_counters().live, 1u);
  EXPECT_FALSE(Has("mine"));
  EXPECT_FALSE(Has("old"));
  Check();
}

TEST_F(SlabTest, ASlabPastItsTtlEnds) {
  config_.slab_ttl = std::chrono::milliseconds(50);
  Open();
  auto grant = Grant(kMiB);
  ASSERT_OK(grant.status());
  Producer producer(*store_, *grant);
  ASSERT_EQ(producer.Put("late", Pattern(100, 1)), device::SlabCode::kOk);
  store_->PollSlabs(grant->expires_ns - 1, 0);  // read nothing yet
  EXPECT_EQ(store_->slab_counters().live, 1u);
  store_->PollSlabs(grant->expires_ns);
  EXPECT_EQ(store_->slab_counters().live, 0u);
  EXPECT_EQ(store_->slab_counters().expired, 1u);
  EXPECT_TRUE(Has("late"));  // announced before it ended: it stands
  Check();
}

TEST_F(SlabTest, ATakenKeyKeepsItsObject) {
  Open();
  ASSERT_OK(PutByPlan("k", Pattern(100, 1), 0, kMs, kProducer));
  auto grant = Grant(kMiB);
  ASSERT_OK(grant.status());
  Producer producer(*store_, *grant);
  ASSERT_EQ(producer.Put("k", Pattern(200, 2)), device::SlabCode::kOk);
  ASSERT_EQ(producer.Put("k2", Pattern(200, 3)), device::SlabCode::kOk);
  EXPECT_EQ(store_->PollSlabs(2 * kMs), 1u);
  EXPECT_EQ(store_->slab_counters().lost_keys, 1u);
  EXPECT_EQ(store_->slab_counters().live, 1u);  // a lost key is no forgery
  EXPECT_EQ(*GetUnderLease("k", 3 * kMs), Pattern(100, 1));
  EXPECT_EQ(*GetUnderLease("k2", 3 * kMs), Pattern(200, 3));
  ASSERT_OK(store_->ReleaseSlab(grant->id, kProducer, 4 * kMs));
  Check();
}

}  // namespace
}  // namespace nanokv::kvd
