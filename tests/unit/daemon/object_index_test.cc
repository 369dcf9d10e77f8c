// The object store's index on the real host backend: every state transition
// and every illegal one, epochs across reuse, eviction order (FIFO, LRU),
// leases and pins against eviction, zombie reclaim, the pool's accounting,
// threads. CheckInvariants (index, allocator, device headers, NodeState)
// after steps. Bytes move as a producer and a reader move them, through the
// plan API and the backend (PutByPlan, GetUnderLease: object_store_fixture.h).
// The cases against a hostile client are in object_index_trust_test.cc.
#include "daemon/objects/object_index.h"

#include <atomic>
#include <cstring>
#include <span>
#include <thread>

#include <gtest/gtest.h>

#include "tests/unit/daemon/object_store_fixture.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

TEST_F(ObjectStoreTest, PutGetByteExactAndHeaderOnDevice) {
  Open();
  auto data = Pattern(3 * kMiB + 123, 9);
  ASSERT_OK(PutByPlan("sess:42:kv:L0", data, 1, 5 * kMs));
  auto got = GetUnderLease("sess:42:kv:L0", 6 * kMs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);

  auto meta = store_->GetLocation("sess:42:kv:L0", 7 * kMs);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->device, 1);
  EXPECT_EQ(meta->state, ObjectState::kReady);
  EXPECT_EQ(meta->key_hash, KeyHash("sess:42:kv:L0"));
  EXPECT_EQ(meta->bytes_total, data.size());
  // The payload spans pages; the spans add up and start past the header arena.
  uint64_t sum = 0;
  for (const auto& span : meta->spans) sum += span.length;
  EXPECT_EQ(sum, data.size());
  EXPECT_GE(meta->n_pages, 2u);
  EXPECT_GE(meta->payload_offset, kPage);

  // The 64-byte header on the device says READY with the same layout.
  auto base = store_->StoreBase(1);
  ASSERT_TRUE(base.ok());
  ObjectHeader header;
  std::memcpy(&header, reinterpret_cast<const void*>(*base + meta->header_offset), sizeof(header));
  EXPECT_EQ(header.key_hash, meta->key_hash);
  EXPECT_EQ(header.state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(header.epoch, meta->epoch);
  EXPECT_EQ(header.payload_base, meta->payload_offset);
  EXPECT_EQ(header.bytes_total, data.size());
  EXPECT_EQ(header.n_pages, meta->n_pages);
  EXPECT_EQ(header.page_bytes, kPage);
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(*base + meta->payload_offset), data.data(),
                        data.size()), 0);
  Check();
}

TEST_F(ObjectStoreTest, SmallObjectsSharePages) {
  Open();
  ASSERT_OK(PutByPlan("a", Pattern(100, 1), 0, kMs));
  ASSERT_OK(PutByPlan("b", Pattern(300, 2), 0, kMs));
  auto a = store_->GetLocation("a", kMs), b = store_->GetLocation("b", kMs);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->spans.size(), 1u);
  ASSERT_EQ(b->spans.size(), 1u);
  EXPECT_EQ(a->spans[0].page_id, b->spans[0].page_id);
  EXPECT_EQ(b->payload_offset - a->payload_offset, kPayloadAlignment);
  EXPECT_EQ(*GetUnderLease("b", kMs), Pattern(300, 2));
  Check();
}

TEST_F(ObjectStoreTest, StateTransitionsAndIllegalOnes) {
  Open();
  auto plan = store_->OpenForWrite("k", 4096, 0, kMs);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->epoch, 0u);
  Check();
  // WRITING: not readable, not removable, not leasable; a second open is refused.
  EXPECT_EQ(store_->GetLocation("k", kMs).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(GetUnderLease("k", kMs).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->Remove("k", kMs).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->AcquireLease("k", kHolder, kMs).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->OpenForWrite("k", 10, 0, kMs).status().code(), Code::kAlreadyExists);

  // The producer writes through the plan's location, then commits.
  auto base = store_->StoreBase(0);
  auto data = Pattern(4096, 3);
  ASSERT_OK(WriteHeader(*plan, ObjectState::kWriting, kMs));
  std::memcpy(reinterpret_cast<void*>(*base + plan->payload_offset), data.data(), data.size());
  ASSERT_OK(WriteHeader(*plan, ObjectState::kReady, kMs));
  ASSERT_OK(store_->Commit("k", plan->epoch, 2 * kMs));
  Check();
  EXPECT_EQ(*GetUnderLease("k", 3 * kMs), data);

  // READY is final: no second commit, no revoke, no new write under the key.
  EXPECT_EQ(store_->Commit("k", plan->epoch, 3 * kMs).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->Revoke("k", plan->epoch, 3 * kMs).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->OpenForWrite("k", 10, 0, kMs).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(PutByPlan("k", Pattern(10, 1), 0, kMs).code(), Code::kAlreadyExists);

  ASSERT_OK(store_->Remove("k", 4 * kMs));
  Check();
  EXPECT_EQ(store_->Remove("k", 4 * kMs).code(), Code::kNotFound);
  EXPECT_EQ(GetUnderLease("k", 4 * kMs).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->Commit("k", plan->epoch, 4 * kMs).code(), Code::kNotFound);
  // kvd stored nothing: the header is as the producer left it, READY at an
  // epoch no plan names any more, until the slot's next object begins.
  EXPECT_EQ(HeaderOnDevice(*plan).state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(HeaderOnDevice(*plan).epoch, plan->epoch);

  // Revoke: WRITING -> DEAD, then the plan is dead.
  auto again = store_->OpenForWrite("k2", 100, 0, 5 * kMs);
  ASSERT_TRUE(again.ok());
  ASSERT_OK(store_->Revoke("k2", again->epoch, 5 * kMs));
  EXPECT_EQ(store_->Commit("k2", again->epoch, 5 * kMs).code(), Code::kNotFound);
  EXPECT_EQ(store_->Stats()[0].payload_used, 0u);
  Check();
}

TEST_F(ObjectStoreTest, ACommitByTheProducersKernelIsAccepted) {
  Open();
  auto plan = store_->OpenForWrite("k", 64, 0, kMs);
  ASSERT_TRUE(plan.ok());
  Check();  // not begun yet: the slot's epoch before
  ASSERT_OK(WriteHeader(*plan, ObjectState::kWriting, kMs));
  Check();
  // What kv_commit_ready does on a GPU: READY stored into the header first.
  ASSERT_OK(WriteHeader(*plan, ObjectState::kReady, kMs));
  Check();  // a device READY under a WRITING index entry is legal
  ASSERT_OK(store_->Commit("k", plan->epoch, kMs));
  Check();
}

// Issue 15: kvd does no device work while it serves (a copy from kvd's
// process costs the engines a GPU context switch). Open, commit, revoke,
// remove, leases, locate, pin, evict and reclaim make no Copy or Fill of
// the backend's; the slot's next object gets a newer epoch.
TEST_F(ObjectStoreTest, ServingMakesNoDeviceWork) {
  Open();
  const uint64_t before = backend_->device_work_calls();
  auto first = store_->OpenForWrite("k", 64, 0, kMs);
  ASSERT_TRUE(first.ok());
  ASSERT_OK(store_->Commit("k", first->epoch, kMs));
  ASSERT_TRUE(store_->GetLocation("k", kMs).ok());
  auto lease = store_->AcquireLease("k", kHolder, kMs);
  ASSERT_TRUE(lease.ok());
  ASSERT_OK(store_->ReleaseLease("k", lease->id, kMs));
  ASSERT_OK(store_->SetPin("k", ObjectPin::kSoft));
  ASSERT_OK(store_->Remove("k", kMs));
  auto next = store_->OpenForWrite("k", 64, 0, kMs);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->header_offset, first->header_offset);
  EXPECT_TRUE(EpochIsNewer(next->epoch, first->epoch)) << "a slot's epochs grow";
  ASSERT_OK(store_->Revoke("k", next->epoch, kMs));
  auto zombie = store_->OpenForWrite("z", 64, 0, kMs);
  ASSERT_TRUE(zombie.ok());
  EXPECT_EQ(store_->Reclaim(10'000 * kMs), 1u);
  ASSERT_OK(PutByPlan("e", Pattern(64, 1), 0, 10'000 * kMs));
  const uint64_t producer_copies = 3;  // PutByPlan's header, payload, READY
  auto evicted = store_->Evict(0, 1, 10'000 * kMs);
  ASSERT_TRUE(evicted.ok()) << evicted.status().ToString();
  EXPECT_GT(*evicted, 0u);
  EXPECT_EQ(backend_->device_work_calls() - before, producer_copies);
  Check();
}

TEST_F(ObjectStoreTest, EpochsGuardReuse) {
  Open();
  auto first = store_->OpenForWrite("k", 1000, 0, kMs);
  ASSERT_TRUE(first.ok());
  ASSERT_OK(store_->Revoke("k", first->epoch, kMs));
  auto second = store_->OpenForWrite("k", 1000, 0, kMs);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->epoch, first->epoch);
  EXPECT_EQ(second->header_offset, first->header_offset);  // the slot is reused...
  EXPECT_TRUE(EpochIsNewer(second->epoch, first->epoch));  // ...with a newer epoch
  // ...and the old plan cannot touch the new object.
  EXPECT_EQ(store_->Commit("k", first->epoch, kMs).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->Revoke("k", first->epoch, kMs).code(), Code::kFailedPrecondition);
  ASSERT_OK(store_->Commit("k", second->epoch, kMs));
  ASSERT_OK(store_->Remove("k", kMs));
  ASSERT_OK(PutByPlan("k", Pattern(10, 1), 0, kMs));
  EXPECT_GT(store_->GetLocation("k", kMs)->epoch, second->epoch);
  Check();
}

TEST_F(ObjectStoreTest, RefusesBadInput) {
  Open();
  EXPECT_EQ(store_->OpenForWrite("", 10, 0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->OpenForWrite(std::string(kMaxObjectKeyBytes + 1, 'x'), 10, 0, 0).status().code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(store_->OpenForWrite(std::string(kMaxObjectKeyBytes, 'x'), 10, 0, 0).ok());
  EXPECT_EQ(store_->OpenForWrite("a b", 10, 0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->OpenForWrite(std::string("a\0b", 3), 10, 0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->OpenForWrite("k", 0, 0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->OpenForWrite("k", 10, 7, 0).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->OpenForWrite("k", 11 * kMiB, 0, 0).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(store_->SetPin("nope", ObjectPin::kHard).code(), Code::kNotFound);
  Check();
}

TEST_F(ObjectStoreTest, FifoEvictsInCreationOrderDespiteReads) {
  config_.policy = EvictionPolicy::kFifo;
  Open();
  PutMany("o", 9, kMiB);  // 9 MiB: at the high watermark, not over it
  ASSERT_TRUE(GetUnderLease("o0", 20 * kMs).ok());  // a read does not matter to FIFO
  ASSERT_OK(PutByPlan("new", Pattern(kMiB, 1), 0, 21 * kMs));
  // Over 9 MiB: evicted down to 5 MiB - 1 MiB for the new one: o0..o4 went.
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(Has("o" + std::to_string(i))) << i;
  for (int i = 5; i < 9; ++i) EXPECT_TRUE(Has("o" + std::to_string(i))) << i;
  EXPECT_EQ(store_->Stats()[0].evictions, 5u);
  Check();
}

TEST_F(ObjectStoreTest, LruKeepsWhatWasRead) {
  config_.policy = EvictionPolicy::kLru;
  Open();
  PutMany("o", 9, kMiB);
  ASSERT_TRUE(GetUnderLease("o0", 20 * kMs).ok());
  ASSERT_TRUE(store_->GetLocation("o1", 21 * kMs).ok());
  ASSERT_OK(PutByPlan("new", Pattern(kMiB, 1), 0, 22 * kMs));
  EXPECT_TRUE(Has("o0"));
  EXPECT_TRUE(Has("o1"));
  for (int i = 2; i < 7; ++i) EXPECT_FALSE(Has("o" + std::to_string(i))) << i;
  for (int i = 7; i < 9; ++i) EXPECT_TRUE(Has("o" + std::to_string(i))) << i;
  Check();
}

TEST_F(ObjectStoreTest, LeasesHoldAgainstEvictionAndRemoveUntilTheyEnd) {
  config_.policy = EvictionPolicy::kFifo;
  Open();
  PutMany("o", 9, kMiB);
  auto lease = store_->AcquireLease("o0", kHolder, 10 * kMs);
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->expires_ns, 110 * kMs);
  EXPECT_EQ(store_->Remove("o0", 20 * kMs).code(), Code::kFailedPrecondition);
  ASSERT_OK(PutByPlan("new", Pattern(kMiB, 1), 0, 21 * kMs));
  EXPECT_TRUE(Has("o0"));   // leased: skipped
  EXPECT_FALSE(Has("o5"));  // the next in line went instead
  auto listed = store_->List(30 * kMs);
  for (const auto& info : listed) {
    if (info.key == "o0") {
      EXPECT_EQ(info.leases, 1u);
    }
  }
  // Released: removable again. A second lease that runs out by its TTL too.
  ASSERT_OK(store_->ReleaseLease("o0", lease->id, 30 * kMs));
  EXPECT_EQ(store_->ReleaseLease("o0", lease->id, 30 * kMs).code(), Code::kNotFound);
  auto second = store_->AcquireLease("o0", kHolder, 40 * kMs);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(store_->Remove("o0", 139 * kMs).code(), Code::kFailedPrecondition);
  ASSERT_OK(store_->Remove("o0", 140 * kMs));  // the TTL ended it
  EXPECT_EQ(store_->ReleaseLease("o0", second->id, 150 * kMs).code(), Code::kNotFound);
  Check();
}

TEST_F(ObjectStoreTest, PinsSoftLastHardNever) {
  config_.policy = EvictionPolicy::kFifo;
  Open();
  PutMany("o", 9, kMiB);
  ASSERT_OK(store_->SetPin("o0", ObjectPin::kHard));
  ASSERT_OK(store_->SetPin("o1", ObjectPin::kSoft));
  auto freed = store_->Evict(0, 7 * kMiB, 50 * kMs);  // all but o0, o1 is 7 MiB
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 7 * kMiB);
  EXPECT_TRUE(Has("o0"));
  EXPECT_TRUE(Has("o1"));
  freed = store_->Evict(0, 2 * kMiB, 50 * kMs);  // only the soft pin may go now
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, kMiB);
  EXPECT_TRUE(Has("o0"));
  EXPECT_FALSE(Has("o1"));
  // A write that needs the hard-pinned bytes is refused, not served by it.
  EXPECT_EQ(store_->OpenForWrite("big", 10 * kMiB, 0, 60 * kMs).status().code(),
            Code::kResourceExhausted);
  Check();
}

TEST_F(ObjectStoreTest, EvictDefaultsToTheLowWatermark) {
  Open();
  PutMany("o", 9, kMiB);
  auto freed = store_->Evict(-1, 0, 50 * kMs);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 4 * kMiB);  // 9 MiB -> 5 MiB (0.5 of 10)
  Check();
}

TEST_F(ObjectStoreTest, StuckWritesAreReclaimedAfterTheTimeout) {
  Open();
  auto plan = store_->OpenForWrite("zombie", 2 * kMiB, 0, 10 * kMs);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(store_->Reclaim(1009 * kMs), 0u);
  EXPECT_TRUE(Has("zombie"));
  EXPECT_EQ(store_->Reclaim(1010 * kMs), 1u);
  EXPECT_FALSE(Has("zombie"));
  EXPECT_EQ(store_->Commit("zombie", plan->epoch, 1011 * kMs).code(), Code::kNotFound);
  EXPECT_EQ(store_->Stats()[0].reclaimed_writes, 1u);
  EXPECT_EQ(store_->Stats()[0].payload_used, 0u);
  // A later open reclaims by itself too.
  ASSERT_TRUE(store_->OpenForWrite("z2", 10, 0, 2000 * kMs).ok());
  ASSERT_TRUE(store_->OpenForWrite("z3", 10, 0, 3001 * kMs).ok());
  EXPECT_FALSE(Has("z2"));
  Check();
}

TEST_F(ObjectStoreTest, HeaderSlotsRunOutThenEvict) {
  config_.max_objects = 4;
  Open();
  PutMany("o", 4, 100);
  ASSERT_OK(PutByPlan("five", Pattern(100, 5), 0, 10 * kMs));  // evicts the LRU one
  EXPECT_FALSE(Has("o0"));
  ASSERT_OK(store_->SetPin("o1", ObjectPin::kHard));
  ASSERT_OK(store_->SetPin("o2", ObjectPin::kHard));
  ASSERT_OK(store_->SetPin("o3", ObjectPin::kHard));
  ASSERT_OK(store_->SetPin("five", ObjectPin::kHard));
  EXPECT_EQ(store_->OpenForWrite("six", 10, 0, 11 * kMs).status().code(), Code::kResourceExhausted);
  Check();
}

TEST_F(ObjectStoreTest, PoolAccountingWithTenantsGranting) {
  AttachParams params;
  params.name = "engine";
  auto engine = node_->Attach(params, 0);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE(node_->Grant(*engine, 0, 4, 0).ok());  // before the store
  Open();
  auto counts = node_->Counts();
  EXPECT_EQ(counts[0].held_pages, 4u + 6u);
  EXPECT_EQ(counts[1].held_pages, 6u);
  EXPECT_EQ(node_->UsedBytes(*node_->FindTenant(store_->tenant())), 12 * kPage);
  // Tenants keep granting around the store; the store keeps working.
  ASSERT_TRUE(node_->Grant(*engine, 0, 6, 0).ok());
  PutMany("o", 3, kMiB);
  EXPECT_EQ(node_->Grant(*engine, 0, 1, 0).status().code(), Code::kResourceExhausted);  // 16 used
  ASSERT_TRUE(node_->Grant(*engine, 1, 10, 0).ok());
  Check();
  ASSERT_OK(node_->Detach(*engine));
  Check();
  store_.reset();  // the store's pages go back to the pool
  for (const auto& c : node_->Counts()) EXPECT_EQ(c.held_pages, 0u);
  ASSERT_OK(node_->CheckInvariants());
  // A tenant of another group may have them now (recycled, invariant 2).
  auto other = node_->Attach({.name = "later", .group = "g2"}, 0);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(node_->Grant(*other, 0, 16, 0).ok());
  ASSERT_OK(node_->CheckInvariants());
}

TEST_F(ObjectStoreTest, RefusesAShareTheDeviceCannotGive) {
  config_.size = SizeOrShare{kPage, 0};  // no room for payload after the header page
  EXPECT_EQ(ObjectIndex::Create(*backend_, *node_, config_).status().code(), Code::kInvalidArgument);
  config_.size = SizeOrShare{0, 0.5};
  auto store = ObjectIndex::Create(*backend_, *node_, config_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Stats()[0].pages, 8u);
}

TEST_F(ObjectStoreTest, ConcurrentProducersAndReaders) {
  config_.size = SizeOrShare{12 * kPage, 0};
  config_.high_watermark = 1.0;
  config_.low_watermark = 1.0;
  Open();
  constexpr int kThreads = 4, kPerThread = 200;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> clock{1};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string key = "t" + std::to_string(t) + ":" + std::to_string(i);
        size_t bytes = 1 + (i * 977 + t * 131) % 20000;
        auto data = Pattern(bytes, uint8_t(i + t));
        if (!PutByPlan(key, data, t % 2, clock++).ok()) { ++failures; continue; }
        // Read back our own and a neighbour's (which may not exist yet).
        auto got = GetUnderLease(key, clock++);
        if (!got.ok() || *got != data) ++failures;
        std::string other = "t" + std::to_string((t + 1) % kThreads) + ":" + std::to_string(i);
        auto peer = GetUnderLease(other, clock++);
        if (peer.ok() && peer->size() != 1u + static_cast<size_t>((i * 977 + ((t + 1) % kThreads) * 131) % 20000)) {
          ++failures;
        }
        // A neighbour's lease while it copies this object holds it (invariant 3):
        // remove answers kFailedPrecondition and succeeds once the copy is done.
        if (i % 3 == 0) {
          Status removed = store_->Remove(key, clock++);
          for (int tries = 0; removed.code() == Code::kFailedPrecondition && tries < 100000; ++tries) {
            std::this_thread::yield();
            removed = store_->Remove(key, clock++);
          }
          if (!removed.ok()) ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  Check();
}

}  // namespace
}  // namespace nanokv::kvd
