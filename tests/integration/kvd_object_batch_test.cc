// The object store's batches and views through a real kvd: many leases in
// one request (answered item by item, more keys than one request takes, and
// locations the same way),
// loads into device memory byte-exact, the leases gone after; views that
// read in place under a held lease, which ends with the view, with the
// process that holds it, and counts against max_leases; plans made
// elsewhere written from device memory. NANOKV_TEST_BACKEND=cuda runs the
// same against GPU pages.
#include <cstring>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "ipc/wire/object_codec.h"
#include "nanokv/object_store.h"
#include "tests/integration/device_memory_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

// Every object on device 0, where the test's buffers are: this process
// gives no other device access to the store's pages (two GPUs under cuda).
class KvdObjectBatchTest : public DeviceMemoryFixture {
 protected:
  void StartWithStore(const std::string& extra_yaml = "") {
    StartKvd(32, {"--config", WriteConfig(kTestStoreYaml + extra_yaml)});
    store_ = OpenStore();
    ASSERT_NE(store_, nullptr);
    OpenDeviceBackend();
  }

  // The object's bytes, through a reader's copy (not a view).
  bool Holds(const std::string& key, const std::vector<std::byte>& bytes) {
    auto got = store_->Get(key);
    return got.ok() && *got == bytes;
  }

  std::unique_ptr<ObjectStore> store_;
};

TEST_F(KvdObjectBatchTest, ABatchGetAnswersEveryItemByteExactAndLeavesNoLease) {
  StartWithStore();
  // More keys than one request takes, so the batch is several.
  const size_t n = wire::kMaxObjectBatch + 9;
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) {
    keys.push_back("batch:" + std::to_string(i));
    ASSERT_OK(store_->Put(keys.back(), ObjectPattern(1000 + 37 * i, static_cast<uint8_t>(i)), 0));
  }
  const size_t room = 1000 + 37 * n;
  auto buffer = Buffer(room * (n + 2));
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t i = 0; i < n; ++i) items.push_back({keys[i], base + i * room, room});
  items.push_back({"batch:missing", base + n * room, room});
  items.push_back({keys[3], base + (n + 1) * room, 10});  // too small: refused, nothing copied
  auto got = store_->BatchGetToDevice(items);
  ASSERT_EQ(got.size(), items.size());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    const size_t bytes = 1000 + 37 * i;
    EXPECT_EQ(*got[i], bytes);
    EXPECT_EQ(Read(base + i * room, bytes), ObjectPattern(bytes, static_cast<uint8_t>(i))) << keys[i];
  }
  EXPECT_EQ(got[n].status().code(), Code::kNotFound) << got[n].status().ToString();
  EXPECT_EQ(got[n + 1].status().code(), Code::kInvalidArgument) << got[n + 1].status().ToString();
  // Every lease of the batch is released: each object can go at once.
  auto listed = store_->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const ObjectEntry& e : *listed) EXPECT_EQ(e.leases, 0u) << e.key;
  for (const std::string& key : keys) EXPECT_OK(store_->Remove(key));
}

TEST_F(KvdObjectBatchTest, ABatchLocationAnswersEveryKeyAndLeavesNoLease) {
  StartWithStore();
  // More keys than one lease request takes, a missing one among them.
  std::vector<std::string> keys;
  for (size_t i = 0; i < wire::kMaxObjectBatch + 3; ++i) {
    keys.push_back("loc:" + std::to_string(i));
    if (i != 5) ASSERT_OK(store_->Put(keys.back(), ObjectPattern(100 + i, static_cast<uint8_t>(i)), 0));
  }
  auto located = store_->BatchGetLocation(keys);
  ASSERT_EQ(located.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == 5) {
      EXPECT_EQ(located[i].status().code(), Code::kNotFound) << located[i].status().ToString();
      continue;
    }
    ASSERT_TRUE(located[i].ok()) << keys[i] << ": " << located[i].status().ToString();
    EXPECT_EQ(located[i]->bytes_total, 100 + i);
    EXPECT_EQ(located[i]->state, ObjectState::kReady);
  }
  auto listed = store_->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const ObjectEntry& e : *listed) EXPECT_EQ(e.leases, 0u) << e.key;
}

// A batch of more objects than one uid may lease at once (a prefix of
// thousands of chunk planes): the batch gives its leases back as it goes,
// so every item is answered, none refused by its own earlier leases.
TEST_F(KvdObjectBatchTest, ABatchOfMoreObjectsThanMaxLeasesIsAnsweredWhole) {
  StartWithStore("  max_leases: 300\n");
  const size_t n = 700, bytes = 256;
  std::vector<std::string> keys;
  for (size_t i = 0; i < n; ++i) {
    keys.push_back("many:" + std::to_string(i));
    ASSERT_OK(store_->Put(keys.back(), ObjectPattern(bytes, static_cast<uint8_t>(i)), 0));
  }
  auto located = store_->BatchGetLocation(keys);
  ASSERT_EQ(located.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(located[i].ok()) << i << ": " << located[i].status().ToString();
  auto buffer = Buffer(bytes * n);
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  std::vector<ObjectStore::DeviceGet> items;
  for (size_t i = 0; i < n; ++i) items.push_back({keys[i], base + i * bytes, bytes});
  auto got = store_->BatchGetToDevice(items);
  ASSERT_EQ(got.size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(Read(base + i * bytes, bytes), ObjectPattern(bytes, static_cast<uint8_t>(i))) << keys[i];
  }
  auto listed = store_->List();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const ObjectEntry& e : *listed) EXPECT_EQ(e.leases, 0u) << e.key;
}

TEST_F(KvdObjectBatchTest, AViewReadsInPlaceAndHoldsTheObjectUntilItGoes) {
  StartWithStore();
  const auto pattern = ObjectPattern(3 * kPage + 4321, 9);
  ASSERT_OK(store_->Put("view:a", pattern, 0));
  {
    auto view = store_->View("view:a");
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    EXPECT_EQ(view->size(), pattern.size());
    EXPECT_EQ(view->key(), "view:a");
    EXPECT_EQ(view->device(), 0);
    EXPECT_EQ(Read(view->data(), view->size()), pattern);
    // Held: no remove, no eviction, and kvctl's list says held (no end).
    Status removed = store_->Remove("view:a");
    EXPECT_EQ(removed.code(), Code::kFailedPrecondition) << removed.ToString();
    auto listed = store_->List();
    ASSERT_TRUE(listed.ok() && listed->size() == 1);
    EXPECT_EQ((*listed)[0].leases, 1u);
    EXPECT_EQ((*listed)[0].lease_ms, UINT64_MAX);
    auto freed = store_->Evict(-1, 1);
    ASSERT_TRUE(freed.ok()) << freed.status().ToString();
    EXPECT_EQ(*freed, 0u);
    EXPECT_TRUE(Holds("view:a", pattern));
  }
  EXPECT_OK(store_->Remove("view:a"));
  EXPECT_EQ(store_->View("view:a").status().code(), Code::kNotFound);
}

TEST_F(KvdObjectBatchTest, AViewOutlivesItsStoreAndAManyKeyViewAnswersEach) {
  StartWithStore();
  ASSERT_OK(store_->Put("view:x", ObjectPattern(5000, 1), 0));
  ASSERT_OK(store_->Put("view:y", ObjectPattern(7000, 2), 0));
  auto other = OpenStore();
  ASSERT_NE(other, nullptr);
  std::vector<std::string> keys = {"view:x", "view:none", "view:y"};
  auto views = other->BatchView(keys);
  ASSERT_EQ(views.size(), 3u);
  ASSERT_TRUE(views[0].ok() && views[2].ok());
  EXPECT_EQ(views[1].status().code(), Code::kNotFound);
  other.reset();  // the views keep its connection and mappings
  EXPECT_EQ(Read(views[0]->data(), 5000), ObjectPattern(5000, 1));
  EXPECT_EQ(Read(views[2]->data(), 7000), ObjectPattern(7000, 2));
  EXPECT_EQ(store_->Remove("view:y").code(), Code::kFailedPrecondition);
  views.clear();
  EXPECT_OK(store_->Remove("view:x"));
  EXPECT_OK(store_->Remove("view:y"));
}

TEST_F(KvdObjectBatchTest, AViewEndsWithTheProcessThatHeldIt) {
  StartWithStore();
  const auto pattern = ObjectPattern(kPage + 17, 4);
  ASSERT_OK(store_->Put("view:peer", pattern, 0));
  Process peer = Process::Start({Binary("NANOKV_OBJECT_PEER", NANOKV_OBJECT_PEER), "view", ipc_, "view:peer",
                                 std::to_string(pattern.size()), "4"},
                                {{"NANOKV_RUN_DIR", dir_.path()}, {"NANOKV_TEST_BACKEND", Backend()}},
                                dir_.path() + "/peer_view.log");
  ASSERT_TRUE(WaitFor([&] { return peer.Log().find("viewing") != std::string::npos || !peer.Running(); }, 30s))
      << peer.Log();
  ASSERT_TRUE(peer.Running()) << peer.Log();
  EXPECT_EQ(store_->Remove("view:peer").code(), Code::kFailedPrecondition);
  peer.Signal(SIGKILL);
  peer.Wait(10s);
  // No lease_ttl on a held lease: only its connection's end frees the object.
  EXPECT_TRUE(WaitFor([&] { return store_->Remove("view:peer").ok(); }, 10s));
}

TEST_F(KvdObjectBatchTest, ViewsCountAgainstMaxLeases) {
  StartWithStore("  max_leases: 3\n");
  for (int i = 0; i < 4; ++i) ASSERT_OK(store_->Put("v:" + std::to_string(i), ObjectPattern(100, 1), 0));
  std::vector<std::string> keys = {"v:0", "v:1", "v:2", "v:3"};
  auto views = store_->BatchView(keys);
  ASSERT_EQ(views.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(views[i].ok()) << views[i].status().ToString();
  EXPECT_EQ(views[3].status().code(), Code::kResourceExhausted) << views[3].status().ToString();
  views.clear();
  EXPECT_TRUE(store_->View("v:3").ok());
}

TEST_F(KvdObjectBatchTest, PlansMadeElsewhereAreWrittenFromDeviceMemory) {
  StartWithStore();
  std::vector<ObjectPlan> plans;
  std::vector<std::vector<std::byte>> patterns;
  for (int i = 0; i < 3; ++i) {
    patterns.push_back(ObjectPattern(kPage / 3 + 1000 * i, static_cast<uint8_t>(20 + i)));
    auto plan = store_->OpenForWrite("plan:" + std::to_string(i), patterns.back().size(), 0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plans.push_back(*plan);
  }
  auto buffer = Buffer(3 * kPage);
  ASSERT_NE(buffer, nullptr);
  auto* base = static_cast<std::byte*>(buffer->get());
  std::vector<ObjectStore::PlanWrite> writes;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(backend_->Copy(base + i * kPage, patterns[i].data(), patterns[i].size(), gpu::CopyKind::kHostToDevice));
    writes.push_back({&plans[i], base + i * kPage});
  }
  auto ready = store_->GetLocation("plan:0");  // not READY yet
  EXPECT_FALSE(ready.ok());
  auto written = store_->WritePlansFromDevice(writes);
  ASSERT_EQ(written.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(written[i]);
    // READY is on the device before kvd hears of it.
    auto header = DeviceHeader(*store_, plans[i]);
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    EXPECT_EQ(header->state, static_cast<uint32_t>(ObjectState::kReady));
    ASSERT_OK(store_->Commit(plans[i].key, plans[i].epoch, /*published_on_device=*/true));
    EXPECT_TRUE(Holds(plans[i].key, patterns[i])) << plans[i].key;
  }
  // A READY object's plan is no write.
  auto located = store_->GetLocation("plan:1");
  ASSERT_TRUE(located.ok());
  ObjectStore::PlanWrite again{&*located, base};
  EXPECT_EQ(store_->WritePlansFromDevice({&again, 1})[0].code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace nanokv::testing
