// v2 slabs through a real kvd (issue 34): a producer granted a slab puts
// objects with no request to kvd, another client gets them by key
// byte-exact; a producer that dies mid-write leaves only what it announced;
// a slab past slab_ttl ends; announced objects survive a kvd kill -9 as
// committed ones do; the grant's refusals name their limit. kvd checks its
// invariants (the slabs' space included) after every turn. Host in CI.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "nanokv/object_store.h"
#include "tests/integration/metrics_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/integration/slab_producer.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdSlabsTest : public MetricsFixture {
 protected:
  void StartWithStore(const std::string& extra_yaml = "") {
    std::vector<std::string> extra = {"--config", WriteConfig(kTestStoreYaml + extra_yaml), "--check-invariants"};
    if (Backend() == "host") extra.insert(extra.end(), {"--host-devices", "2"});
    StartKvdWithMetrics(32, extra);
  }

  // A get by key until kvd has read the ring (a poll of its loop).
  Result<std::vector<std::byte>> GetSoon(ObjectStore& store, const std::string& key) {
    const auto until = std::chrono::steady_clock::now() + 5s;
    for (;;) {
      auto got = store.Get(key);
      if (got.ok() || got.status().code() != Code::kNotFound || std::chrono::steady_clock::now() > until) return got;
      std::this_thread::sleep_for(1ms);
    }
  }

  std::unique_ptr<gpu::Backend> OpenTestBackend() {
    auto backend = gpu::OpenBackend(Backend());
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    return backend.ok() ? std::move(*backend) : nullptr;
  }
};

TEST_F(KvdSlabsTest, PutsAskKvdNothingAndAnotherClientGetsThemByteExact) {
  StartWithStore();
  auto producer = OpenStore();
  auto reader = OpenStore();
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(reader, nullptr);
  auto backend = OpenTestBackend();
  ASSERT_NE(backend, nullptr);
  auto slab = producer->AcquireSlab(0, 3 * kPage, 64, 16);
  ASSERT_OK(slab.status());
  // The grant's own count lands once its reply is out (kvd times a request
  // up to then): let it settle first.
  std::this_thread::sleep_for(50ms);
  const double before = RequestsServed();
  ASSERT_GT(before, 0);
  constexpr int kPuts = 40;
  for (int i = 0; i < kPuts; ++i) {
    ASSERT_OK(SlabPut(**slab, *backend, "slab:" + std::to_string(i), ObjectPattern(1000 + 997 * i, uint8_t(i))));
    // The ring holds 16: the producer waits for kvd's loop to read it.
    while ((*slab)->cursor()->announce_next - __atomic_load_n(&(*slab)->ring().header->consumed, __ATOMIC_ACQUIRE) >=
           12) {
      std::this_thread::sleep_for(1ms);
    }
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(RequestsServed(), before) << "a put in a slab asked kvd something";
  for (int i = 0; i < kPuts; ++i) {
    auto got = GetSoon(*reader, "slab:" + std::to_string(i));
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, ObjectPattern(1000 + 997 * i, uint8_t(i))) << i;
  }
  auto plan = reader->GetLocation("slab:3");
  ASSERT_OK(plan.status());
  EXPECT_EQ(plan->epoch, (*slab)->epoch(3));
  EXPECT_EQ(WaitMetric("nanokv_object_store_slab_objects_total", kPuts), kPuts);
  EXPECT_EQ(WaitMetric("nanokv_object_store_slabs_granted_total", 1), 1);
  ASSERT_OK((*slab)->Release());
  // What was announced stands; the rest of the slab went back.
  auto info = reader->Info();
  ASSERT_OK(info.status());
  EXPECT_EQ(info->devices[0].objects, static_cast<uint32_t>(kPuts));
  EXPECT_LT(info->devices[0].used_bytes, 2 * kPage);
  EXPECT_EQ(WaitMetric("nanokv_object_store_slabs", 0), 0);
  EXPECT_TRUE(kvd_.Running());
}

// Two producers' threads put in their own slabs at once while a third
// slab's ring carries a forged record: only that slab ends.
TEST_F(KvdSlabsTest, RacingProducersAndAForgedAnnounceThatPoisonsOnlyItsSlab) {
  StartWithStore();
  auto backend = OpenTestBackend();
  ASSERT_NE(backend, nullptr);
  auto a = OpenStore(), b = OpenStore(), liar = OpenStore(), reader = OpenStore();
  ASSERT_TRUE(a && b && liar && reader);
  auto slab_a = a->AcquireSlab(0, kPage, 64, 64), slab_b = b->AcquireSlab(1, kPage, 64, 64);
  auto forged = liar->AcquireSlab(0, kPage, 8, 8);
  ASSERT_OK(slab_a.status());
  ASSERT_OK(slab_b.status());
  ASSERT_OK(forged.status());
  // A record past its slab's payload, stamped as a real one.
  device::SlabAllocation at{};
  ASSERT_EQ(device::AllocateInSlab((*forged)->cursor(), (*forged)->ring(), 256, &at), device::SlabCode::kOk);
  at.payload_offset = 64 * kPage;
  ASSERT_EQ(device::Announce((*forged)->ring(), *(*forged)->cursor(), at, 256, ObjectSlab::KeyHash("forged"),
                             (*forged)->epoch(at.header_slot), "forged", 6),
            device::SlabCode::kOk);
  auto run = [&](ObjectSlab& slab, const std::string& prefix) {
    for (int i = 0; i < 40; ++i) {
      Status put = SlabPut(slab, *backend, prefix + std::to_string(i), ObjectPattern(2000 + i, uint8_t(i)));
      for (int tries = 0; !put.ok() && tries < 5000; ++tries) {  // the ring is full until kvd's loop reads it
        std::this_thread::sleep_for(1ms);
        put = SlabPut(slab, *backend, prefix + std::to_string(i), ObjectPattern(2000 + i, uint8_t(i)));
      }
    }
  };
  std::thread ta([&] { run(**slab_a, "a:"); }), tb([&] { run(**slab_b, "b:"); });
  ta.join();
  tb.join();
  for (int i = 0; i < 40; ++i) {
    for (const char* prefix : {"a:", "b:"}) {
      auto got = GetSoon(*reader, prefix + std::to_string(i));
      ASSERT_OK(got.status());
      EXPECT_EQ(*got, ObjectPattern(2000 + i, uint8_t(i)));
    }
  }
  EXPECT_EQ(WaitMetric("nanokv_object_store_slabs_poisoned_total", 1), 1);
  EXPECT_EQ(WaitMetric("nanokv_object_store_slabs", 2), 2);
  EXPECT_EQ(reader->Get("forged").status().code(), Code::kNotFound);
  EXPECT_EQ((*forged)->Release().code(), Code::kNotFound);  // kvd ended it
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdSlabsTest, AProducerThatDiesLeavesOnlyWhatItAnnounced) {
  StartWithStore();
  Process peer =
      Process::Start({Binary("NANOKV_OBJECT_PEER", NANOKV_OBJECT_PEER), "slab-abandon", ipc_, "told", "5000", "4"},
                     {{"NANOKV_RUN_DIR", dir_.path()}, {"NANOKV_TEST_BACKEND", Backend()}}, dir_.path() + "/peer.log");
  auto code = peer.Wait(30s);
  ASSERT_TRUE(code.has_value() && *code == 0) << peer.Log();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto got = GetSoon(*store, "told");
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, ObjectPattern(5000, 4));
  EXPECT_EQ(store->Get("told:untold").status().code(), Code::kNotFound);
  // The slab ended with its connection: its unannounced space is back.
  ASSERT_EQ(WaitMetric("nanokv_object_store_slabs", 0), 0);
  auto info = store->Info();
  ASSERT_OK(info.status());
  EXPECT_EQ(info->devices[0].objects, 1u);
  EXPECT_EQ(info->devices[0].used_bytes, 5120u);
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdSlabsTest, ASlabPastItsTtlEndsAndRefusalsNameTheirLimit) {
  StartWithStore("  slab_ttl: 200ms\n");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // 16 MiB a device: 7 payload pages under a 0.95 high watermark.
  auto big = store->AcquireSlab(0, 7 * kPage, 8, 8);
  ASSERT_EQ(big.status().code(), Code::kResourceExhausted);
  EXPECT_NE(big.status().message().find("object_store.high_watermark"), std::string::npos) << big.status().ToString();
  auto slab = store->AcquireSlab(0, kPage, 8, 8);
  ASSERT_OK(slab.status());
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ((*slab)->Release().code(), Code::kNotFound);  // expired already
  EXPECT_EQ(WaitMetric("nanokv_object_store_slabs_expired_total", 1), 1);
  auto info = store->Info();
  ASSERT_OK(info.status());
  EXPECT_EQ(info->devices[0].used_bytes, 0u);
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdSlabsTest, AnnouncedObjectsSurviveAKvdRestart) {
  StartWithStore();
  auto backend = OpenTestBackend();
  ASSERT_NE(backend, nullptr);
  {
    auto producer = OpenStore();
    ASSERT_NE(producer, nullptr);
    auto slab = producer->AcquireSlab(0, kPage, 8, 8);
    ASSERT_OK(slab.status());
    ASSERT_OK(SlabPut(**slab, *backend, "kept:a", ObjectPattern(3000, 1)));
    ASSERT_OK(SlabPut(**slab, *backend, "kept:b", ObjectPattern(70000, 2)));
    ASSERT_OK(GetSoon(*producer, "kept:a").status());
    ASSERT_OK(GetSoon(*producer, "kept:b").status());
    kvd_.Signal(SIGKILL);
    ASSERT_TRUE(kvd_.Wait(10s).has_value());
  }  // the slab's release finds no kvd: logged
  StartWithStore();
  auto reader = OpenStore();
  ASSERT_NE(reader, nullptr);
  auto a = reader->Get("kept:a");
  ASSERT_OK(a.status());
  EXPECT_EQ(*a, ObjectPattern(3000, 1));
  auto b = reader->Get("kept:b");
  ASSERT_OK(b.status());
  EXPECT_EQ(*b, ObjectPattern(70000, 2));
  EXPECT_TRUE(kvd_.Running());
}

}  // namespace
}  // namespace nanokv::testing
