// The master routes plans across real kvds: the preferred segment, the spread
// by free space, replicas on distinct nodes, per-key serialisation, batches,
// and the local path of ClusterClient (bytes through the owner's store).
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

class ClusterRoutingTest : public ClusterFixture {};

TEST_F(ClusterRoutingTest, ThePreferredSegmentIsHonoured) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  StartNode(8, "", 2);  // n1 has two devices
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto plan = client->OpenForWrite("pref:a" + std::to_string(i), 1000, {.preferred_segment = "n2"});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(plan->replicas.size(), 1u);
    EXPECT_EQ(plan->replicas[0].node_id, "n2");
    // The transfer agent's address as bound (the config asks 127.0.0.1:0).
    EXPECT_EQ(plan->replicas[0].data_address.rfind("127.0.0.1:", 0), 0u) << plan->replicas[0].data_address;
    EXPECT_NE(plan->replicas[0].data_address, "127.0.0.1:0");
    EXPECT_FALSE(plan->replicas[0].local);
    ASSERT_OK(client->Commit(*plan));
    EXPECT_EQ(Where(*client, "pref:a" + std::to_string(i)), std::vector<std::string>{"n2"});
  }
  // A node and a device: n1's last device (1 where it has two: the host
  // backend's simulated pair; 0 on a one-GPU machine), every time.
  auto cluster = client->Cluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  std::vector<ClusterDeviceStatus> n1_devices;
  for (const auto& node : cluster->nodes) {
    if (node.node_id == "n1") n1_devices = node.devices;
  }
  ASSERT_FALSE(n1_devices.empty());
  if (Backend() == "host") {
    ASSERT_EQ(n1_devices.size(), 2u);
  }
  const ClusterDeviceStatus& last = n1_devices.back();
  const std::string segment = "n1/" + std::to_string(last.device);
  for (int i = 0; i < 10; ++i) {
    auto plan = client->OpenForWrite("pref:b" + std::to_string(i), 1000, {.preferred_segment = segment});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->replicas[0].node_id, "n1");
    EXPECT_EQ(plan->replicas[0].plan.device, last.device);
    EXPECT_EQ(plan->replicas[0].plan.device_uuid, last.uuid);
    ASSERT_OK(client->Commit(*plan));
  }
  if (Backend() == "host") {
    EXPECT_EQ(last.uuid, "host-1");
  }
  auto location = client->GetLocation("pref:b3");
  ASSERT_TRUE(location.ok()) << location.status().ToString();
  EXPECT_EQ(location->replicas[0].device, last.device);
  EXPECT_EQ(location->replicas[0].device_uuid, last.uuid);
  // A node the master does not know: routed by hashing, not refused.
  auto elsewhere = client->OpenForWrite("pref:c", 1000, {.preferred_segment = "nowhere"});
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status().ToString();
  // Malformed segments are the caller's error.
  auto bad = client->OpenForWrite("pref:d", 1000, {.preferred_segment = "n1/99"});
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << bad.status().ToString();
  bad = client->OpenForWrite("pref:e", 1000, {.preferred_segment = "bad node"});
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << bad.status().ToString();
}

TEST_F(ClusterRoutingTest, TenThousandKeysSpreadByFreeSpace) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  ASSERT_NO_FATAL_FAILURE(StartNode(32));
  ASSERT_NO_FATAL_FAILURE(StartNode(48));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  // The stores' weights as the master sees them: free space below the high
  // watermark plus 1% of capacity (master/routing/router.h).
  auto cluster = client->Cluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  std::map<std::string, double> weight;
  double total = 0;
  for (const auto& node : cluster->nodes) {
    for (const auto& d : node.devices) {
      double w = static_cast<double>(d.capacity_bytes) * d.high_watermark - static_cast<double>(d.used_bytes) +
                 static_cast<double>(d.capacity_bytes) * 0.01;
      weight[node.node_id] += w;
      total += w;
    }
  }
  ASSERT_EQ(weight.size(), 3u);
  const int kKeys = 10'000;
  std::map<std::string, int> placed;
  std::vector<ClusterPlan> plans;
  for (int batch = 0; batch < kKeys / 500; ++batch) {
    std::vector<WriteRequest> requests;
    for (int i = 0; i < 500; ++i) requests.push_back({"spread:" + std::to_string(batch * 500 + i), 1, {}});
    auto results = client->BatchOpenForWrite(requests);
    ASSERT_EQ(results.size(), requests.size());
    for (auto& r : results) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ++placed[r->replicas[0].node_id];
      plans.push_back(std::move(*r));
    }
  }
  for (const auto& [node, w] : weight) {
    double fair = kKeys * w / total;
    EXPECT_NEAR(placed[node], fair, fair * 0.10) << "node " << node << " got " << placed[node] << " of " << kKeys
                                                 << ", fair is " << fair;
  }
  // Revoked in batches: nothing is left written on any node.
  for (size_t i = 0; i < plans.size(); i += 1000) {
    std::vector<ClusterPlan> part(plans.begin() + static_cast<long>(i),
                                  plans.begin() + static_cast<long>(std::min(plans.size(), i + 1000)));
    for (const Status& s : client->BatchRevoke(part)) EXPECT_OK(s);
  }
  for (size_t n = 0; n < 3; ++n) {
    auto listed = Store(n)->List();
    ASSERT_TRUE(listed.ok());
    EXPECT_TRUE(listed->empty()) << "n" << n << " still holds " << listed->size() << " objects";
  }
  EXPECT_EQ(client->Cluster()->writes_in_progress, 0u);
}

TEST_F(ClusterRoutingTest, ReplicasGoToDistinctNodes) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const auto bytes = Bytes(5000, 3);
  auto plan = client->OpenForWrite("rep:3", bytes.size(), {.preferred_segment = "", .replica_num = 3});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->replicas.size(), 3u);
  std::set<std::string> nodes;
  for (const ReplicaPlan& r : plan->replicas) {
    nodes.insert(r.node_id);
    // Each copy's bytes go in on its own node, through that node's kvd.
    size_t n = static_cast<size_t>(r.node_id[1] - '0');
    ASSERT_OK(Store(n)->CopyIn(r.plan, bytes));
  }
  EXPECT_EQ(nodes.size(), 3u);
  ASSERT_OK(client->Commit(*plan));
  auto location = client->GetLocation("rep:3");
  ASSERT_TRUE(location.ok()) << location.status().ToString();
  ASSERT_EQ(location->replicas.size(), 3u);
  EXPECT_EQ(location->replicas[0].node_id, "n0") << "nearest first: the client's node";
  EXPECT_TRUE(location->replicas[0].local);
  EXPECT_EQ(location->bytes_total, bytes.size());
  // Read on each node: the same bytes.
  for (size_t n = 0; n < 3; ++n) {
    auto got = Store(n)->Get("rep:3");
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, bytes);
  }
  // More copies than nodes: best effort, one per node, and the location says so.
  auto five = client->OpenForWrite("rep:5", 100, {.preferred_segment = "", .replica_num = 5});
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  EXPECT_EQ(five->replicas.size(), 3u);
  ASSERT_OK(client->Commit(*five));
  EXPECT_EQ(Where(*client, "rep:5").size(), 3u);
  // Removal takes every copy, from every node.
  ASSERT_OK(client->Remove("rep:3"));
  EXPECT_EQ(client->GetLocation("rep:3").status().code(), Code::kNotFound);
  for (size_t n = 0; n < 3; ++n) EXPECT_EQ(Store(n)->GetLocation("rep:3").status().code(), Code::kNotFound);
}

TEST_F(ClusterRoutingTest, ConflictingOpensAreSerialised) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  auto first = client->OpenForWrite("ser:k", 100);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = client->OpenForWrite("ser:k", 100);
  EXPECT_EQ(second.status().code(), Code::kFailedPrecondition) << second.status().ToString();
  EXPECT_NE(second.status().ToString().find("being written"), std::string::npos) << second.status().ToString();
  ASSERT_OK(client->Revoke(*first));
  // Revoked: the key is free again; committed: it exists.
  auto third = client->OpenForWrite("ser:k", 100);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(client->Commit(*first).code(), Code::kNotFound) << "an old write's id commits nothing";
  ASSERT_OK(client->Commit(*third));
  EXPECT_EQ(client->Commit(*third).code(), Code::kNotFound) << "commit twice";
  EXPECT_EQ(client->OpenForWrite("ser:k", 100).status().code(), Code::kAlreadyExists);
  ASSERT_OK(client->Remove("ser:k"));
  EXPECT_EQ(client->Remove("ser:k").code(), Code::kNotFound);

  // Eight clients open one key at the same moment: exactly one gets it.
  std::vector<std::unique_ptr<ClusterClient>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(Client(0));
  std::atomic<int> won{0}, refused{0};
  std::vector<std::thread> threads;
  for (auto& c : clients) {
    threads.emplace_back([&, c = c.get()] {
      auto plan = c->OpenForWrite("ser:race", 100);
      if (plan.ok()) ++won;
      if (plan.status().code() == Code::kFailedPrecondition) ++refused;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(won.load(), 1);
  EXPECT_EQ(refused.load(), 7);
}

TEST_F(ClusterRoutingTest, BatchesAnswerEachItem) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("batch:exists", Bytes(10, 1), {.preferred_segment = "n0"}));
  std::vector<WriteRequest> requests = {{"batch:a", 10, {}}, {"bad key", 10, {}}, {"batch:exists", 10, {}},
                                        {"batch:b", 0, {}}, {"batch:c", 10, {.preferred_segment = "", .replica_num = 2}}};
  auto plans = client->BatchOpenForWrite(requests);
  ASSERT_EQ(plans.size(), 5u);
  EXPECT_TRUE(plans[0].ok()) << plans[0].status().ToString();
  EXPECT_EQ(plans[1].status().code(), Code::kInvalidArgument);
  EXPECT_EQ(plans[2].status().code(), Code::kAlreadyExists);
  EXPECT_EQ(plans[3].status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(plans[4].ok()) << plans[4].status().ToString();
  EXPECT_EQ(plans[4]->replicas.size(), 2u);
  auto commits = client->BatchCommit({*plans[0], *plans[4]});
  for (const Status& s : commits) EXPECT_OK(s);
  auto located = client->BatchGetLocation({"batch:a", "batch:c", "batch:none", "batch:exists"});
  EXPECT_TRUE(located[0].ok());
  EXPECT_EQ(located[1]->replicas.size(), 2u);
  EXPECT_EQ(located[2].status().code(), Code::kNotFound);
  EXPECT_TRUE(located[3].ok());
  auto removed = client->BatchRemove({"batch:a", "batch:none", "batch:c"});
  EXPECT_OK(removed[0]);
  EXPECT_EQ(removed[1].code(), Code::kNotFound);
  EXPECT_OK(removed[2]);
  // Puts and gets in batches, on this node.
  std::vector<std::vector<std::byte>> values = {Bytes(100, 1), Bytes(3 * kPage + 5, 2), Bytes(1, 3)};
  std::vector<PutRequest> puts;
  for (size_t i = 0; i < values.size(); ++i) {
    puts.push_back({"batch:put" + std::to_string(i), values[i], {.preferred_segment = "n0"}});
  }
  for (const Status& s : client->BatchPut(puts)) EXPECT_OK(s);
  auto got = client->BatchGet({"batch:put0", "batch:put1", "batch:put2"});
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
    EXPECT_EQ(*got[i], values[i]);
  }
}

TEST_F(ClusterRoutingTest, TheLocalPathMovesBytesAndAnotherNodesThroughItsAgent) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const auto bytes = Bytes(2 * kPage + 77, 9);
  ASSERT_OK(client->Put("local:1", bytes, {.preferred_segment = "n0"}));
  auto got = client->Get("local:1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, bytes);
  // The node's own engines see the same object through kvd.
  auto direct = Store(0)->Get("local:1");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(*direct, bytes);
  // A plan's payload is mapped here for kernels.
  auto plan = client->OpenForWrite("local:2", 4096, {.preferred_segment = "n0"});
  ASSERT_TRUE(plan.ok());
  auto pointer = client->PayloadPointer(plan->replicas[0]);
  ASSERT_TRUE(pointer.ok()) << pointer.status().ToString();
  ASSERT_OK(client->Revoke(*plan));
  // Another node's copy: the bytes go through n1's transfer agent
  // (cluster_transfer_test.cc has the rest), and n1's engines read them.
  ASSERT_OK(client->Put("remote:1", bytes, {.preferred_segment = "n1"}));
  auto there = Store(1)->Get("remote:1");
  ASSERT_TRUE(there.ok()) << there.status().ToString();
  EXPECT_EQ(*there, bytes);
  // Written on n1 by an engine there, read from n0 through n1's agent.
  ASSERT_OK(Store(1)->Put("remote:2", bytes));
  bool known = WaitFor([&] { return client->GetLocation("remote:2").ok(); }, std::chrono::seconds(10));
  ASSERT_TRUE(known) << "the master never heard of an object committed on n1";
  EXPECT_EQ(Where(*client, "remote:2"), std::vector<std::string>{"n1"});
  auto fetched = client->Get("remote:2");
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  EXPECT_EQ(*fetched, bytes);
  // Another node's pages are not mapped here: no pointer into them.
  auto other = client->OpenForWrite("remote:3", 10, {.preferred_segment = "n1"});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(client->PayloadPointer(other->replicas[0]).status().code(), Code::kUnimplemented);
  ASSERT_OK(client->Revoke(*other));
}

}  // namespace
}  // namespace nanokv::testing
