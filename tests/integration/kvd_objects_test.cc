// The object store through a real kvd process and its socket: one process
// writes and commits, another reads byte-exact; the plan API's errors as an
// engine sees them; listing, eviction and zombie reclaim from outside.
// NANOKV_TEST_BACKEND=cuda runs the same against GPU pages.
#include <algorithm>
#include <thread>

#include "nanokv/object_header.h"
#include "gpu/backend.h"
#include "nanokv/object_store.h"
#include "gpu/device_buffer.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

class KvdObjectsTest : public KvdFixture {
 protected:
  // kvd with 32 pages per device, 8 of them the object store's.
  void StartWithStore(const std::string& extra_yaml = "") {
    StartKvd(32, {"--config", WriteConfig(kTestStoreYaml + extra_yaml)});
  }

  int RunPeer(const std::string& mode, const std::string& key, size_t bytes, int seed) {
    Process peer = Process::Start({Binary("NANOKV_OBJECT_PEER", NANOKV_OBJECT_PEER), mode, ipc_, key,
                                   std::to_string(bytes), std::to_string(seed)},
                                  {{"NANOKV_RUN_DIR", dir_.path()}, {"NANOKV_TEST_BACKEND", Backend()}},
                                  dir_.path() + "/peer_" + mode + ".log");
    auto code = peer.Wait(std::chrono::seconds(60));
    if (!code || *code != 0) std::printf("--- peer %s ---\n%s\n", mode.c_str(), peer.Log().c_str());
    return code ? *code : -1;
  }
};

TEST_F(KvdObjectsTest, OneProcessWritesAnotherReadsByteExact) {
  StartWithStore();
  // The producer is another process: plan, copy through its own mapping, commit.
  ASSERT_EQ(RunPeer("put", "sess:1:kv:L0", 3 * kPage + 12345, 7), 0);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto got = store->Get("sess:1:kv:L0");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, ObjectPattern(3 * kPage + 12345, 7));
  // And the other way round; small objects share a page.
  ASSERT_OK(store->Put("small:a", ObjectPattern(1000, 1)));
  ASSERT_OK(store->Put("small:b", ObjectPattern(2000, 2)));
  EXPECT_EQ(RunPeer("get", "small:a", 1000, 1), 0);
  EXPECT_EQ(RunPeer("get", "small:b", 2000, 2), 0);
  auto a = store->GetLocation("small:a"), b = store->GetLocation("small:b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->spans[0].page_id, b->spans[0].page_id);
  EXPECT_EQ(a->state, ObjectState::kReady);
  // The store's pages are granted pages of the pool; the counts stay exact.
  ExpectCountsExact(Read());
  EXPECT_GE(GrantedPages(), 8u);
}

// Device-resident bytes: on cuda the producer's kv_store_pages and
// kv_commit_ready, the reader's kv_load_pages, each in its own process; on
// the host backend the same API through the backend's copies.
TEST_F(KvdObjectsTest, DeviceBytesGoBetweenProcessesByteExact) {
  StartWithStore();
  const size_t bytes = 3 * kPage + 777;
  ASSERT_EQ(RunPeer("put-device", "dev:1", bytes, 9), 0);
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // The kernels run where they are built and the pages are CUDA's.
  EXPECT_EQ(store->device_transfers_use_kernels(), NANOKV_KERNELS_BUILT && Backend() == "cuda");
  auto plan = store->GetLocation("dev:1");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->state, ObjectState::kReady);
  // The header on the device says READY with the plan's epoch.
  auto backend = gpu::OpenBackend(Backend());
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto header = DeviceHeader(*store, *plan);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->state, static_cast<uint32_t>(ObjectState::kReady));
  EXPECT_EQ(header->epoch, plan->epoch);
  EXPECT_EQ(header->key_hash, plan->key_hash);
  EXPECT_EQ(header->bytes_total, bytes);
  // Either path reads what the other wrote.
  auto got = store->Get("dev:1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, ObjectPattern(bytes, 9));
  EXPECT_EQ(RunPeer("get-device", "dev:1", bytes, 9), 0);
  ASSERT_OK(store->Put("host:2", ObjectPattern(5000, 4)));
  EXPECT_EQ(RunPeer("get-device", "host:2", 5000, 4), 0);

  // Errors, in this process.
  auto buffer = gpu::DeviceBuffer::Create(**backend, 0, bytes);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  void* device = (*buffer)->get();
  EXPECT_EQ(store->GetToDevice("dev:1", device, bytes - 1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store->GetToDevice("missing", device, bytes).status().code(), Code::kNotFound);
  EXPECT_EQ(store->GetToDevice("dev:1", nullptr, bytes).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store->PutFromDevice("dev:1", device, 10).code(), Code::kAlreadyExists);
  EXPECT_EQ(store->PutFromDevice("dev:3", nullptr, 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(store->PutFromDevice("dev:3", device, 0).code(), Code::kInvalidArgument);
  // Nothing was left behind by the refused ones: the object is free to write, no lease holds dev:1.
  ASSERT_OK(store->PutFromDevice("dev:3", device, 100, 0));  // on the buffer's device: this store reaches no other
  auto got3 = store->GetToDevice("dev:3", device, bytes);
  ASSERT_TRUE(got3.ok()) << got3.status().ToString();
  EXPECT_EQ(*got3, 100u);
  ASSERT_OK(store->Remove("dev:1"));
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdObjectsTest, PlanApiErrorsReachTheCaller) {
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto plan = store->OpenForWrite("k", 4096, 0);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->state, ObjectState::kWriting);
  EXPECT_EQ(plan->bytes_total, 4096u);
  EXPECT_EQ(store->GetLocation("k").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(store->OpenForWrite("k", 10).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(store->Remove("k").code(), Code::kFailedPrecondition);
  EXPECT_EQ(store->Commit("k", plan->epoch + 1).code(), Code::kFailedPrecondition);
  ASSERT_OK(store->Commit("k", plan->epoch));
  EXPECT_EQ(store->Commit("k", plan->epoch).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store->Put("k", ObjectPattern(10, 0)).code(), Code::kAlreadyExists);
  auto lease = store->Lease("k");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(store->Remove("k").code(), Code::kFailedPrecondition);
  ASSERT_OK(store->ReleaseLease("k", lease->id));
  ASSERT_OK(store->Remove("k"));
  EXPECT_EQ(store->GetLocation("k").status().code(), Code::kNotFound);
  // Range checks in kvd's decoder: a bad key is a protocol fault, not a crash.
  EXPECT_EQ(store->OpenForWrite("has space", 10).status().code(), Code::kProtocolError);
  EXPECT_EQ(store->OpenForWrite(std::string(300, 'k'), 10).status().code(), Code::kProtocolError);
  EXPECT_EQ(store->OpenForWrite("big", 64 * kPage).status().code(), Code::kResourceExhausted);
  EXPECT_TRUE(kvd_.Running());
}

TEST_F(KvdObjectsTest, ListEvictAndZombieReclaim) {
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 4; ++i) ASSERT_OK(store->Put("o" + std::to_string(i), ObjectPattern(kPage, uint8_t(i))));
  ASSERT_OK(store->Pin("o0", ObjectPin::kHard));
  auto listed = store->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 4u);
  EXPECT_EQ((*listed)[0].key, "o0");
  EXPECT_EQ((*listed)[0].pin, ObjectPin::kHard);
  EXPECT_EQ((*listed)[1].state, ObjectState::kReady);
  EXPECT_EQ((*listed)[1].bytes_total, kPage);
  auto freed = store->Evict(-1, 2 * kPage);  // FIFO, skipping the pinned o0
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 2 * kPage);
  EXPECT_TRUE(store->GetLocation("o0").ok());
  EXPECT_EQ(store->GetLocation("o1").status().code(), Code::kNotFound);
  EXPECT_EQ(store->GetLocation("o2").status().code(), Code::kNotFound);

  // A write nobody commits is reclaimed after write_timeout (300 ms).
  auto plan = store->OpenForWrite("zombie", 1000, 0);
  ASSERT_TRUE(plan.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(store->OpenForWrite("next", 1000, 0).ok());  // an open reclaims its device
  EXPECT_EQ(store->Commit("zombie", plan->epoch).code(), Code::kNotFound);
}

// Issue 19 item 13: kvd reclaims a write left past write_timeout on its own
// timer: nothing else touches the store, and the key opens again after.
TEST_F(KvdObjectsTest, AZombieWriteIsReclaimedOnATimer) {
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto plan = store->OpenForWrite("zombie", 1000, 0);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(store->OpenForWrite("zombie", 1000, 0).status().code(), Code::kAlreadyExists);
  // Waits for kvd's timer (write_timeout is 300 ms); the bound is generous
  // and only says when to give up.
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto listed = store->List();
    ASSERT_TRUE(listed.ok()) << listed.status().ToString();
    gone = std::none_of(listed->begin(), listed->end(),
                        [](const auto& entry) { return entry.key == "zombie"; });
  }
  ASSERT_TRUE(gone) << "kvd never reclaimed the zombie write";
  EXPECT_EQ(store->Commit("zombie", plan->epoch).code(), Code::kNotFound);
  auto reopened = store->OpenForWrite("zombie", 1000, 0);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  ASSERT_OK(store->Revoke("zombie", reopened->epoch));
}

TEST_F(KvdObjectsTest, KvctlListsAndEvictsObjects) {
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Put("kv:a", ObjectPattern(kPage, 1)));
  ASSERT_OK(store->Put("kv:b", ObjectPattern(100, 2)));
  auto lease = store->Lease("kv:b");
  ASSERT_TRUE(lease.ok());
  auto kvctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), Binary("NANOKV_KVCTL_BINARY", NANOKV_KVCTL_BINARY));
    Process p = Process::Start(args, {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/kvctl.log");
    auto code = p.Wait(std::chrono::seconds(30));
    EXPECT_TRUE(code.has_value() && *code == 0) << p.Log();
    return p.Log();
  };
  std::string table = kvctl({"objects", ipc_});
  EXPECT_NE(table.find("KEY"), std::string::npos) << table;
  EXPECT_NE(table.find("kv:a"), std::string::npos) << table;
  EXPECT_NE(table.find("READY"), std::string::npos) << table;
  std::string json = kvctl({"objects", ipc_, "--json"});
  EXPECT_NE(json.find("\"key\":\"kv:b\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"leases\":1"), std::string::npos) << json;
  std::string evicted = kvctl({"evict", "--objects", ipc_, "--bytes", "1"});
  EXPECT_NE(evicted.find("evicted 2"), std::string::npos) << evicted;  // kv:a (2 MiB), not the leased kv:b
  EXPECT_EQ(store->GetLocation("kv:a").status().code(), Code::kNotFound);
  EXPECT_TRUE(store->GetLocation("kv:b").ok());
}

// Two devices: a producer on device 0 with access to both pushes an object
// owned by device 1 from a buffer of its own (on a machine with two GPUs:
// kv_store_pages runs on GPU 0 and stores into GPU 1's pages peer-to-peer,
// no host staging); a reader of device 1 only reads it back byte-exact, with
// host bytes and into a buffer on device 1.
TEST_F(KvdObjectsTest, AProducerWritesAnotherDevicesObject) {
  if (Backend() == "host") {
    setenv("NANOKV_HOST_DEVICES", "2", 1);
  } else {
    auto probe = gpu::OpenBackend(Backend());
    ASSERT_TRUE(probe.ok()) << probe.status().ToString();
    if ((*probe)->device_count() < 2) GTEST_SKIP() << "needs two GPUs (the host backend simulates them)";
  }
  StartKvd(16, {"--config", WriteConfig("object_store:\n  size: 8MiB\n"), "--host-devices", "2"});
  ObjectStoreOptions options;
  options.ipc_name = ipc_;
  options.backend = Backend();
  options.access_devices = {0, 1};
  auto producer = ObjectStore::Open(options);
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  auto backend = gpu::OpenBackend(Backend());
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const size_t bytes = kPage + 17;
  auto src = gpu::DeviceBuffer::Create(**backend, 0, bytes);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const auto pattern = ObjectPattern(bytes, 3);
  ASSERT_OK((*backend)->Copy((*src)->get(), pattern.data(), bytes, gpu::CopyKind::kHostToDevice));
  ASSERT_OK((*producer)->PutFromDevice("cross", (*src)->get(), bytes, 1));
  ASSERT_OK((*producer)->Put("cross:host", ObjectPattern(5000, 5), 1));
  auto plan = (*producer)->GetLocation("cross");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->device, 1);
  options.access_devices = {7};
  EXPECT_EQ(ObjectStore::Open(options).status().code(), Code::kInvalidArgument);

  auto reader = OpenStore();
  ASSERT_NE(reader, nullptr);
  auto got = reader->Get("cross");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, pattern);
  auto host = reader->Get("cross:host");
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(*host, ObjectPattern(5000, 5));
  // A buffer on device 0, a VMM mapping only device 0 reaches, while only
  // device 1 reaches the reader's mapping of the pages: the kernels have no
  // device to run on. A clear refusal, not a GPU fault that ends the context
  // (found on two H100s); the host backend's copies reach both.
  auto other = gpu::DeviceBuffer::Create(**backend, 0, bytes);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto refused = reader->GetToDevice("cross", (*other)->get(), (*other)->size());
  if (reader->device_transfers_use_kernels()) {
    EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("access_devices"), std::string_view::npos);
  } else {
    EXPECT_TRUE(refused.ok()) << refused.status().ToString();
  }
  auto dst = gpu::DeviceBuffer::Create(**backend, 1, bytes);
  ASSERT_TRUE(dst.ok()) << dst.status().ToString();
  auto n = reader->GetToDevice("cross", (*dst)->get(), (*dst)->size());
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  std::vector<std::byte> out(bytes);
  ASSERT_OK((*backend)->Copy(out.data(), (*dst)->get(), bytes, gpu::CopyKind::kDeviceToHost));
  EXPECT_EQ(out, pattern);
  unsetenv("NANOKV_HOST_DEVICES");
}

TEST_F(KvdObjectsTest, AKvdWithoutAStoreSaysSo) {
  StartKvd();
  ObjectStoreOptions options;
  options.ipc_name = ipc_;
  options.backend = Backend();
  auto store = ObjectStore::Open(options);
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition) << "not enabled, not unavailable";
  EXPECT_NE(store.status().message().find("object_store.size is 0"), std::string_view::npos)
      << store.status().ToString();
}

// On the host backend the store takes kvd's device count from kvd's answer
// (not NANOKV_HOST_DEVICES, unset here); kvctl objects sums the store up.
TEST_F(KvdObjectsTest, TheStoreTakesKvdsDevicesAndKvctlSumsItUp) {
  if (Backend() != "host") GTEST_SKIP() << "the host backend's simulated devices";
  unsetenv("NANOKV_HOST_DEVICES");
  StartKvd(16, {"--config", WriteConfig("object_store:\n  size: 8MiB\n"), "--host-devices", "2"});
  ObjectStoreOptions options;
  options.ipc_name = ipc_;
  options.backend = "host";
  auto store = ObjectStore::Open(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_OK((*store)->Put("on:1", ObjectPattern(5000, 7), 1));
  auto got = (*store)->Get("on:1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, ObjectPattern(5000, 7));
  auto info = (*store)->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->backend, "host");
  ASSERT_EQ(info->devices.size(), 2u);
  EXPECT_EQ(info->devices[0].objects, 0u);
  EXPECT_EQ(info->devices[0].used_bytes, 0u);
  EXPECT_EQ(info->devices[1].objects, 1u);
  EXPECT_GE(info->devices[1].used_bytes, 5000u);
  EXPECT_GT(info->devices[1].store_bytes, info->devices[1].used_bytes);

  auto kvctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), Binary("NANOKV_KVCTL_BINARY", NANOKV_KVCTL_BINARY));
    Process p = Process::Start(args, {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/kvctl.log");
    auto code = p.Wait(std::chrono::seconds(30));
    EXPECT_TRUE(code.has_value() && *code == 0) << p.Log();
    return p.Log();
  };
  std::string table = kvctl({"objects", ipc_});
  EXPECT_NE(table.find("store: 1 objects, 0 evictions; device 0 0 B used, "), std::string::npos) << table;
  EXPECT_NE(table.find("; device 1 "), std::string::npos) << table;
  // The one object's pages (a payload page and a header page) are its
  // producer's: this process's uid (kvd's own, root's: each uid owns its
  // pages; only the master's orders are kvd's callers').
  EXPECT_NE(table.find("free (pages: uid " + std::to_string(getuid()) + " 2)"), std::string::npos) << table;
  ASSERT_EQ(info->devices[1].owners.size(), 1u);
  EXPECT_EQ(info->devices[1].owners[0].pages, 2u);
  EXPECT_FALSE(info->devices[1].owners[0].kvd_callers);
  EXPECT_EQ(info->devices[1].owners[0].uid, getuid());
  EXPECT_TRUE(info->devices[0].owners.empty());
  EXPECT_EQ(info->devices[0].shared_free_pages, 3u) << "8 MiB: a header page and 3 payload pages";
  std::string json = kvctl({"objects", ipc_, "--json"});
  EXPECT_NE(json.find("\"store\":{\"objects\":1,\"evictions\":0,\"devices\":[{\"device\":0,"), std::string::npos)
      << json;
}

}  // namespace
}  // namespace nanokv::testing
