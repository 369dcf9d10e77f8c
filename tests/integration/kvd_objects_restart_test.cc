// The object store across kvd kill -9s (issue 15 item 5): committed objects
// come back byte-exact from the same pages (held by the page keeper, listed
// by the object journal, vouched for by their READY headers); a write cut by
// the kill, a removed object and a scribbled header do not, and their space
// is reused; two restarts in a row; and clients putting and getting while
// kvd is killed and restarted never read wrong bytes, with kvd checking its
// invariants every turn. Host in CI; NANOKV_TEST_BACKEND=cuda on the GPU.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/object_store.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/http_get.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdObjectsRestartTest : public KvdFixture {
 protected:
  // 16 MiB a device; writes held 300 ms; kvd checks its invariants (the
  // store's included) after every turn that changed something.
  void StartWithStore() {
    std::vector<std::string> extra = {"--config", WriteConfig(kTestStoreYaml), "--check-invariants", "--metrics-port", "0"};
    // Host: two simulated devices, so a store of each comes back (cuda: the GPUs there are).
    if (Backend() == "host") extra.insert(extra.end(), {"--host-devices", "2"});
    StartKvd(32, extra);
  }

  // A series of kvd's /metrics (its first sample line), or -1.
  double Metric(const std::string& series) {
    const std::string marker = "kvd: metrics at http://127.0.0.1:";
    const std::string log = kvd_.Log();
    const size_t at = log.rfind(marker);
    if (at == std::string::npos) return -1;
    auto reply = HttpGet("127.0.0.1", static_cast<uint16_t>(std::stoul(log.substr(at + marker.size()))), "/metrics");
    if (!reply.ok() || reply->status != 200) return -1;
    const size_t line = reply->body.find("\n" + series + " ");
    if (line == std::string::npos) return -1;
    return std::stod(reply->body.substr(line + series.size() + 2));
  }

  void KillAndRestart() {
    kvd_.Signal(SIGKILL);
    ASSERT_TRUE(kvd_.Wait(10s).has_value());
    StartWithStore();
  }

  static std::vector<std::pair<std::string, std::vector<std::byte>>> Objects() {
    std::vector<std::pair<std::string, std::vector<std::byte>>> out;
    const std::vector<size_t> sizes = {1, 1000, 64 << 10, 1 << 20, (3 << 20) + 17, (2 << 20)};
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.emplace_back("obj:" + std::to_string(i), ObjectPattern(sizes[i], static_cast<uint8_t>(7 * i + 1)));
    }
    return out;
  }

  void ExpectAllBack(ObjectStore& store, const std::vector<std::pair<std::string, std::vector<std::byte>>>& objects) {
    for (const auto& [key, bytes] : objects) {
      auto got = store.Get(key);
      ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString() << "\n" << kvd_.Log();
      EXPECT_TRUE(*got == bytes) << key << " came back with other bytes";
    }
  }
};

TEST_F(KvdObjectsRestartTest, CommittedObjectsComeBackTheRestIsReclaimed) {
  StartWithStore();
  const auto objects = Objects();
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    // All on the first device: its log line and series count them.
    for (const auto& [key, bytes] : objects) ASSERT_OK(store->Put(key, bytes, 0));
    ASSERT_OK(store->Pin("obj:0", ObjectPin::kHard));
    // A write under way at the kill: opened, bytes copied, never committed.
    auto plan = store->OpenForWrite("writing", 4096, 0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_OK(store->CopyIn(*plan, ObjectPattern(4096, 9)));
    // Removed last, so nothing reuses its slot: its header still says READY
    // at its epoch (kvd writes nothing on the device), only kvd's journal
    // knows it is gone.
    ASSERT_OK(store->Put("removed", ObjectPattern(5000, 3), 0));
    ASSERT_OK(store->Remove("removed"));
    KillAndRestart();
  }
  EXPECT_NE(kvd_.Log().find("device 0: recovered " + std::to_string(objects.size()) + " objects"), std::string::npos)
      << kvd_.Log();
  EXPECT_TRUE(WaitFor([&] {
    return Metric("nanokv_object_store_recovered_objects{device=\"0\"}") == static_cast<double>(objects.size());
  }, 10s)) << "the scrape says what came back";
  EXPECT_EQ(Metric("nanokv_object_store_reclaimed_at_start{device=\"0\"}"), 1) << "the cut write";
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ExpectAllBack(*store, objects);
  EXPECT_EQ(store->Get("removed").status().code(), Code::kNotFound) << "a removed object stays removed";
  auto listed = store->List();
  ASSERT_TRUE(listed.ok());
  bool pinned = false;
  for (const ObjectEntry& e : *listed) pinned |= e.key == "obj:0" && e.pin == ObjectPin::kHard;
  EXPECT_TRUE(pinned) << "its pin came back";
  // The cut write holds its space until write_timeout, then is reclaimed,
  // and the key and its space are free again.
  EXPECT_FALSE(store->Get("writing").ok());
  EXPECT_TRUE(WaitFor([&] { return store->OpenForWrite("writing", 1).status().code() != Code::kAlreadyExists; },
                      10s))
      << kvd_.Log();
  ASSERT_OK(store->Put("removed", ObjectPattern(5000, 4)));
  auto again = store->Get("removed");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == ObjectPattern(5000, 4));
  ExpectAllBack(*store, objects);
}

TEST_F(KvdObjectsRestartTest, AScribbledHeaderIsReclaimedAndKvdStarts) {
  StartWithStore();
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    // One device: the scribble goes through a mapping of that device's header page.
    ASSERT_OK(store->Put("kept", ObjectPattern(3000, 1), 0));
    ASSERT_OK(store->Put("scribbled", ObjectPattern(3000, 2), 0));
    auto victim = store->GetLocation("scribbled");
    ASSERT_TRUE(victim.ok());
    // A plan open here maps the (same owner's) header page for writing: a
    // producer scribbling over another of its headers.
    auto open = store->OpenForWrite("opener", 100, 0);
    ASSERT_TRUE(open.ok());
    ASSERT_EQ(open->device, victim->device);
    ASSERT_EQ(open->header_offset / open->page_bytes, victim->header_offset / victim->page_bytes);
    auto at = store->HeaderPointer(*open);
    ASSERT_TRUE(at.ok());
    auto backend = gpu::OpenBackend(Backend());
    ASSERT_TRUE(backend.ok());
    std::vector<std::byte> garbage = ObjectPattern(sizeof(ObjectHeader), 0xee);
    void* target = static_cast<std::byte*>(*at) - open->header_offset + victim->header_offset;
    ASSERT_OK((*backend)->Copy(target, garbage.data(), garbage.size(), gpu::CopyKind::kHostToDevice));
    KillAndRestart();
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto kept = store->Get("kept");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_TRUE(*kept == ObjectPattern(3000, 1));
  EXPECT_FALSE(store->Get("scribbled").ok()) << "its header no longer vouches for it";
  EXPECT_TRUE(WaitFor([&] { return store->Get("scribbled").status().code() == Code::kNotFound; }, 10s));
  // Its slot and space serve the next object.
  ASSERT_OK(store->Put("scribbled", ObjectPattern(3000, 5)));
  auto fresh = store->Get("scribbled");
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(*fresh == ObjectPattern(3000, 5));
}

TEST_F(KvdObjectsRestartTest, TwoRestartsInARow) {
  StartWithStore();
  auto objects = Objects();
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (size_t i = 0; i < 3; ++i) ASSERT_OK(store->Put(objects[i].first, objects[i].second));
  }
  KillAndRestart();
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (size_t i = 3; i < objects.size(); ++i) ASSERT_OK(store->Put(objects[i].first, objects[i].second));
    ASSERT_OK(store->Remove(objects[0].first));
  }
  KillAndRestart();
  objects.erase(objects.begin());
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ExpectAllBack(*store, objects);
  EXPECT_EQ(store->Get("obj:0").status().code(), Code::kNotFound);
}

// Each device's store comes back on its own device, at its own offsets.
TEST_F(KvdObjectsRestartTest, EveryDevicesStoreComesBack) {
  StartWithStore();
  std::vector<int> devices;
  std::vector<std::pair<std::string, std::vector<std::byte>>> objects;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    auto info = store->Info();
    ASSERT_TRUE(info.ok());
    for (const auto& device : info->devices) devices.push_back(device.device);
    for (int device : devices) {
      for (int i = 0; i < 3; ++i) {
        objects.emplace_back("d" + std::to_string(device) + ":" + std::to_string(i),
                             ObjectPattern(70000 * (i + 1) + device, static_cast<uint8_t>(device * 16 + i)));
        ASSERT_OK(store->Put(objects.back().first, objects.back().second, device));
      }
    }
  }
  KillAndRestart();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ExpectAllBack(*store, objects);
  auto listed = store->List();
  ASSERT_TRUE(listed.ok());
  for (const ObjectEntry& e : *listed) {
    EXPECT_EQ("d" + std::to_string(e.device), e.key.substr(0, e.key.find(':'))) << "on its own device";
  }
  EXPECT_EQ(listed->size(), objects.size());
}

// Restarted with another store size, the old layout cannot be rebuilt: the
// store starts empty, taking the pages that came back as plain ones, and
// serves (kvd checks the pool's and the store's accounting all along).
TEST_F(KvdObjectsRestartTest, AStoreOfAnotherSizeStartsEmpty) {
  StartWithStore();
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Put("old", ObjectPattern(10000, 1), 0));
  }
  kvd_.Signal(SIGKILL);
  ASSERT_TRUE(kvd_.Wait(10s).has_value());
  std::vector<std::string> extra = {"--config",
                                    WriteConfig("object_store:\n  size: 24MiB\n  write_timeout: 300ms\n", "big.yaml"),
                                    "--check-invariants"};
  if (Backend() == "host") extra.insert(extra.end(), {"--host-devices", "2"});
  StartKvd(32, extra);
  EXPECT_NE(kvd_.Log().find("another geometry"), std::string::npos) << kvd_.Log();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Get("old").status().code(), Code::kNotFound);
  ASSERT_OK(store->Put("new", ObjectPattern(10000, 2), 0));
  auto got = store->Get("new");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(*got == ObjectPattern(10000, 2));
  auto info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->devices[0].pages, 12u) << "24 MiB of 2 MiB pages";
  // Smaller again: it takes 4 of the 12 pages back, the rest wait out the
  // recovery window held back.
  store.reset();
  kvd_.Signal(SIGKILL);
  ASSERT_TRUE(kvd_.Wait(10s).has_value());
  extra[1] = WriteConfig("object_store:\n  size: 8MiB\n  write_timeout: 300ms\n", "small.yaml");
  StartKvd(32, extra);
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Get("new").status().code(), Code::kNotFound);
  ASSERT_OK(store->Put("newer", ObjectPattern(10000, 3), 0));
  info = store->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->devices[0].pages, 4u);
  EXPECT_TRUE(kvd_.Running()) << kvd_.Log();
}

// A stop is a stop: the keeper leaves with kvd (reaped by it), the store's
// objects are not back at the next start, and nothing is left running.
TEST_F(KvdObjectsRestartTest, AStopDropsTheStore) {
  StartWithStore();
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(store->Put("gone", ObjectPattern(1000, 1)));
  }
  const std::string marker = "kvd: page keeper ";
  const std::string log = kvd_.Log();
  ASSERT_NE(log.find(marker), std::string::npos) << log;
  const auto keeper = static_cast<pid_t>(std::stol(log.substr(log.find(marker) + marker.size())));
  EXPECT_EQ(kill(keeper, 0), 0) << "the keeper runs beside kvd";
  StopKvd();
  EXPECT_NE(kill(keeper, 0), 0) << "and is gone with it";
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Get("gone").status().code(), Code::kNotFound);
}

// Clients putting and getting over their rings while kvd is killed and
// restarted: every object a client saw committed reads back byte-exact or
// is gone (evicted), never other bytes; kvd checks its invariants all along.
TEST_F(KvdObjectsRestartTest, ClientsRideThroughRestartsAndKeepWhatWasCommitted) {
  StartWithStore();
  constexpr int kClients = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::mutex mu;
  std::map<std::string, std::vector<std::byte>> committed;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      std::unique_ptr<ObjectStore> store;
      for (int n = 0; !stop; ++n) {
        if (store == nullptr) {
          auto opened = TryOpenStore(5000);
          if (!opened.ok()) {
            std::this_thread::sleep_for(20ms);
            continue;
          }
          store = std::move(*opened);
        }
        const std::string key = "c" + std::to_string(t) + ":" + std::to_string(n);
        const auto bytes = ObjectPattern(4096 + 4099 * (n % 50), static_cast<uint8_t>(t * 31 + n));
        Status put = store->Put(key, bytes);
        if (put.ok()) {
          std::lock_guard lock(mu);
          committed[key] = bytes;
        }
        // Reads of earlier objects, of this client's and others'.
        std::string earlier;
        std::vector<std::byte> expected;
        {
          std::lock_guard lock(mu);
          if (!committed.empty()) {
            auto it = committed.begin();
            std::advance(it, static_cast<long>((n * 7919u) % committed.size()));
            earlier = it->first;
            expected = it->second;
          }
        }
        if (!earlier.empty()) {
          auto got = store->Get(earlier);
          if (got.ok() && *got != expected) ++wrong;
          if (!got.ok() && got.status().code() == Code::kUnavailable) store.reset();
        }
        if (!put.ok() && put.code() == Code::kUnavailable) store.reset();
      }
    });
  }
  for (int r = 0; r < 3; ++r) {
    std::this_thread::sleep_for(400ms);
    KillAndRestart();
    if (HasFatalFailure()) break;
  }
  std::this_thread::sleep_for(400ms);
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(wrong.load(), 0) << "a get returned other bytes than its put";
  // Every committed object: byte-exact or gone, never other bytes.
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  size_t back = 0;
  for (const auto& [key, bytes] : committed) {
    auto got = store->Get(key);
    if (got.ok()) {
      ++back;
      EXPECT_TRUE(*got == bytes) << key << " came back with other bytes";
    } else {
      EXPECT_EQ(got.status().code(), Code::kNotFound) << key << ": " << got.status().ToString();
    }
  }
  EXPECT_GT(back, 0u) << "some objects survive the restarts";
  EXPECT_TRUE(kvd_.Running()) << "kvd stopped (an invariant broke?)\n" << kvd_.Log();
}

}  // namespace
}  // namespace nanokv::testing
