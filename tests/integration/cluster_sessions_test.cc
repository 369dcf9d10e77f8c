// Node sessions against a peer that holds the cluster's credentials but is
// not the node it claims: one live session per node id, ids of dead
// sessions freed, a session's copies leaving the index (and its memory)
// with it, and the objects one node may have in the index. The fake nodes
// speak the NodeSession stream raw; the real ones are kvds.
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_protocol.h"
#include "ipc/proto/master.grpc.pb.h"
#include "master/index/master_index.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

namespace v1 = master::v1;

// One node session on the raw wire, as a peer with the right protocol (and
// no token: the master under test asks none) may open it.
class FakeNode {
 public:
  explicit FakeNode(const std::shared_ptr<grpc::Channel>& channel) : stub_(v1::Master::NewStub(channel)) {
    context_.AddMetadata(master::kProtocolKey, std::to_string(master::kProtocolVersion));
    stream_ = stub_->NodeSession(&context_);
  }
  ~FakeNode() { End(); }

  // Registers as `id`: OK once welcomed, else how the master ended it.
  Status Register(const std::string& id) {
    v1::NodeMessage hello;
    hello.mutable_register_()->set_node_id(id);
    v1::DeviceReport* device = hello.mutable_register_()->add_devices();
    device->set_device(0);
    device->set_capacity_bytes(1 << 20);
    device->set_high_watermark(0.95);
    device->set_low_watermark(0.85);
    v1::MasterMessage welcome;
    if (stream_->Write(hello) && stream_->Read(&welcome) && welcome.has_welcome()) return Status::OK();
    return Finish();
  }

  // READY events for `keys` in batches, the last with snapshot_done.
  bool SendReady(const std::vector<std::string>& keys) {
    v1::NodeMessage batch;
    for (size_t i = 0; i <= keys.size(); ++i) {
      const bool last = i == keys.size();
      if (!last) {
        v1::ObjectEvent* e = batch.mutable_events()->add_events();
        e->set_kind(v1::ObjectEvent::READY);
        e->set_key(keys[i]);
        e->set_epoch(static_cast<uint32_t>(i + 1));
        e->set_bytes_total(4096);
      }
      if (last) batch.mutable_events()->set_snapshot_done(true);
      if (last || static_cast<size_t>(batch.events().events_size()) == master::kMaxEventsPerBatch) {
        if (!stream_->Write(batch)) return false;
        batch.Clear();
      }
    }
    return true;
  }

  // Ends the session from this side (as a peer that goes away).
  void End() {
    if (finished_) return;
    context_.TryCancel();
    (void)Finish();
  }

 private:
  Status Finish() {
    finished_ = true;
    return master::FromGrpcStatus(stream_->Finish(), "master");
  }

  std::unique_ptr<v1::Master::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::NodeMessage, v1::MasterMessage>> stream_;
  bool finished_ = false;
};

class ClusterSessionsTest : public ClusterFixture {
 protected:
  std::shared_ptr<grpc::Channel> Channel() { return grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()); }

  ClusterStatus Overview() {
    auto client = Client(nodes_.size(), admin_);
    auto status = client != nullptr ? client->Cluster() : Result<ClusterStatus>(nanokv::Status::Unavailable("no client"));
    EXPECT_TRUE(status.ok()) << status.status().ToString();
    return status.ok() ? *status : ClusterStatus{};
  }

  uint64_t ObjectsOf(const std::string& id) {
    for (const auto& n : Overview().nodes) {
      if (n.node_id == id) return n.objects;
    }
    return 0;
  }
};

TEST_F(ClusterSessionsTest, ALiveNodesIdIsNotTakenBySecondSession) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("s:1", Bytes(1000, 1), {.preferred_segment = "n0"}));
  ASSERT_EQ(Where(*client, "s:1"), std::vector<std::string>{"n0"});

  // A peer registers as n0 while n0's session lives: refused, naming why.
  FakeNode impostor(Channel());
  nanokv::Status refused = impostor.Register("n0");
  EXPECT_EQ(refused.code(), Code::kAlreadyExists) << refused.ToString();
  EXPECT_NE(refused.ToString().find("has a live session"), std::string::npos) << refused.ToString();
  // n0 keeps its place: readers still find its object there and read it.
  EXPECT_EQ(NodeState("n0"), "alive");
  EXPECT_EQ(Where(*client, "s:1"), std::vector<std::string>{"n0"});
  auto bytes = client->Get("s:1");
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, Bytes(1000, 1));
  EXPECT_EQ(master_.Log().find("node n0 is dead"), std::string::npos) << master_.Log();
}

TEST_F(ClusterSessionsTest, IdsOfDeadSessionsAreFreedForARealNode) {
  // A long lease: the fake sessions live until they end, heartbeat or not.
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--lease-ttl", "60s"}));
  // Every slot of the master's node table taken by a live fake session.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 16; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("nanokv.test.connection", i);  // a connection of its own
    channels.push_back(grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args));
  }
  std::vector<std::unique_ptr<FakeNode>> fakes;
  for (size_t i = 0; i < master::kMaxNodes; ++i) {
    fakes.push_back(std::make_unique<FakeNode>(channels[i % channels.size()]));
    nanokv::Status registered = fakes.back()->Register("fake" + std::to_string(i));
    ASSERT_TRUE(registered.ok()) << "fake node " << i << ": " << registered.ToString();
  }
  // One more: refused while they all live, naming the limit.
  {
    FakeNode extra(Channel());
    nanokv::Status refused = extra.Register("one-too-many");
    EXPECT_EQ(refused.code(), Code::kResourceExhausted) << refused.ToString();
    EXPECT_NE(refused.ToString().find(std::to_string(master::kMaxNodes) + " nodes"), std::string::npos)
        << refused.ToString();
  }
  // A real node comes while they live: refused, it keeps trying.
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "", 1, false));
  bool told = WaitFor([&] { return nodes_[0].process.Log().find("ResourceExhausted") != std::string::npos; },
                      std::chrono::seconds(20));
  EXPECT_TRUE(told) << nodes_[0].process.Log();
  // The fakes go away: their ids are freed and the real node gets in.
  // (4096 sessions ending take the master a while under ThreadSanitizer.)
  for (auto& fake : fakes) fake->End();
  ASSERT_NO_FATAL_FAILURE(WaitNodeState("n0", "alive", std::chrono::seconds(90)));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("after:1", Bytes(100, 3), {.preferred_segment = "n0"}));
  EXPECT_EQ(Where(*client, "after:1"), std::vector<std::string>{"n0"});
  EXPECT_LE(Overview().nodes.size(), master::kMaxNodes);
}

TEST_F(ClusterSessionsTest, WhatASessionAddedLeavesWithIt) {
  // A long lease: under ThreadSanitizer on a busy machine the master took
  // over a second between the fake's batches of 200k events and declared it
  // dead mid-send. Its end is what this test waits for, not its silence.
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--lease-ttl", "30s"}));
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK(client->Put("real:" + std::to_string(i), Bytes(100, i), {.preferred_segment = "n0"}));
  }
  const ClusterStatus before = Overview();
  ASSERT_EQ(before.objects, 8u);

  // A session tells of 200k objects it does not have, then goes away.
  constexpr size_t kFake = 200'000;
  std::vector<std::string> keys;
  for (size_t i = 0; i < kFake; ++i) keys.push_back("fake:" + std::to_string(i) + ":padding-to-forty-bytes");
  {
    FakeNode fake(Channel());
    ASSERT_OK(fake.Register("liar"));
    ASSERT_TRUE(fake.SendReady(keys));
    ASSERT_NO_FATAL_FAILURE(WaitNodeState("liar", "alive"));
    const ClusterStatus full = Overview();
    EXPECT_EQ(full.objects, before.objects + kFake);
    EXPECT_GT(full.index_bytes, before.index_bytes + (10u << 20)) << before.index_bytes;
    fake.End();
  }
  ASSERT_NO_FATAL_FAILURE(WaitNodeState("liar", "dead"));
  // Its copies are gone (as the master drops them: "dead" is said from the
  // start), and the memory they took with them.
  ClusterStatus after;
  bool gone = WaitFor([&] { return (after = Overview()).objects == before.objects; }, std::chrono::seconds(20));
  ASSERT_TRUE(gone) << after.objects << " objects, " << before.objects << " before";
  EXPECT_LE(after.index_bytes, before.index_bytes + (64u << 10)) << "before " << before.index_bytes;
  EXPECT_EQ(client->GetLocation(keys[0]).status().code(), Code::kNotFound);
  EXPECT_EQ(Where(*client, "real:3"), std::vector<std::string>{"n0"});
}

TEST_F(ClusterSessionsTest, ANodeHasAtMostMaxObjectsPerNodeInTheIndex) {
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--max-objects-per-node", "3"}));
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(client->Put("k:" + std::to_string(i), Bytes(100, i), {.preferred_segment = "n0"}));
  }
  // No plan goes to a node at its limit: said, with the key to raise.
  nanokv::Status full = client->Put("k:3", Bytes(100, 3), {.preferred_segment = "n0"});
  EXPECT_EQ(full.code(), Code::kResourceExhausted) << full.ToString();
  EXPECT_NE(full.ToString().find("max_objects_per_node"), std::string::npos) << full.ToString();
  // An object the node's own engine stores is not indexed past it, and the
  // master says so once, naming the key.
  ASSERT_OK(Store(0)->Put("local:1", Bytes(100, 9)));
  bool warned = WaitFor([&] { return master_.Log().find("holds max_objects_per_node (3)") != std::string::npos; },
                        std::chrono::seconds(20));
  EXPECT_TRUE(warned) << master_.Log();
  EXPECT_EQ(client->GetLocation("local:1").status().code(), Code::kNotFound);
  EXPECT_EQ(ObjectsOf("n0"), 3u);
  // Room again once one leaves.
  ASSERT_OK(client->Remove("k:0"));
  ASSERT_OK(client->Put("k:4", Bytes(100, 4), {.preferred_segment = "n0"}));
  EXPECT_EQ(Where(*client, "k:4"), std::vector<std::string>{"n0"});

  // A session that tells of more: bounded alike.
  FakeNode fake(Channel());
  ASSERT_OK(fake.Register("liar"));
  ASSERT_TRUE(fake.SendReady({"a", "b", "c", "d", "e", "f"}));
  ASSERT_NO_FATAL_FAILURE(WaitNodeState("liar", "alive"));
  EXPECT_EQ(ObjectsOf("liar"), 3u);
}

}  // namespace
}  // namespace nanokv::testing
