// Issue 15 item 1: kvd does no device work while it serves object requests.
// A copy or fill from kvd's process makes the GPU switch between kvd's
// context and the engines' (~150 us each way on an H100), so the producer
// writes headers and READY, and kvd decides DEAD and reuse in its index.
// kvd counts its backend's copies and fills (nanokv_device_work_calls_total
// on /metrics); every request below must leave that count where it was,
// on the host backend in CI and on cuda on the GPU.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "nanokv/object_store.h"
#include "gpu/device_buffer.h"
#include "tests/integration/metrics_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdDeviceWorkTest : public MetricsFixture {
 protected:
  double DeviceWork() {
    // kvd copies the figure at each publish (at least once a second): wait
    // for one that surely came after the requests before.
    const uint64_t seen = Read().segment.header.publish_count;
    EXPECT_TRUE(WaitFor([&] { return Read().segment.header.publish_count >= seen + 2; }, 10s));
    auto body = Scrape();
    EXPECT_TRUE(body.ok()) << body.status().ToString();
    if (!body.ok()) return -1;
    auto samples = ParseExposition(*body);
    EXPECT_TRUE(samples.ok()) << samples.status().ToString();
    if (!samples.ok()) return -1;
    auto value = FindSample(*samples, "nanokv_device_work_calls_total");
    EXPECT_TRUE(value.has_value()) << *body;
    return value.value_or(-1);
  }

  void StartWithStore() {
    StartKvdWithMetrics(32, {"--config", WriteConfig(kTestStoreYaml)});
  }
};

TEST_F(KvdDeviceWorkTest, ObjectRequestsMakeNoDeviceWorkInKvd) {
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const double at_start = DeviceWork();
  ASSERT_GE(at_start, 1) << "the header arena's zeroing at start counts: the counter counts";

  // Host bytes: open, the producer's copies, commit; lease, locate, release.
  const auto pattern = ObjectPattern(3 * (2u << 20) + 777, 5);
  ASSERT_OK(store->Put("host", pattern));
  auto got = store->Get("host");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, pattern);
  // Device bytes (kernels on cuda: kv_begin_write, kv_store_pages,
  // kv_commit_ready in this process; the backend's copies on host).
  auto backend = gpu::OpenBackend(Backend());
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto buffer = gpu::DeviceBuffer::Create(**backend, 0, pattern.size());
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  ASSERT_OK((*backend)->Copy((*buffer)->get(), pattern.data(), pattern.size(), gpu::CopyKind::kHostToDevice));
  ASSERT_OK(store->PutFromDevice("device", (*buffer)->get(), pattern.size(), 0));
  auto n = store->GetToDevice("device", (*buffer)->get(), (*buffer)->size());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  // The header the producer wrote says READY at the plan's epoch.
  auto plan = store->GetLocation("device");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto header = DeviceHeader(*store, *plan);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(header->epoch, plan->epoch);
  EXPECT_EQ(header->bytes_total, pattern.size());
  // Pin, remove, revoke, evict, and a write reclaimed past write_timeout.
  ASSERT_OK(store->Pin("host", ObjectPin::kSoft));
  ASSERT_OK(store->Remove("host"));
  auto revoked = store->OpenForWrite("revoked", 4096);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  ASSERT_OK(store->Revoke("revoked", revoked->epoch));
  auto evicted = store->Evict(0, 1);
  ASSERT_TRUE(evicted.ok()) << evicted.status().ToString();
  auto zombie = store->OpenForWrite("zombie", 4096);
  ASSERT_TRUE(zombie.ok()) << zombie.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return store->GetLocation("zombie").status().code() == Code::kNotFound; }, 10s))
      << "the zombie write was not reclaimed";
  // The same slot again: its next object's header write replaces the old.
  ASSERT_OK(store->Put("again", ObjectPattern(100, 6)));
  EXPECT_EQ(*store->Get("again"), ObjectPattern(100, 6));

  EXPECT_EQ(DeviceWork(), at_start) << "kvd made device work while it served";
  EXPECT_TRUE(kvd_.Running());
}

// Issue 15 item 4: a get is one request (a lease whose reply says where the
// object is) plus the copy; with defer_lease_release the lease goes back
// with the next get's request, so a loop of gets is one request a get.
TEST_F(KvdDeviceWorkTest, AGetIsOneRequest) {
  StartWithStore();
  auto writer = OpenStore();
  ASSERT_NE(writer, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_OK(writer->Put("k" + std::to_string(i), ObjectPattern(5000 + i, i)));
  const double leases = RequestsServed("object_lease"), locates = RequestsServed("object_locate");

  // Plain: the lease with its location, then its release.
  auto got = writer->Get("k0");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, ObjectPattern(5000, 0));
  EXPECT_EQ(RequestsServed("object_lease") - leases, 2);
  EXPECT_EQ(RequestsServed("object_locate") - locates, 0) << "the lease's reply says where";

  // Deferred: one request a get; the last lease is kept until the next request.
  ObjectStoreOptions options;
  options.ipc_name = ipc_;
  options.backend = Backend();
  options.defer_lease_release = true;
  auto reader = ObjectStore::Open(options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      auto bytes = (*reader)->Get("k" + std::to_string(i));
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      EXPECT_EQ(*bytes, ObjectPattern(5000 + i, i));
    }
  }
  EXPECT_EQ(RequestsServed("object_lease") - leases, 2 + 12);
  // The kept lease holds k3 against another's remove until the reader's
  // next request gives it back.
  EXPECT_EQ(writer->Remove("k3").code(), Code::kFailedPrecondition);
  ASSERT_TRUE((*reader)->Info().ok());
  ASSERT_OK(writer->Remove("k3"));
  EXPECT_EQ(RequestsServed("object_lease") - leases, 2 + 12 + 1);
  // A failed get (no such key) keeps nothing, and a lease never outlives
  // the reader's errors.
  EXPECT_EQ((*reader)->Get("k3").status().code(), Code::kNotFound);
  ASSERT_OK(writer->Remove("k2"));

  // Gets from several threads on one deferring store: one lease is kept at
  // a time, the others released, so after one more request none is held.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if (!(*reader)->Get("k" + std::to_string((t + i) % 2)).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE((*reader)->Info().ok());
  ASSERT_OK(writer->Remove("k0"));
  ASSERT_OK(writer->Remove("k1"));
}

// A batch get of 130 objects is one request and no release: kvd's read
// table vouches for the copies, no lease is taken. The same get again asks kvd nothing (the read cache).
// 130 views from two stores end in one release request per store with
// ObjectView::ReleaseAll, where each view's going is a request.
TEST_F(KvdDeviceWorkTest, ABatchGetAndItsViewsEndTheirLeasesInOneReleasePerStore) {
  StartWithStore();
  auto store = OpenStore();
  auto other = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_NE(other, nullptr);
  constexpr size_t kObjects = 130;
  constexpr size_t kBytes = 1000;
  std::vector<std::string> keys;
  for (size_t i = 0; i < kObjects; ++i) {
    keys.push_back("many:" + std::to_string(i));
    ASSERT_OK(store->Put(keys.back(), ObjectPattern(kBytes, static_cast<uint8_t>(i)), 0));  // the buffer's device
  }
  auto backend = gpu::OpenBackend(Backend());
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto buffer = gpu::DeviceBuffer::Create(**backend, 0, kObjects * kBytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  auto* base = static_cast<std::byte*>((*buffer)->get());
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t i = 0; i < kObjects; ++i) items.push_back({keys[i], base + i * kBytes, kBytes});
  const double leases = RequestsServed("object_lease_batch"), releases = RequestsServed("object_release_batch");
  for (const auto& got : store->BatchGetToDevice(items)) ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<std::byte> back(kObjects * kBytes);
  ASSERT_OK((*backend)->Copy(back.data(), base, back.size(), gpu::CopyKind::kDeviceToHost));
  for (size_t i : {size_t{0}, size_t{64}, kObjects - 1}) {
    EXPECT_EQ(std::vector<std::byte>(back.begin() + i * kBytes, back.begin() + (i + 1) * kBytes),
              ObjectPattern(kBytes, static_cast<uint8_t>(i)));
  }
  EXPECT_EQ(RequestsServed("object_lease_batch") - leases, 1);
  EXPECT_EQ(RequestsServed("object_release_batch") - releases, 0);
  const uint64_t sent = store->requests_sent();
  ASSERT_OK((*backend)->Fill(base, 0, kObjects * kBytes));
  for (const auto& got : store->BatchGetToDevice(items)) ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(store->requests_sent(), sent) << "every location was kept";
  ASSERT_OK((*backend)->Copy(back.data(), base, back.size(), gpu::CopyKind::kDeviceToHost));
  for (size_t i = 0; i < kObjects; ++i) {
    ASSERT_EQ(std::vector<std::byte>(back.begin() + i * kBytes, back.begin() + (i + 1) * kBytes),
              ObjectPattern(kBytes, static_cast<uint8_t>(i)));
  }

  std::vector<ObjectView> views;
  for (size_t i = 0; i < kObjects; ++i) {
    auto view = (i % 2 == 0 ? store : other)->View(keys[i]);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    views.push_back(std::move(*view));
  }
  views.emplace_back();  // an empty one is skipped
  EXPECT_EQ(store->Remove(keys[0]).code(), Code::kFailedPrecondition) << "viewed";
  const double before = RequestsServed("object_release_batch");
  ObjectView::ReleaseAll(views);
  // kvd counts a request once its reply is out: the second reply may be read before it is counted.
  EXPECT_TRUE(WaitFor([&] { return RequestsServed("object_release_batch") - before >= 2; }, 5s));
  EXPECT_EQ(RequestsServed("object_release_batch") - before, 2) << "one per store";
  for (const ObjectView& view : views) EXPECT_EQ(view.data(), nullptr);
  for (const std::string& key : keys) EXPECT_OK(store->Remove(key));
  views.clear();  // already ended: nothing more is sent
  EXPECT_EQ(RequestsServed("object_release_batch") - before, 2);
}

}  // namespace
}  // namespace nanokv::testing
