// Issue 15 item 1: kvd does no device work while it serves object requests.
// A copy or fill from kvd's process makes the GPU switch between kvd's
// context and the engines' (~150 us each way on an H100), so the producer
// writes headers and READY, and kvd decides DEAD and reuse in its index.
// kvd counts its backend's copies and fills (nanokv_device_work_calls_total
// on /metrics); every request below must leave that count where it was,
// on the host backend in CI and on cuda on the GPU.
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "nanokv/object_store.h"
#include "tests/integration/backend_buffer.h"
#include "tests/integration/metrics_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdDeviceWorkTest : public MetricsFixture {
 protected:
  double DeviceWork() {
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
};

TEST_F(KvdDeviceWorkTest, ObjectRequestsMakeNoDeviceWorkInKvd) {
  std::string path = dir_.path() + "/objects.yaml";
  std::ofstream(path) << "object_store:\n  size: 16MiB\n  policy: fifo\n  lease_ttl: 5s\n"
                      << "  write_timeout: 300ms\n";
  StartKvdWithMetrics(32, {"--config", path});
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
  auto buffer = BackendBuffer::Create(**backend, 0, pattern.size());
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  ASSERT_OK((*backend)->Copy((*buffer)->get(), pattern.data(), pattern.size(), gpu::CopyKind::kHostToDevice));
  ASSERT_OK(store->PutFromDevice("device", (*buffer)->get(), pattern.size(), 0));
  auto n = store->GetToDevice("device", (*buffer)->get(), (*buffer)->size());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  // The header the producer wrote says READY at the plan's epoch.
  auto plan = store->GetLocation("device");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto header_at = store->HeaderPointer(*plan);
  ASSERT_TRUE(header_at.ok()) << header_at.status().ToString();
  ObjectHeader header{};
  ASSERT_OK((*backend)->Copy(&header, *header_at, sizeof(header), gpu::CopyKind::kDeviceToHost));
  EXPECT_EQ(header.state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(header.epoch, plan->epoch);
  EXPECT_EQ(header.bytes_total, pattern.size());
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

}  // namespace
}  // namespace nanokv::testing
