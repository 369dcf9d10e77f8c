// ObjectStore's device puts through v2 slabs (ObjectStore::UseSlabs, issue
// 34) against a real kvd: puts ask kvd nothing (counted on /metrics) and
// another client reads them byte-exact once FlushSlabPuts returns; a spent
// slab is traded and the old one released; a batch; what takes
// the plan path; a key already stored keeps its object; a dead kvd is an
// error, not a write into space it may have given on. kvd checks its
// invariants (the slabs' space included) after every turn. Host in CI, cuda
// on the GPU (scripts/gpu-check.sh: objects_cuda).
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/object_store.h"
#include "tests/integration/metrics_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdSlabPutsTest : public MetricsFixture {
 protected:
  void SetUp() override {
    MetricsFixture::SetUp();
    StartKvdWithMetrics(32, {"--config", WriteConfig(kTestStoreYaml), "--check-invariants"});
    auto backend = gpu::OpenBackend(Backend());
    ASSERT_OK(backend.status());
    backend_ = std::move(*backend);
  }

  // `bytes` on device 0 holding `pattern`.
  std::unique_ptr<gpu::DeviceBuffer> OnDevice(const std::vector<std::byte>& pattern) {
    auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, pattern.size());
    EXPECT_OK(buffer.status());
    if (!buffer.ok()) return nullptr;
    EXPECT_OK(backend_->Copy((*buffer)->get(), pattern.data(), pattern.size(), gpu::CopyKind::kHostToDevice));
    return std::move(*buffer);
  }

  // Every request kind but the scrape's own: settled first (kvd counts a
  // request once its reply is out).
  double Settled() {
    std::this_thread::sleep_for(50ms);
    return RequestsServed();
  }

  std::unique_ptr<gpu::Backend> backend_;
};

std::vector<std::byte> Item(int i) { return ObjectPattern(4096 + 1999 * static_cast<size_t>(i), uint8_t(i + 1)); }

TEST_F(KvdSlabPutsTest, PutsAskKvdNothingAndAnotherClientReadsThemAfterTheFlush) {
  auto producer = OpenStore();
  auto reader = OpenStore();
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(reader, nullptr);
  // Room for every put in the first half of the slab: no next one is asked for.
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = 2 * kPage, .header_slots = 128, .ring_records = 16}));
  const double before = Settled();
  const uint64_t sent = producer->requests_sent();
  constexpr int kPuts = 40;  // through a ring of 16: the puts wait for kvd's reads
  std::vector<std::unique_ptr<gpu::DeviceBuffer>> sources;
  for (int i = 0; i < kPuts; ++i) {
    sources.push_back(OnDevice(Item(i)));
    ASSERT_NE(sources.back(), nullptr);
    ASSERT_OK(producer->PutFromDevice("slabput:" + std::to_string(i), sources.back()->get(), Item(i).size(), 0));
  }
  EXPECT_EQ(Settled(), before) << "a put through a slab asked kvd something";
  EXPECT_EQ(producer->requests_sent(), sent);
  EXPECT_EQ(producer->slab_grants(), 1u);
  ASSERT_OK(producer->FlushSlabPuts());
  for (int i = 0; i < kPuts; ++i) {
    auto got = reader->Get("slabput:" + std::to_string(i));
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, Item(i)) << i;
  }
  // The header the put wrote says READY at the object's epoch.
  auto plan = reader->GetLocation("slabput:7");
  ASSERT_OK(plan.status());
  auto header = DeviceHeader(*reader, *plan);
  ASSERT_OK(header.status());
  EXPECT_EQ(header->state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(header->epoch, plan->epoch);
  EXPECT_EQ(header->bytes_total, Item(7).size());
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdSlabPutsTest, ASpentSlabIsTradedAndTheOldOneReleased) {
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  // Eight slabs of 512 KiB: the store holds them all, so nothing is evicted.
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = 512 << 10, .header_slots = 4, .ring_records = 8}));
  const auto bytes = ObjectPattern(100'000, 3);
  auto source = OnDevice(bytes);
  ASSERT_NE(source, nullptr);
  constexpr int kPuts = 30;  // 4 a slab: spent by its slots
  for (int i = 0; i < kPuts; ++i) {
    ASSERT_OK(producer->PutFromDevice("traded:" + std::to_string(i), source->get(), bytes.size(), 0));
  }
  // Seven trades; the eighth slab may have asked for a ninth ahead.
  EXPECT_GE(producer->slab_grants(), 8u);
  EXPECT_LE(producer->slab_grants(), 9u);
  ASSERT_OK(producer->FlushSlabPuts());
  for (int i = 0; i < kPuts; ++i) {
    auto got = producer->Get("traded:" + std::to_string(i));
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, bytes) << i;
  }
  // Seven slabs went back but for their objects; one is held.
  ASSERT_TRUE(WaitFor([&] { return RequestsServed("object_slab_release") == 7; }, 5s));
}

TEST_F(KvdSlabPutsTest, ABatchAndWhatTakesThePlanPath) {
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  // A batch four rings long: it goes half a ring at a time.
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = 2 * kPage, .header_slots = 256, .ring_records = 16}));
  constexpr int kItems = 64;
  std::vector<std::unique_ptr<gpu::DeviceBuffer>> sources;
  std::vector<std::string> keys;
  std::vector<ObjectStore::DevicePut> puts;
  for (int i = 0; i < kItems; ++i) {
    sources.push_back(OnDevice(ObjectPattern(1000 + 313 * static_cast<size_t>(i), uint8_t(i))));
    keys.push_back("batch:" + std::to_string(i));
  }
  for (int i = 0; i < kItems; ++i) puts.push_back({keys[i], sources[i]->get(), 1000 + 313 * static_cast<uint64_t>(i)});
  // Over the slab's payload: the plan path, readable at once.
  const auto big = ObjectPattern(3 * kPage, 9);
  auto big_source = OnDevice(big);
  ASSERT_NE(big_source, nullptr);
  puts.push_back({"batch:big", big_source->get(), big.size()});
  const double opens = Settled() < 0 ? -1 : RequestsServed("object_open");
  const std::vector<Status> done = producer->BatchPutFromDevice(puts, 0);
  ASSERT_EQ(done.size(), puts.size());
  for (const Status& s : done) EXPECT_OK(s);
  EXPECT_EQ(RequestsServed("object_open") - opens, 1) << "only the big object asked for a plan";
  ASSERT_OK(producer->Get("batch:big").status());
  ASSERT_OK(producer->FlushSlabPuts());
  for (int i = 0; i < kItems; ++i) {
    auto got = producer->Get(keys[i]);
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, ObjectPattern(1000 + 313 * static_cast<size_t>(i), uint8_t(i))) << i;
  }
  // A key not the store's takes the plan path, which refuses it by name.
  const Status bad = producer->PutFromDevice("no spaces", sources[0]->get(), 1000, 0);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.ToString().find("printable ASCII"), std::string::npos) << bad.ToString();
}

// A batch larger than a slab's usual shape: the spent slab is traded once,
// for one that holds the rest of the batch (not once per slab's worth).
TEST_F(KvdSlabPutsTest, ABatchLargerThanASlabTradesOnceForOneThatHoldsItsRest) {
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = 256 << 10, .header_slots = 64, .ring_records = 64}));
  constexpr int kItems = 16;  // 1.6 MB: six slabs of the usual shape
  const auto bytes = ObjectPattern(100'000, 5);
  auto source = OnDevice(bytes);
  ASSERT_NE(source, nullptr);
  std::vector<ObjectStore::DevicePut> puts;
  std::vector<std::string> keys;
  for (int i = 0; i < kItems; ++i) keys.push_back("rest:" + std::to_string(i));
  for (const std::string& key : keys) puts.push_back({key, source->get(), bytes.size()});
  for (const Status& s : producer->BatchPutFromDevice(puts, 0)) EXPECT_OK(s);
  // UseSlabs', the batch's one trade, and perhaps one of the usual shape
  // the worker asked for ahead once the first was half spent.
  EXPECT_GE(producer->slab_grants(), 2u);
  EXPECT_LE(producer->slab_grants(), 3u);
  ASSERT_OK(producer->FlushSlabPuts());
  for (const std::string& key : keys) {
    auto got = producer->Get(key);
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, bytes) << key;
  }
  EXPECT_TRUE(kvd_.Running());
}

// Past half of slab_ttl a slab is traded before kvd could end it under a
// put still writing: puts over three ttls all land, in several slabs.
TEST_F(KvdSlabPutsTest, ASlabIsTradedBeforeSlabTtlEndsIt) {
  StopKvd();
  StartKvdWithMetrics(
      32, {"--config", WriteConfig(kTestStoreYaml + std::string("  slab_ttl: 300ms\n")), "--check-invariants"});
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  // Small slabs: each trade's leftovers are room for the next grant.
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = 256 << 10, .header_slots = 256, .ring_records = 16}));
  const auto bytes = ObjectPattern(3000, 6);
  auto source = OnDevice(bytes);
  ASSERT_NE(source, nullptr);
  int puts = 0;
  for (auto until = std::chrono::steady_clock::now() + 900ms; std::chrono::steady_clock::now() < until; ++puts) {
    ASSERT_OK(producer->PutFromDevice("aged:" + std::to_string(puts), source->get(), bytes.size(), 0));
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(producer->slab_grants(), 3u);
  ASSERT_OK(producer->FlushSlabPuts());
  for (int i = 0; i < puts; ++i) {
    auto got = producer->Get("aged:" + std::to_string(i));
    ASSERT_OK(got.status());
    EXPECT_EQ(*got, bytes) << i;
  }
  EXPECT_EQ(kvd_.Log().find("past object_store.slab_ttl"), std::string::npos) << "kvd ended a slab in use";
}

TEST_F(KvdSlabPutsTest, AKeyAlreadyStoredKeepsItsObject) {
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  const auto first = ObjectPattern(5000, 1), second = ObjectPattern(5000, 2);
  ASSERT_OK(producer->Put("kept", first));
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = kPage, .header_slots = 8, .ring_records = 8}));
  auto source = OnDevice(second);
  ASSERT_NE(source, nullptr);
  ASSERT_OK(producer->PutFromDevice("kept", source->get(), second.size(), 0));
  ASSERT_OK(producer->PutFromDevice("fresh", source->get(), second.size(), 0));
  // The producer hears of the drop at its flush, once, and not of the fresh key.
  const Status flushed = producer->FlushSlabPuts();
  EXPECT_EQ(flushed.code(), Code::kAlreadyExists) << flushed.ToString();
  EXPECT_NE(flushed.message().find("1 named keys stored already"), std::string::npos) << flushed.ToString();
  ASSERT_OK(producer->FlushSlabPuts());
  ASSERT_OK(producer->Get("fresh").status());
  auto got = producer->Get("kept");
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, first) << "objects are immutable: the announced copy is dropped";
  EXPECT_TRUE(WaitFor([&] { return kvd_.Log().find("is taken already") != std::string::npos; }, 5s)) << kvd_.Log();
}

TEST_F(KvdSlabPutsTest, AStoreWhoseKvdDiedRefusesSlabPuts) {
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = kPage, .header_slots = 8, .ring_records = 8}));
  const auto bytes = ObjectPattern(5000, 4);
  auto source = OnDevice(bytes);
  ASSERT_NE(source, nullptr);
  ASSERT_OK(producer->PutFromDevice("before", source->get(), bytes.size(), 0));
  kvd_.Signal(SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return !kvd_.Running(); }, 10s));
  const Status after = producer->PutFromDevice("after", source->get(), bytes.size(), 0);
  EXPECT_EQ(after.code(), Code::kUnavailable) << after.ToString();
}

}  // namespace
}  // namespace nanokv::testing

namespace nanokv::testing {
namespace {

// kvd lists the slabs it granted (ObjectStore::Info, kvctl objects): whose,
// how big, how much never announced, how many objects announced; a released
// slab is gone from the list.
TEST_F(KvdSlabPutsTest, InfoAndKvctlListTheSlabs) {
  auto producer = OpenStore();
  ASSERT_NE(producer, nullptr);
  ASSERT_OK(producer->UseSlabs(0, {.payload_bytes = 2 * kPage, .header_slots = 128, .ring_records = 16}));
  std::vector<std::unique_ptr<gpu::DeviceBuffer>> sources;
  for (int i = 0; i < 5; ++i) {
    sources.push_back(OnDevice(Item(i)));
    ASSERT_NE(sources.back(), nullptr);
    ASSERT_OK(producer->PutFromDevice("listed:" + std::to_string(i), sources.back()->get(), Item(i).size(), 0));
  }
  ASSERT_OK(producer->FlushSlabPuts());
  auto info = producer->Info();
  ASSERT_OK(info.status());
  ASSERT_FALSE(info->devices.empty());
  const ObjectStoreDeviceInfo& d = info->devices[0];
  ASSERT_EQ(d.slab_count, 1u);
  ASSERT_EQ(d.slabs.size(), 1u);
  const ObjectStoreDeviceInfo::Slab& slab = d.slabs[0];
  EXPECT_EQ(slab.uid, geteuid() == 0 ? 0u : geteuid());
  EXPECT_EQ(slab.payload_bytes, 2 * kPage);
  EXPECT_EQ(slab.header_slots, 128u);
  EXPECT_EQ(slab.slots_taken, 5u);
  uint64_t put = 0;
  for (int i = 0; i < 5; ++i) put += Item(i).size();
  EXPECT_LE(slab.unannounced_bytes, slab.payload_bytes - put);
  EXPECT_GT(slab.ttl_ms, 0u);

  int runs = 0;
  auto kvctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), Binary("NANOKV_KVCTL_BINARY", NANOKV_KVCTL_BINARY));
    // A log each: Process appends to its log file.
    Process p = Process::Start(args, {{"NANOKV_RUN_DIR", dir_.path()}},
                               dir_.path() + "/kvctl-" + std::to_string(++runs) + ".log");
    auto code = p.Wait(std::chrono::seconds(30));
    EXPECT_TRUE(code.has_value() && *code == 0) << p.Log();
    return p.Log();
  };
  const std::string table = kvctl({"objects", ipc_});
  EXPECT_NE(table.find("UNANNOUNCED"), std::string::npos) << table;
  EXPECT_NE(table.find("5 / 128"), std::string::npos) << table;
  EXPECT_NE(table.find("slabs: 1"), std::string::npos) << table;
  const std::string json = kvctl({"objects", ipc_, "--json"});
  EXPECT_NE(json.find("\"slab_count\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"slots_taken\":5"), std::string::npos) << json;

  producer.reset();  // its slab goes back with its connection
  auto reader = OpenStore();
  ASSERT_NE(reader, nullptr);
  EXPECT_TRUE(WaitFor(
      [&] {
        auto after = reader->Info();
        return after.ok() && after->devices[0].slab_count == 0;
      },
      10s));
  EXPECT_EQ(kvctl({"objects", ipc_}).find("UNANNOUNCED"), std::string::npos);
}

}  // namespace
}  // namespace nanokv::testing
