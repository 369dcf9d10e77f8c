// The data path between nodes under faults (issue 17 item 4), on real
// processes: a writer killed mid-put (nothing half-written becomes READY),
// an owner that stalls (the client's timeout, kUnavailable), and a hostile
// peer speaking raw UCP to a kvd's agent (each bad message ends that
// endpoint, never the agent).
#include <signal.h>

#include <deque>
#include <thread>

#include "ipc/ucx/transfer_wire.h"
#include "ipc/ucx/ucx.h"
#include "libkv/cluster/remote_transfer.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

// A peer that speaks the transfer protocol by hand.
class RawPeer {
 public:
  // `hold`: rendezvous data is kept, never pulled (a peer that stops
  // reading: the agent's sends stay in flight).
  explicit RawPeer(const std::string& address, bool hold = false) : hold_(hold) {
    auto context = ucx::Context::Create();
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    if (!context.ok()) return;
    context_ = std::move(context).value();
    worker_ = std::move(ucx::Worker::Create(*context_)).value();
    for (uint16_t id : {ucx::kHelloReply, ucx::kPutReply, ucx::kGetData}) {
      EXPECT_OK(worker_->SetHandler(id, &RawPeer::OnReply, this));
    }
    auto to = ucx::ParseHostPort(address, "agent");
    EXPECT_TRUE(to.ok());
    auto ep = ucx::ConnectEndpoint(*worker_, *to, &RawPeer::OnError, this);
    EXPECT_TRUE(ep.ok()) << ep.status().ToString();
    ep_ = ep.ok() ? *ep : nullptr;
  }
  ~RawPeer() {
    if (worker_ == nullptr) return;
    for (void* descriptor : held_) ucx::ReleaseAmData(*worker_, descriptor);
    void* closing = ucx::CloseEndpoint(*worker_, ep_, true);
    (void)worker_->ProgressUntil([&] { return sends_ == 0 && ucx::RequestDone(closing); }, std::chrono::seconds(5),
                                 "close");
  }

  void Send(uint16_t id, std::string header, const void* data = nullptr, size_t bytes = 0) {
    // UCX reads the header until the send completes (ucx::SendAm): a send
    // still waiting for the endpoint's wire-up goes out during a later
    // progress, so the peer keeps every header it sent.
    headers_.push_back(std::move(header));
    ++sends_;
    Status sent = ucx::SendAm(ep_, id, headers_.back(), data, bytes, data != nullptr, &RawPeer::OnSent, this);
    if (!sent.ok()) --sends_;
  }
  // Until the agent ended this endpoint (true) or `timeout` passed.
  bool Ended(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return worker_->ProgressUntil([&] { return failed_; }, timeout, "ended").ok();
  }
  // The next reply's header, decoded (nullopt when none came).
  std::optional<transfer::v1::Reply> NextReply() {
    Status got = worker_->ProgressUntil([&] { return !replies_.empty() || failed_; }, std::chrono::seconds(10),
                                        "reply");
    if (!got.ok() || replies_.empty()) return std::nullopt;
    transfer::v1::Reply reply;
    reply.ParseFromString(replies_.front());
    replies_.erase(replies_.begin());
    return reply;
  }
  void Hello(const std::string& token = "") {
    transfer::v1::Hello hello;
    hello.set_protocol(ucx::kTransferProtocol);
    hello.set_token(token);
    Send(ucx::kHello, hello.SerializeAsString());
  }

 private:
  static void OnError(void* arg, ucp_ep_h, ucs_status_t) { static_cast<RawPeer*>(arg)->failed_ = true; }
  static void OnSent(void* request, ucs_status_t, void* arg) {
    ucx::RequestFree(request);
    --static_cast<RawPeer*>(arg)->sends_;
  }
  static ucs_status_t OnReply(void* arg, const void* header, size_t length, void* data, size_t,
                              const ucp_am_recv_param_t* param) {
    auto* peer = static_cast<RawPeer*>(arg);
    peer->replies_.emplace_back(static_cast<const char*>(header), length);
    const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (!rendezvous || !peer->hold_) return UCS_OK;  // any data is dropped
    peer->held_.push_back(data);
    return UCS_INPROGRESS;
  }

  const bool hold_;
  std::unique_ptr<ucx::Context> context_;
  std::unique_ptr<ucx::Worker> worker_;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
  int sends_ = 0;
  std::vector<std::string> replies_;
  std::deque<std::string> headers_;  // stable addresses: a deque never moves its elements on push_back
  std::vector<void*> held_;  // rendezvous data kept (hold), released at the end
};

class ClusterTransferFaultsTest : public ClusterFixture {};

TEST_F(ClusterTransferFaultsTest, AWriterKilledMidPutLeavesNothingReady) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(40));
  // A writer process putting 48 MiB objects into n1, stopped until n1 lists
  // one being written (chunks in flight), then killed.
  Process writer = Process::Start({ReaderBinary(), address_, "n0", "half", "put",
                                   std::to_string(48u << 20), "n1"},
                                  {}, dir_.path() + "/writer.log");
  ASSERT_TRUE(writer.started());
  std::string half;
  for (int tries = 0; tries < 300 && half.empty(); ++tries) {
    ASSERT_TRUE(writer.Pause());
    auto list = Store(1)->List();
    if (list.ok()) {
      for (const ObjectEntry& e : *list) {
        if (e.state == ObjectState::kWriting) half = e.key;
      }
    }
    if (half.empty()) {
      writer.Signal(SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_FALSE(half.empty()) << "no put of the writer was ever in flight:\n" << writer.Log();
  writer.Signal(SIGKILL);
  writer.Wait(std::chrono::seconds(10));
  // The object it was writing is not READY on n1, and the master knows it
  // only as a write in progress (until n1's write_timeout reclaims it): no
  // reader anywhere gets its half.
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->GetLocation(half).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(client->Get(half).status().code(), Code::kFailedPrecondition);
  auto store = Store(1);
  EXPECT_EQ(store->GetLocation(half).status().code(), Code::kFailedPrecondition);
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  for (const ObjectEntry& e : *list) {
    if (e.key == half) {
      EXPECT_EQ(e.state, ObjectState::kWriting);
    }
  }
}

TEST_F(ClusterTransferFaultsTest, AnOwnerKilledMidPutIsUnavailableAndNothingStays) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(24));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const std::string agent = DataAddress(*client, "n1");
  ASSERT_FALSE(agent.empty());
  // A plan on n1, its bytes going through a peer already connected to n1's
  // agent; n1 stops answering, then dies, while they are in flight.
  const auto data = Bytes(32u << 20, 9);
  auto plan = client->OpenForWrite("cut:put", data.size(), {.preferred_segment = "n1"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  cluster::RemoteTransfers peer("", std::chrono::seconds(30));
  auto warm = peer.Get({{"n1", agent, "cut:absent"}});  // a round trip: connected
  ASSERT_EQ(warm[0].status().code(), Code::kNotFound) << warm[0].status().ToString();
  ASSERT_TRUE(nodes_[1].process.Pause());
  std::vector<Status> cut;
  std::thread writer([&] { cut = peer.Put({{"n1", agent, plan->replicas[0].plan, data}}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it be in flight (not asserted)
  nodes_[1].process.Signal(SIGKILL);
  writer.join();
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].code(), Code::kUnavailable) << cut[0].ToString();
  // The master forgets the write with its node: nothing of it is READY
  // anywhere, and the key is free again.
  WaitNodeState("n1", "dead");
  EXPECT_FALSE(client->Commit(*plan).ok());
  EXPECT_EQ(client->GetLocation("cut:put").status().code(), Code::kNotFound);
}

TEST_F(ClusterTransferFaultsTest, AStalledOwnerTimesOutUnavailable) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  ClusterClientOptions options;
  options.request_timeout_ms = 1000;
  auto client = Client(0, options);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("stall:a", Bytes(8u << 20, 4), {.preferred_segment = "n1"}));
  ASSERT_TRUE(nodes_[1].process.Pause());
  auto got = client->Get("stall:a");
  nodes_[1].process.Signal(SIGCONT);
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().ToString().find("request_timeout_ms"), std::string::npos) << got.status().ToString();
  // The node is back (registered again, its objects with it): a fresh
  // endpoint, the bytes whole. Asked until it answers: the node may be
  // re-registering (its session may have lapsed while it was stopped) and a
  // get in between is refused as unavailable, as it should be.
  Result<std::vector<std::byte>> again = Status::Unavailable("not asked yet");
  ASSERT_TRUE(WaitFor([&] {
    again = client->Get("stall:a");
    return again.ok();
  }, std::chrono::seconds(20))) << again.status().ToString();
  EXPECT_TRUE(*again == Bytes(8u << 20, 4));
}

TEST_F(ClusterTransferFaultsTest, AHostilePeerEndsOnlyItsOwnEndpoint) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const auto data = Bytes(70'000, 6);
  ASSERT_OK(client->Put("host:ok", data, {.preferred_segment = "n1"}));
  const std::string agent = DataAddress(*client, "n1");
  ASSERT_FALSE(agent.empty());
  {  // A get before the hello.
    RawPeer peer(agent);
    transfer::v1::Get get;
    get.set_key("host:ok");
    peer.Send(ucx::kGet, get.SerializeAsString());
    EXPECT_TRUE(peer.Ended());
  }
  {  // A hello that does not parse.
    RawPeer peer(agent);
    peer.Send(ucx::kHello, std::string("\xff\xff\xff\x01garbage", 11));
    EXPECT_TRUE(peer.Ended());
  }
  auto plan = client->OpenForWrite("host:plan", 4096, {.preferred_segment = "n1"});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto& replica = plan->replicas[0];
  std::vector<std::byte> chunk(200, std::byte{1});
  {  // A put naming another epoch: refused, the endpoint lives on.
    RawPeer peer(agent);
    peer.Hello();
    auto hello = peer.NextReply();
    ASSERT_TRUE(hello.has_value());
    EXPECT_EQ(hello->code(), 0) << hello->message();
    transfer::v1::Put put;
    put.set_request_id(7);
    put.set_key(replica.plan.key);
    put.set_epoch(replica.plan.epoch + 1);
    peer.Send(ucx::kPut, put.SerializeAsString(), chunk.data(), chunk.size());
    auto refused = peer.NextReply();
    ASSERT_TRUE(refused.has_value());
    EXPECT_EQ(refused->code(), static_cast<int>(Code::kFailedPrecondition)) << refused->message();
    // ... and past the plan's end: refused, then that endpoint ends.
    put.set_epoch(replica.plan.epoch);
    put.set_offset(4000);
    peer.Send(ucx::kPut, put.SerializeAsString(), chunk.data(), chunk.size());
    auto outside = peer.NextReply();
    ASSERT_TRUE(outside.has_value());
    EXPECT_EQ(outside->code(), static_cast<int>(Code::kInvalidArgument)) << outside->message();
    EXPECT_TRUE(peer.Ended());
  }
  // Nothing of it landed as READY; the plan is still the writer's to revoke,
  // and the agent serves everyone else as before.
  EXPECT_EQ(Store(1)->GetLocation("host:plan").status().code(), Code::kFailedPrecondition);
  ASSERT_OK(client->Revoke(*plan));
  auto got = client->Get("host:ok");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == data);
}

TEST_F(ClusterTransferFaultsTest, AGreedyPeerIsBoundedAndItsLeasesEndWithIt) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  object_store_extra_ = "  lease_ttl: 120s\n";  // only the agent ends the leases within the test
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(24));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("greedy:a", Bytes(16u << 20, 3), {.preferred_segment = "n1"}));
  const std::string agent = DataAddress(*client, "n1");
  {
    // 100 gets on one endpoint that never reads: the agent keeps 64 in
    // flight (each a lease) and refuses the rest by name.
    RawPeer peer(agent, /*hold=*/true);
    peer.Hello();
    auto hello = peer.NextReply();
    ASSERT_TRUE(hello.has_value());
    transfer::v1::Get get;
    get.set_key("greedy:a");
    for (int i = 0; i < 100; ++i) {
      get.set_request_id(static_cast<uint64_t>(i + 1));
      peer.Send(ucx::kGet, get.SerializeAsString());
    }
    int refused = 0;
    for (int seen = 0; seen < 2000 && refused < 36; ++seen) {
      auto reply = peer.NextReply();
      if (!reply.has_value()) break;
      if (reply->code() == static_cast<int>(Code::kResourceExhausted)) {
        ++refused;
        EXPECT_NE(reply->message().find("gets already in flight"), std::string::npos) << reply->message();
      }
    }
    EXPECT_EQ(refused, 36);
    auto listed = Store(1)->List();
    ASSERT_TRUE(listed.ok());
    for (const ObjectEntry& e : *listed) {
      if (e.key == "greedy:a") {
        EXPECT_EQ(e.leases, 64u);
      }
    }
    EXPECT_EQ(client->Remove("greedy:a").code(), Code::kFailedPrecondition);  // leased
  }
  // The peer is gone: its 64 leases end with its endpoint.
  EXPECT_TRUE(WaitFor([&] { return client->Remove("greedy:a").ok(); }, std::chrono::seconds(15)));
}

}  // namespace
}  // namespace nanokv::testing
