// Device memory and caller's memory on the data path between nodes (issue
// 17): a put from device memory and a get into it go chunk by chunk through
// the client's pinned staging buffers (RemoteTransfers), a get into host
// memory lands where the caller says. On the host backend "device memory"
// is the backend's own mappings (it tells them from plain host memory), so
// the staging path runs here as it does on cuda (NANOKV_TEST_BACKEND).
#include <signal.h>

#include <cstring>
#include <thread>

#include "gpu/backend.h"
#include "libkv/cluster/remote_transfer.h"
#include "gpu/device_buffer.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

class ClusterTransferDeviceTest : public ClusterDeviceFixture {
 protected:
  // `bytes` of device memory holding `fill` (or Bytes(bytes, seed) when seed >= 0).
  std::byte* Device(size_t bytes, int seed, std::byte fill = std::byte{0xEE}) {
    gpu::DeviceBuffer* buffer = NewBuffer(bytes);
    if (buffer == nullptr) return nullptr;
    auto* at = static_cast<std::byte*>(buffer->get());
    const auto data = seed >= 0 ? Bytes(bytes, seed) : std::vector<std::byte>(bytes, fill);
    EXPECT_OK(backend_->Copy(at, data.data(), bytes, gpu::CopyKind::kHostToDevice));
    return at;
  }
};

TEST_F(ClusterTransferDeviceTest, DeviceBytesCrossNodesChunkByChunk) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(24));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  // One byte (an eager message), part of one 4 MiB chunk, and four chunks
  // with a short last one: each into n1 and back, byte-exact.
  int seed = 1;
  for (size_t bytes : {size_t{1}, (size_t{3} << 20) + 5, (size_t{13} << 20) + 7}) {
    const std::string key = "dev:" + std::to_string(bytes);
    std::byte* src = Device(bytes, seed);
    std::byte* dst = Device(bytes, -1);
    ASSERT_OK(client->PutFromDevice(key, src, bytes, {.preferred_segment = "n1"}));
    EXPECT_EQ(Where(*client, key), std::vector<std::string>{"n1"});
    auto got = client->GetToDevice(key, dst, bytes);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_EQ(*got, bytes);
    EXPECT_TRUE(Read(dst, bytes) == Bytes(bytes, seed)) << key;
    ++seed;
  }
  // No room: refused, nothing written there.
  const size_t bytes = (size_t{13} << 20) + 7;
  std::byte* small = Device(bytes, -1, std::byte{0x5A});
  auto refused = client->GetToDevice("dev:" + std::to_string(bytes), small, bytes - 1);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();
  EXPECT_TRUE(Read(small, bytes) == std::vector<std::byte>(bytes, std::byte{0x5A}));
  // Host memory is not a device pointer (the host backend tells): refused
  // before anything moves, and a put leaves nothing behind.
  if (Backend() == "host") {
    std::vector<std::byte> host(bytes);
    EXPECT_EQ(client->PutFromDevice("dev:host", host.data(), bytes, {.preferred_segment = "n1"}).code(),
              Code::kInvalidArgument);
    EXPECT_EQ(client->GetLocation("dev:host").status().code(), Code::kNotFound);
    EXPECT_EQ(client->GetToDevice("dev:" + std::to_string(bytes), host.data(), bytes).status().code(),
              Code::kInvalidArgument);
  }
}

TEST_F(ClusterTransferDeviceTest, ManyDeviceGetsAtOnceWaitForStagingBuffers) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(48));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  // Eight gets of three chunks each at once, four chunks in flight per get:
  // more chunks than the client's 16 staging buffers, so some wait.
  constexpr int kGets = 8;
  const size_t bytes = (size_t{9} << 20) + 3;
  auto location = [&](const std::string& key) {
    auto where = client->GetLocation(key);
    EXPECT_TRUE(where.ok()) << where.status().ToString();
    return where.ok() ? where->replicas.front() : Replica{};
  };
  std::vector<cluster::RemoteGetInto> gets;
  for (int i = 0; i < kGets; ++i) {
    const std::string key = "many:" + std::to_string(i);
    ASSERT_OK(client->Put(key, Bytes(bytes, 40 + i), {.preferred_segment = "n1"}));
    const Replica replica = location(key);
    ASSERT_FALSE(replica.data_address.empty());
    gets.push_back({{replica.node_id, replica.data_address, key}, {nullptr, Device(bytes, -1), backend_.get(), bytes}});
  }
  // One of them with too little room: refused alone.
  gets[3].to.capacity = bytes - 1;
  cluster::RemoteTransfers transfers("", std::chrono::seconds(10));
  auto got = transfers.GetInto(gets);
  ASSERT_EQ(got.size(), static_cast<size_t>(kGets));
  for (int i = 0; i < kGets; ++i) {
    if (i == 3) {
      EXPECT_EQ(got[i].status().code(), Code::kInvalidArgument) << got[i].status().ToString();
      continue;
    }
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
    EXPECT_EQ(*got[i], bytes);
    EXPECT_TRUE(Read(gets[i].to.device, bytes) == Bytes(bytes, 40 + i)) << i;
  }
  // The same transfers serve again: no buffer or chunk was left behind.
  gets[3].to.capacity = bytes;
  auto again = transfers.GetInto({gets[3]});
  ASSERT_TRUE(again[0].ok()) << again[0].status().ToString();
  EXPECT_TRUE(Read(gets[3].to.device, bytes) == Bytes(bytes, 43));
}

TEST_F(ClusterTransferDeviceTest, AnOwnerKilledMidDeviceGetsLeavesNoBufferBehind) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(100));
  ASSERT_NO_FATAL_FAILURE(StartNode(100));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  // The same eight objects on n1 and on n2, and eight device buffers.
  constexpr int kGets = 8;
  const size_t bytes = size_t{22} << 20;
  std::vector<cluster::RemoteGetInto> from_n1, from_n2;
  for (int i = 0; i < kGets; ++i) {
    const std::string key = "cut:" + std::to_string(i);
    const auto data = Bytes(bytes, 60 + i);
    ASSERT_OK(client->Put(key + ":n1", data, {.preferred_segment = "n1"}));
    ASSERT_OK(client->Put(key + ":n2", data, {.preferred_segment = "n2"}));
    std::byte* device = Device(bytes, -1);
    ASSERT_NE(device, nullptr);
    from_n1.push_back({{"n1", DataAddress(*client, "n1"), key + ":n1"}, {nullptr, device, backend_.get(), bytes}});
    from_n2.push_back({{"n2", DataAddress(*client, "n2"), key + ":n2"}, {nullptr, device, backend_.get(), bytes}});
  }
  // n1 stops, then dies, while its chunks are in flight, some of them
  // waiting here for a staging buffer.
  cluster::RemoteTransfers transfers("", std::chrono::seconds(20));
  std::vector<Result<uint64_t>> cut;
  std::thread reader([&] { cut = transfers.GetInto(from_n1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(40));  // in flight (not asserted)
  ASSERT_TRUE(nodes_[1].process.Pause());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  nodes_[1].process.Signal(SIGKILL);
  reader.join();
  ASSERT_EQ(cut.size(), static_cast<size_t>(kGets));
  for (int i = 0; i < kGets; ++i) {
    if (cut[i].ok()) {  // finished before the stop: whole
      EXPECT_TRUE(Read(from_n1[i].to.device, bytes) == Bytes(bytes, 60 + i)) << i;
    } else {
      EXPECT_EQ(cut[i].status().code(), Code::kUnavailable) << i << ": " << cut[i].status().ToString();
    }
  }
  // Every staging buffer came back: eight gets at once from n2 need them all.
  auto again = transfers.GetInto(from_n2);
  for (int i = 0; i < kGets; ++i) {
    ASSERT_TRUE(again[i].ok()) << i << ": " << again[i].status().ToString();
    EXPECT_TRUE(Read(from_n2[i].to.device, bytes) == Bytes(bytes, 60 + i)) << i;
  }
}

TEST_F(ClusterTransferDeviceTest, GetIntoLandsInTheCallersMemory) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const size_t bytes = (size_t{6} << 20) + 11;
  const auto data = Bytes(bytes, 9);
  ASSERT_OK(client->Put("into:there", data, {.preferred_segment = "n1"}));
  ASSERT_OK(client->Put("into:here", data, {.preferred_segment = "n0"}));
  for (const std::string key : {"into:there", "into:here"}) {
    std::vector<std::byte> out(bytes + 100, std::byte{0x77});
    auto got = client->GetInto(key, out);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    EXPECT_EQ(*got, bytes);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), out.begin())) << key;
    EXPECT_EQ(out[bytes], std::byte{0x77}) << "past the object: untouched";
    // Too small: refused, nothing copied.
    std::vector<std::byte> small(bytes - 1, std::byte{0x66});
    EXPECT_EQ(client->GetInto(key, small).status().code(), Code::kInvalidArgument);
    EXPECT_TRUE(small == std::vector<std::byte>(bytes - 1, std::byte{0x66})) << key;
  }
  EXPECT_EQ(client->GetInto("into:nothing", std::span<std::byte>()).status().code(), Code::kNotFound);
}

// Puts through slabs of the client's own node (ClusterClient::UseSlabs,
// issue 34): the items a slab takes land on this node with no request to
// the master or kvd, and the master learns of them from the node's events;
// an item for another node, or with two replicas, still takes the master's
// plans. Every object reads back byte-exact through the master.
TEST_F(ClusterTransferDeviceTest, SlabPutsLandOnThisNodeAndTheMasterLearnsOfThem) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->UseSlabs(0, {.payload_bytes = kPage, .header_slots = 64, .ring_records = 16}));
  std::vector<DevicePut> puts;
  std::vector<std::byte*> sources;
  constexpr int kLocal = 24;
  for (int i = 0; i < kLocal; ++i) {
    sources.push_back(Device(1000 + 997 * static_cast<size_t>(i), i + 1));
    ASSERT_NE(sources.back(), nullptr);
    const std::string segment = i % 3 == 0 ? "" : i % 3 == 1 ? "n0" : "n0/0";
    puts.push_back({"slab:" + std::to_string(i),
                    sources.back(),
                    1000 + 997 * static_cast<uint64_t>(i),
                    {.preferred_segment = segment}});
  }
  // The master's: another node, and two replicas.
  std::byte* remote = Device(5000, 99);
  puts.push_back({"planned:n1", remote, 5000, {.preferred_segment = "n1"}});
  puts.push_back({"planned:two", remote, 5000, {.preferred_segment = "", .replica_num = 2}});
  for (const Status& s : client->BatchPutFromDevice(puts)) EXPECT_OK(s);
  EXPECT_EQ(Where(*client, "planned:n1"), std::vector<std::string>{"n1"});
  ASSERT_OK(client->FlushSlabPuts());
  for (int i = 0; i < kLocal; ++i) {
    const std::string key = "slab:" + std::to_string(i);
    // The node's next event batch tells the master.
    ASSERT_TRUE(WaitFor([&] { return client->GetLocation(key).ok(); }, std::chrono::seconds(10))) << key;
    EXPECT_EQ(Where(*client, key), std::vector<std::string>{"n0"}) << key;
    auto got = client->Get(key);
    ASSERT_OK(got.status());
    EXPECT_TRUE(*got == Bytes(1000 + 997 * static_cast<size_t>(i), i + 1)) << key;
  }
}

}  // namespace
}  // namespace nanokv::testing
