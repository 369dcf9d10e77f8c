// The KV highway on the host backend (NANOKV_TEST_BACKEND=cuda: the same on
// GPUs): a request's KV put from device memory and got back as batches
// through the master's plans, on every path a copy can take. One kvd (the
// client's own node), two kvds of one host (through the other's socket and
// pages: its nodes have no transfer agent, so nothing else could carry the
// bytes), two hosts (UCX); the stream-ordered put with readers racing it;
// gets of local copies with the master stopped; views; a producer killed
// mid-batch.
#include <signal.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class ClusterHighwayTest : public ClusterDeviceFixture {
 protected:
  // A master and two nodes; with `one_host`, both on one host and without
  // a transfer agent.
  void StartCluster(bool one_host, size_t store_pages = 16) {
    one_host_ = one_host;
    if (one_host) data_address_ = "";
    StartMaster();
    StartNode(store_pages);
    StartNode(store_pages);
  }

  // `count` objects of `bytes` each, object i holding Bytes(bytes, seed + i),
  // back to back in one device buffer.
  std::byte* Source(size_t count, size_t bytes, int seed) {
    std::byte* at = Device(count * bytes);
    for (size_t i = 0; i < count; ++i) {
      const auto data = Bytes(bytes, seed + static_cast<int>(i));
      EXPECT_OK(backend_->Copy(at + i * bytes, data.data(), bytes, gpu::CopyKind::kHostToDevice));
    }
    return at;
  }
  std::byte* Device(size_t bytes) {
    gpu::DeviceBuffer* buffer = NewBuffer(bytes);
    if (buffer == nullptr) return nullptr;
    auto* at = static_cast<std::byte*>(buffer->get());
    EXPECT_OK(backend_->Fill(at, 0xEE, buffer->size()));
    return at;
  }

  std::vector<DevicePut> Puts(const std::string& prefix, std::byte* src, size_t count, size_t bytes,
                              const std::string& to) {
    std::vector<DevicePut> puts;
    for (size_t i = 0; i < count; ++i) {
      puts.push_back({prefix + std::to_string(i), src + i * bytes, bytes, {.preferred_segment = to}});
    }
    return puts;
  }

  // Gets `count` objects into fresh device memory and checks each byte.
  void ExpectBatchBack(ClusterClient& client, const std::string& prefix, size_t count, size_t bytes, int seed) {
    std::byte* dst = Device(count * bytes);
    std::vector<DeviceGet> gets;
    for (size_t i = 0; i < count; ++i) gets.push_back({prefix + std::to_string(i), dst + i * bytes, bytes});
    auto got = client.BatchGetToDevice(gets);
    ASSERT_EQ(got.size(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(got[i].ok()) << gets[i].key << ": " << got[i].status().ToString();
      EXPECT_EQ(*got[i], bytes);
      EXPECT_EQ(Read(dst + i * bytes, bytes), Bytes(bytes, seed + static_cast<int>(i))) << gets[i].key;
    }
  }
};

TEST_F(ClusterHighwayTest, TwoNodesOfOneHostMoveBatchesThroughTheOtherKvdsPages) {
  StartCluster(/*one_host=*/true);
  auto producer = Client(0);
  auto decoder = Client(1);
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(decoder, nullptr);
  auto cluster = producer->Cluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  for (const ClusterNodeStatus& n : cluster->nodes) {
    EXPECT_EQ(n.host_id, "host-shared");
    EXPECT_EQ(n.path, n.node_id == "n0" ? "local" : "host") << n.node_id;
  }
  for (size_t count : {size_t{1}, size_t{17}, size_t{256}}) {
    const size_t bytes = count == 256 ? 4096 : 100'000 + count;
    const std::string prefix = "req" + std::to_string(count) + ":L";
    std::byte* src = Source(count, bytes, static_cast<int>(count));
    // n1 has no transfer agent: only the host path can carry these.
    auto put = producer->BatchPutFromDevice(Puts(prefix, src, count, bytes, "n1"));
    ASSERT_EQ(put.size(), count);
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(put[i].ok()) << prefix << i << ": " << put[i].ToString();
    EXPECT_EQ(Where(*producer, prefix + "0"), std::vector<std::string>{"n1"});
    ExpectBatchBack(*decoder, prefix, count, bytes, static_cast<int>(count));   // its own node's copies
    ExpectBatchBack(*producer, prefix, count, bytes, static_cast<int>(count));  // another node's, same host
  }
  // A view from the producer's node reads n1's pages in place.
  auto view = producer->View("req17:L3");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(Read(view->data(), view->size()), Bytes(100'017, 20));
  EXPECT_EQ(producer->Remove("req17:L3").code(), Code::kFailedPrecondition) << "a view holds its object";
}

// Slabs in another node of this host's store (ClusterClient::UseSlabsOn):
// puts to that node go through its kvd's pages with no plan, the master
// learns of them from that node's events, and its decode reads them back
// byte-exact; a segment without a device, an unknown node and a node of
// another host are refused by name.
TEST_F(ClusterHighwayTest, SlabsOnAnotherNodeOfThisHostTakeItsPutsWithNoPlan) {
  StartCluster(/*one_host=*/true);
  auto producer = Client(0);
  auto decoder = Client(1);
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(decoder, nullptr);
  EXPECT_EQ(producer->UseSlabsOn("n1").code(), Code::kInvalidArgument);
  EXPECT_EQ(producer->UseSlabsOn("n9/0").code(), Code::kNotFound);
  ClusterClientOptions far_options;
  far_options.host_id = "another-host";
  auto elsewhere = Client(0, far_options);
  ASSERT_NE(elsewhere, nullptr);
  const Status far = elsewhere->UseSlabsOn("n1/0");
  EXPECT_EQ(far.code(), Code::kFailedPrecondition) << far.ToString();
  ASSERT_OK(producer->UseSlabsOn("n1/0", {.payload_bytes = 1 << 20, .header_slots = 64, .ring_records = 16}));

  constexpr size_t kCount = 24, kBytes = 100'000;  // 2.3 MB: the slab is traded on the way
  std::byte* src = Source(kCount, kBytes, 7);
  std::vector<DevicePut> puts = Puts("slab:L", src, kCount, kBytes, "n1");
  for (size_t i = 0; i < kCount; i += 2) puts[i].options.preferred_segment = "n1/0";
  for (const Status& s : producer->BatchPutFromDevice(puts)) ASSERT_OK(s);
  ASSERT_OK(producer->FlushSlabPuts());
  // The master hears of slab puts from n1's events, after the flush: wait
  // for every key (the odd ones took plans and are known at once).
  ASSERT_TRUE(WaitFor(
      [&] {
        for (size_t i = 0; i < kCount; ++i) {
          if (!producer->GetLocation("slab:L" + std::to_string(i)).ok()) return false;
        }
        return true;
      },
      10s));
  EXPECT_EQ(Where(*producer, "slab:L0"), std::vector<std::string>{"n1"});
  // n1's store shows the producer's slabs and what they announced.
  auto info = Store(1)->Info();
  ASSERT_OK(info.status());
  uint32_t announced = 0;
  for (const auto& slab : info->devices[0].slabs) announced += slab.slots_taken;
  EXPECT_GT(announced, 0u) << "no slab of n1's announced an object";
  EXPECT_EQ(Store(0)->Info()->devices[0].objects, 0u) << "nothing went into the producer's own node";
  ExpectBatchBack(*decoder, "slab:L", kCount, kBytes, 7);
}

TEST_F(ClusterHighwayTest, ALargeBatchIsOpenedInChunksAndAnsweredItemByItem) {
  StartCluster(/*one_host=*/true, /*store_pages=*/56);
  auto producer = Client(0);
  ASSERT_NE(producer, nullptr);
  // 24 objects of 3 MiB: over the bytes a batch opens in one call, so its
  // chunks are opened at once and each one's copies enqueued as it comes;
  // one key twice, in two chunks: the later item alone fails, refused
  // before any open.
  const size_t count = 24, bytes = 3u << 20;
  std::byte* src = Source(count, bytes, 60);
  std::vector<DevicePut> puts = Puts("big:", src, count, bytes, "n1");
  puts[20].key = puts[2].key;
  auto put = producer->BatchPutFromDevice(puts);
  ASSERT_EQ(put.size(), count);
  for (size_t i = 0; i < count; ++i) {
    if (i == 20) continue;
    EXPECT_TRUE(put[i].ok()) << i << ": " << put[i].ToString();
  }
  EXPECT_EQ(put[20].code(), Code::kAlreadyExists) << put[20].ToString();
  EXPECT_NE(put[20].ToString().find("names 'big:2' twice"), std::string::npos)
      << "the first item is put, whichever chunk the master hears first: " << put[20].ToString();
  std::byte* dst = Device(bytes);
  for (size_t i = 0; i < count; ++i) {
    if (i == 20) continue;
    auto got = producer->GetToDevice(puts[i].key, dst, bytes);
    ASSERT_TRUE(got.ok()) << puts[i].key << ": " << got.status().ToString();
    EXPECT_EQ(Read(dst, bytes), Bytes(bytes, 60 + static_cast<int>(i))) << puts[i].key;
  }
}

TEST_F(ClusterHighwayTest, LocalCopiesComeBackWithTheMasterStopped) {
  StartCluster(/*one_host=*/false);
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  std::byte* src = Source(40, 65'536, 3);
  auto put = client->BatchPutFromDevice(Puts("local:", src, 40, 65'536, "n0"));
  for (const Status& s : put) ASSERT_OK(s);
  // This node's copies need no master: one lease request to its kvd.
  ASSERT_TRUE(master_.Pause());
  ExpectBatchBack(*client, "local:", 40, 65'536, 3);
  auto view = client->View("local:7");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(Read(view->data(), view->size()), Bytes(65'536, 10));
  master_.Signal(SIGCONT);
}

TEST_F(ClusterHighwayTest, TwoHostsMoveBatchesOverUcxAndAViewIsRefused) {
  StartCluster(/*one_host=*/false);
  auto producer = Client(0);
  ASSERT_NE(producer, nullptr);
  auto cluster = producer->Cluster();
  ASSERT_TRUE(cluster.ok());
  for (const ClusterNodeStatus& n : cluster->nodes) EXPECT_EQ(n.path, n.node_id == "n0" ? "local" : "network");
  std::byte* src = Source(33, 300'001, 5);
  auto put = producer->BatchPutFromDevice(Puts("far:", src, 33, 300'001, "n1"));
  for (const Status& s : put) ASSERT_OK(s);
  ExpectBatchBack(*producer, "far:", 33, 300'001, 5);
  auto view = producer->View("far:0");
  EXPECT_EQ(view.status().code(), Code::kFailedPrecondition) << view.status().ToString();
}

TEST_F(ClusterHighwayTest, AStreamOrderedPutCommitsOffTheCallersThreadWhileReadersRace) {
  StartCluster(/*one_host=*/true);
  auto producer = Client(0);
  auto reader = Client(1);
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(reader, nullptr);
  const size_t count = 64, bytes = 50'000;
  std::byte* src = Source(count, bytes, 40);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, seen{0};
  // A reader that gets whatever is there: an object it gets is whole.
  std::thread racer([&] {
    std::byte* dst = Device(bytes);
    while (!stop.load()) {
      for (size_t i = 0; i < count; ++i) {
        auto got = reader->GetToDevice("async:" + std::to_string(i), dst, bytes);
        if (!got.ok()) continue;
        ++seen;
        if (Read(dst, bytes) != Bytes(bytes, 40 + static_cast<int>(i))) ++wrong;
      }
    }
  });
  auto pending = producer->PutFromDeviceAsync(Puts("async:", src, count, bytes, "n1"));
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  auto outcome = (*pending)->Wait();
  EXPECT_TRUE((*pending)->Done());
  ASSERT_EQ(outcome.size(), count);
  for (const Status& s : outcome) EXPECT_OK(s);
  WaitFor([&] { return seen.load() >= static_cast<int>(count); }, 20s);
  stop = true;
  racer.join();
  EXPECT_EQ(wrong.load(), 0);
  ExpectBatchBack(*reader, "async:", count, bytes, 40);
  // Dropped without a Wait: its destructor waits, so the sources may be
  // reused at once and every object is committed when it returns.
  {
    auto dropped = producer->PutFromDeviceAsync(Puts("dropped:", src, 8, bytes, "n1"));
    ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  }
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(reader->GetLocation("dropped:" + std::to_string(i)).ok()) << i;
  // One key twice: the second item fails alone, the first stands.
  std::vector<DevicePut> twice = Puts("twice:", src, 1, bytes, "n1");
  twice.push_back(twice[0]);
  auto again = producer->PutFromDeviceAsync(twice);
  ASSERT_TRUE(again.ok());
  auto results = (*again)->Wait();
  EXPECT_NE(results[0].ok(), results[1].ok()) << results[0].ToString() << " / " << results[1].ToString();
  ExpectBatchBack(*reader, "twice:", 1, bytes, 40);
}

TEST_F(ClusterHighwayTest, AProducerKilledMidBatchLeavesNothingReadyAndNothingHeld) {
  write_timeout_ = "1s";
  StartCluster(/*one_host=*/true);
  auto reader = Client(1);
  ASSERT_NE(reader, nullptr);
  Process producer = Process::Start({ReaderBinary(), address_, "n0", "dead", "open-batch", "70000", "n1", "8"},
                                    {{"NANOKV_HOST_ID", HostOf(0)}}, dir_.path() + "/producer.log");
  ASSERT_TRUE(WaitFor([&] { return producer.Log().find("written") != std::string::npos || !producer.Running(); },
                      30s))
      << producer.Log();
  ASSERT_TRUE(producer.Running()) << producer.Log();
  producer.Signal(SIGKILL);
  producer.Wait(10s);
  // Half the batch was written, none committed: no reader finds any of it,
  // and once write_timeout passes the node has none of it either.
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(reader->GetLocation("dead:" + std::to_string(i)).ok()) << i;
  }
  auto store = Store(1);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(WaitFor([&] {
    auto listed = store->List();
    return listed.ok() && listed->empty();
  }, 20s));
  // And the keys are free again.
  std::byte* src = Source(1, 70'000, 9);
  EXPECT_OK(reader->PutFromDevice("dead:0", src, 70'000, {.preferred_segment = "n1"}));
}

}  // namespace
}  // namespace nanokv::testing
