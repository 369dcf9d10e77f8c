// The data path between nodes (issue 17): a master and two or three kvds as
// separate nodes on this machine, each kvd's transfer agent on 127.0.0.1
// (port 0), UCX over loopback TCP (cluster_processes.h sets UCX_TLS), and
// ClusterClients in the test moving bytes to and from other nodes' stores.
// Faults are real: a SIGKILLed owner, a SIGKILLed reader process, a peer
// with the wrong token.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "gpu/backend.h"
#include "libkv/cluster/remote_transfer.h"
#include "gpu/device_buffer.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

class ClusterTransferTest : public ClusterFixture {
 protected:
  // A put from node `from` into a plan on node `to`, then the same bytes
  // back through a get on node `reader`.
  void RoundTrip(size_t from, size_t to, size_t reader, const std::string& key, size_t bytes, int seed) {
    auto writer = Client(from);
    ASSERT_NE(writer, nullptr);
    const std::vector<std::byte> data = Bytes(bytes, seed);
    ASSERT_OK(writer->Put(key, data, {.preferred_segment = nodes_[to].id}));
    ASSERT_EQ(Where(*writer, key), std::vector<std::string>{nodes_[to].id});
    auto getter = Client(reader);
    ASSERT_NE(getter, nullptr);
    auto got = getter->Get(key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), bytes) << key;
    EXPECT_TRUE(*got == data) << key << ": the bytes differ";
  }

  // The object `key` as node `node`'s kvd lists it (leases included).
  std::optional<ObjectEntry> Listed(size_t node, const std::string& key) {
    auto store = Store(node);
    if (store == nullptr) return std::nullopt;
    auto list = store->List();
    if (!list.ok()) return std::nullopt;
    for (const ObjectEntry& e : *list) {
      if (e.key == key) return e;
    }
    return std::nullopt;
  }
};

TEST_F(ClusterTransferTest, PutThenGetAcrossNodesIsByteExact) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(24));
  // 1 byte up to several 4 MiB chunks with a ragged tail.
  const std::vector<size_t> sizes = {1, 255, 4096, (1u << 20) + 7, 4u << 20, (9u << 20) + 3};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string key = "x:" + std::to_string(sizes[i]);
    ASSERT_NO_FATAL_FAILURE(RoundTrip(0, 1, 0, key, sizes[i], static_cast<int>(i)));
    // The owner's own engines read the same bytes from its pages (READY there).
    auto store = Store(1);
    ASSERT_NE(store, nullptr);
    auto local = store->Get(key);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    EXPECT_TRUE(*local == Bytes(sizes[i], static_cast<int>(i))) << key;
  }
  // The owner's transfer agent said which mode it moves bytes in: in its
  // log, and to the master (kvctl cluster).
  EXPECT_NE(nodes_[1].process.Log().find("mode staging"), std::string::npos);
  auto writer = Client(0);
  ASSERT_NE(writer, nullptr);
  auto cluster = writer->Cluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  for (const auto& n : cluster->nodes) EXPECT_EQ(n.data_mode, "staging") << n.node_id;
}

TEST_F(ClusterTransferTest, ThreeNodesBatchesAndTwoClientsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  // A batch from n0 spread over n1 and n2, read back as a batch from n1
  // (one object of its own, the rest n2's).
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  std::vector<std::vector<std::byte>> data;
  std::vector<PutRequest> puts;
  std::vector<std::string> keys;
  for (int i = 0; i < 8; ++i) {
    data.push_back(Bytes(static_cast<size_t>(100'000 * (i + 1) + i), i));
    keys.push_back("batch:" + std::to_string(i));
  }
  for (int i = 0; i < 8; ++i) {
    puts.push_back({keys[static_cast<size_t>(i)], data[static_cast<size_t>(i)],
                    {.preferred_segment = i == 0 ? "n1" : "n2"}});
  }
  for (const Status& s : client->BatchPut(puts)) ASSERT_OK(s);
  auto reader = Client(1);
  ASSERT_NE(reader, nullptr);
  auto got = reader->BatchGet(keys);
  ASSERT_EQ(got.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << keys[i] << ": " << got[i].status().ToString();
    EXPECT_TRUE(*got[i] == data[i]) << keys[i];
  }
  // Two clients of two nodes, each writing into and reading from the
  // other nodes' stores at the same time.
  auto work = [&](size_t node, const std::string& to, int seed, std::vector<Status>* out) {
    auto c = Client(node);
    if (c == nullptr) return;
    for (int i = 0; i < 4; ++i) {
      const std::string key = "conc:" + std::to_string(node) + ":" + std::to_string(i);
      const auto bytes = Bytes((3u << 20) + static_cast<size_t>(i), seed + i);
      out->push_back(c->Put(key, bytes, {.preferred_segment = to}));
      auto back = c->Get(key);
      out->push_back(!back.ok() ? back.status()
                                : *back == bytes ? Status::OK()
                                                 : Status::Internal(key + ": the bytes differ"));
    }
  };
  std::vector<Status> a, b;
  std::thread one(work, 0, "n2", 10, &a);
  std::thread two(work, 1, "n2", 20, &b);
  one.join();
  two.join();
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (const Status& s : a) EXPECT_OK(s);
  for (const Status& s : b) EXPECT_OK(s);
}

TEST_F(ClusterTransferTest, ARemoveRightAfterAGetFindsNoLeaseLeft) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  // The get's last chunk is acknowledged to n1's agent before the call
  // returns, so the agent's read lease is gone by the time the remove
  // reaches n1 (it was refused there now and then, in CI).
  std::vector<std::byte> out(3u << 20);
  for (int i = 0; i < 40; ++i) {
    const std::string key = "gone:" + std::to_string(i);
    const auto data = Bytes((1u << 20) + static_cast<size_t>(i), i);
    ASSERT_OK(client->Put(key, data, {.preferred_segment = "n1"}));
    if (i % 2 == 0) {
      auto got = client->GetInto(key, out);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
    } else {
      auto got = client->Get(key);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
    }
    ASSERT_OK(client->Remove(key));
  }
}

TEST_F(ClusterTransferTest, APeerWithoutTheTokenIsRefused) {
  const std::string token = dir_.path() + "/token";
  std::ofstream(token) << "cluster-secret-17\n";
  chmod(token.c_str(), 0600);
  admin_.token_file = token;
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--token-file", token}));
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  token_file: " + token + "\n"));
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  token_file: " + token + "\n"));
  ClusterClientOptions with_token;
  with_token.token_file = token;
  auto client = Client(0, with_token);
  ASSERT_NE(client, nullptr);
  const auto data = Bytes(5000, 3);
  ASSERT_OK(client->Put("tok:a", data, {.preferred_segment = "n1"}));
  const std::string n1 = DataAddress(*client, "n1");
  ASSERT_FALSE(n1.empty());
  // Straight at n1's agent: no token, another token, then the right one.
  for (const std::string& wrong : {std::string(), std::string("cluster-secret-18")}) {
    cluster::RemoteTransfers peer(wrong, std::chrono::seconds(10));
    auto got = peer.Get({{"n1", n1, "tok:a"}});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status().code(), Code::kPermissionDenied) << got[0].status().ToString();
    EXPECT_NE(got[0].status().message().find("token"), std::string::npos) << got[0].status().ToString();
  }
  cluster::RemoteTransfers peer("cluster-secret-17", std::chrono::seconds(10));
  auto got = peer.Get({{"n1", n1, "tok:a"}});
  ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
  EXPECT_TRUE(*got[0] == data);
  EXPECT_EQ(peer.ModeOf(n1), "staging");
  // Nothing a refused peer did stays: the object is still whole.
  auto again = client->Get("tok:a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(*again == data);
}

TEST_F(ClusterTransferTest, AnOwnerKilledMidGetIsUnavailableAndAReplicaServes) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const auto only = Bytes(12u << 20, 1);
  const auto twice = Bytes(6u << 20, 2);
  ASSERT_OK(client->Put("own:only", only, {.preferred_segment = "n1"}));
  ASSERT_OK(client->Put("own:twice", twice, {.preferred_segment = "n1", .replica_num = 2}));
  auto location = client->GetLocation("own:twice");
  ASSERT_TRUE(location.ok()) << location.status().ToString();
  ASSERT_EQ(location->replicas.size(), 2u);
  // Connected to n1 already; then n1 stops answering and dies while a get
  // waits on it.
  auto warm = client->Get("own:only");
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  nodes_[1].process.Signal(SIGSTOP);
  Result<std::vector<std::byte>> cut = Status::Internal("not run");
  std::thread reader([&] { cut = client->Get("own:only"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it be in flight (not asserted)
  nodes_[1].process.Signal(SIGKILL);
  reader.join();
  EXPECT_EQ(cut.status().code(), Code::kUnavailable) << cut.status().ToString();
  // The object with a second copy is still read, byte-exact, from it.
  auto survived = client->Get("own:twice");
  ASSERT_TRUE(survived.ok()) << survived.status().ToString();
  EXPECT_TRUE(*survived == twice);
}

TEST_F(ClusterTransferTest, AReaderKilledMidGetEndsTheOwnersLease) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  object_store_extra_ = "  lease_ttl: 120s\n";  // only the agent can end the lease within the test
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(40));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("lease:big", Bytes(64u << 20, 5), {.preferred_segment = "n1"}));
  // A reader process on n0 reading the object over and over, stopped until
  // n1 lists a lease on it (a get in flight), then killed.
  Process reader = Process::Start({ReaderBinary(), address_, "n0", "lease:big"}, {},
                                  dir_.path() + "/reader.log");
  ASSERT_TRUE(reader.started());
  bool leased = false;
  for (int tries = 0; tries < 200 && !leased; ++tries) {
    reader.Signal(SIGSTOP);
    auto entry = Listed(1, "lease:big");
    leased = entry.has_value() && entry->leases > 0;
    if (!leased) {
      reader.Signal(SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_TRUE(leased) << "no get of the reader was ever in flight:\n" << reader.Log();
  reader.Signal(SIGKILL);
  reader.Wait(std::chrono::seconds(10));
  // The owner's agent saw the endpoint fail and ended the lease: the object
  // can be removed (the lease_ttl is far longer than this wait).
  bool removed = WaitFor([&] { return client->Remove("lease:big").ok(); }, std::chrono::seconds(15));
  EXPECT_TRUE(removed) << "the lease of the killed reader was never released";
  EXPECT_FALSE(Listed(1, "lease:big").has_value());
}

TEST_F(ClusterTransferTest, AReadOutlivingLeaseTtlKeepsItsLease) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  object_store_extra_ = "  lease_ttl: 2s\n";
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(40));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("slow:big", Bytes(64u << 20, 6), {.preferred_segment = "n1"}));
  // A reader stopped mid-get for longer than lease_ttl: the agent renews
  // its lease (at half the ttl), so the object cannot be removed or evicted
  // under the bytes still to send.
  Process reader = Process::Start({ReaderBinary(), address_, "n0", "slow:big"}, {}, dir_.path() + "/reader.log");
  ASSERT_TRUE(reader.started());
  bool leased = false;
  for (int tries = 0; tries < 200 && !leased; ++tries) {
    reader.Signal(SIGSTOP);
    auto entry = Listed(1, "slow:big");
    leased = entry.has_value() && entry->leases > 0;
    if (!leased) {
      reader.Signal(SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_TRUE(leased) << "no get of the reader was ever in flight:\n" << reader.Log();
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past lease_ttl (2s)
  auto entry = Listed(1, "slow:big");
  ASSERT_TRUE(entry.has_value());
  EXPECT_GT(entry->leases, 0u) << "the read's lease expired under it";
  EXPECT_EQ(client->Remove("slow:big").code(), Code::kFailedPrecondition);
  reader.Signal(SIGKILL);
  reader.Wait(std::chrono::seconds(10));
  EXPECT_TRUE(WaitFor([&] { return client->Remove("slow:big").ok(); }, std::chrono::seconds(15)));
}

}  // namespace
}  // namespace nanokv::testing
