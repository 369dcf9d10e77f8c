// Who may talk to the master and what it makes of bad input: the cluster
// token, TLS, malformed requests and node messages on the raw wire, and
// configs a master or a kvd refuses to start with.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include <grpcpp/grpcpp.h>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_channel.h"
#include "ipc/master/master_protocol.h"
#include "ipc/proto/master.grpc.pb.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

namespace v1 = master::v1;

class ClusterAccessTest : public ClusterFixture {
 protected:
  std::string WriteToken(const std::string& name, const std::string& token) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << token << "\n";
    chmod(path.c_str(), 0600);
    return path;
  }

  static ClusterClientOptions Token(const std::string& path) {
    ClusterClientOptions o;
    o.token_file = path;
    return o;
  }

  std::unique_ptr<v1::Master::Stub> RawStub() {
    return v1::Master::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  // A context with the protocol version `version` ("" none).
  static void Prepare(grpc::ClientContext* context, const std::string& version) {
    if (!version.empty()) context->AddMetadata(master::kProtocolKey, version);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  // A node session on the raw wire: sends `messages`, returns how it ended.
  Status RawSession(const std::vector<v1::NodeMessage>& messages) {
    auto stub = RawStub();
    grpc::ClientContext context;
    Prepare(&context, std::to_string(master::kProtocolVersion));
    auto stream = stub->NodeSession(&context);
    for (const auto& m : messages) {
      if (!stream->Write(m)) break;
    }
    v1::MasterMessage in;
    while (stream->Read(&in)) {
    }
    return master::FromGrpcStatus(stream->Finish(), "master");
  }

  // A kvd started with `config`, which it must refuse: its exit code and log.
  std::pair<int, std::string> RefusedStart(const std::vector<std::string>& argv) {
    Process p = Process::Start(argv, {}, dir_.path() + "/refused.log");
    auto code = p.Wait(std::chrono::seconds(20));
    return {code ? *code : -1, p.Log()};
  }
};

TEST_F(ClusterAccessTest, TheTokenIsRequiredOfClientsAndNodes) {
  const std::string token = WriteToken("token", "cluster-secret-1");
  admin_ = Token(token);
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--token-file", token}));
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  token_file: " + token + "\n"));
  auto client = Client(0, Token(token));
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("t:1", Bytes(100, 1), {.preferred_segment = "n0"}));
  // No token, or another one: refused, naming why.
  auto none = Client(0);
  Status refused = none->GetLocation("t:1").status();
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.ToString().find("asks for the cluster token"), std::string::npos) << refused.ToString();
  auto wrong = Client(0, Token(WriteToken("wrong", "cluster-secret-2")));
  refused = wrong->Put("t:2", Bytes(10, 2), {.preferred_segment = "n0"});
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.ToString().find("did not prove that it holds the cluster token"), std::string::npos)
      << "another token: the master cannot prove this one: " << refused.ToString();
  EXPECT_EQ(Store(0)->GetLocation("t:2").status().code(), Code::kNotFound);
  // A node with the wrong token never joins.
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  token_file: " + WriteToken("wrong2", "nope") + "\n", 1, false));
  bool told = WaitFor([&] { return nodes_[1].process.Log().find("PermissionDenied") != std::string::npos; },
                      std::chrono::seconds(10));
  EXPECT_TRUE(told) << nodes_[1].process.Log();
  auto cluster = client->Cluster();
  ASSERT_TRUE(cluster.ok());
  for (const auto& n : cluster->nodes) EXPECT_NE(n.node_id, "n1");
  // A token file others may read is refused before anything is sent.
  std::string open_token = WriteToken("open", "cluster-secret-1");
  chmod(open_token.c_str(), 0644);
  ClusterClientOptions loose_options = Token(open_token);
  loose_options.masters = {address_};
  auto loose = ClusterClient::Connect(loose_options);
  EXPECT_EQ(loose.status().code(), Code::kPermissionDenied) << loose.status().ToString();
}

TEST_F(ClusterAccessTest, MalformedRequestsGetClearErrors) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  auto stub = RawStub();
  v1::PingReply pong;
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    Status s = master::FromGrpcStatus(stub->Ping(&context, v1::PingRequest(), &pong), "master");
    EXPECT_EQ(s.code(), Code::kUnsupported) << s.ToString();
    EXPECT_NE(s.ToString().find("carries no nanokv protocol version"), std::string::npos) << s.ToString();
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "1");
    Status s = master::FromGrpcStatus(stub->Ping(&context, v1::PingRequest(), &pong), "master");
    EXPECT_EQ(s.code(), Code::kUnsupported);
    EXPECT_NE(s.ToString().find("speaks nanokv protocol version 1, this master version 2"), std::string::npos)
        << "version 1 sent the token itself: refused";
  }
  auto open = [&](const v1::OpenRequest& request, v1::OpenReply* reply) {
    grpc::ClientContext context;
    Prepare(&context, std::to_string(master::kProtocolVersion));
    return master::FromGrpcStatus(stub->Open(&context, request, reply), "master");
  };
  v1::OpenReply reply;
  EXPECT_EQ(open(v1::OpenRequest(), &reply).code(), Code::kInvalidArgument) << "an empty batch";
  v1::OpenRequest huge;
  for (size_t i = 0; i <= master::kMaxBatchItems; ++i) {
    v1::WriteItem* item = huge.add_items();
    item->set_key("k" + std::to_string(i));
    item->set_bytes_total(1);
  }
  Status too_many = open(huge, &reply);
  EXPECT_EQ(too_many.code(), Code::kInvalidArgument);
  EXPECT_NE(too_many.ToString().find("a batch is 1-4096"), std::string::npos) << too_many.ToString();
  v1::OpenRequest mixed;
  auto add = [&](const std::string& key, uint64_t bytes, uint32_t replicas, const std::string& segment) {
    v1::WriteItem* item = mixed.add_items();
    item->set_key(key);
    item->set_bytes_total(bytes);
    item->set_replica_num(replicas);
    item->set_preferred_segment(segment);
  };
  add("ok", 10, 1, "");
  add("", 10, 1, "");
  add("zero", 0, 1, "");
  add("many", 10, 9, "");
  add("seg", 10, 1, "n0/x");
  add(std::string(1, '\x01'), 10, 1, "");
  ASSERT_OK(open(mixed, &reply));
  ASSERT_EQ(reply.results_size(), 6);
  EXPECT_EQ(reply.results(0).status().code(), 0u);
  for (int i = 1; i < 6; ++i) {
    EXPECT_EQ(reply.results(i).status().code(), static_cast<uint32_t>(Code::kInvalidArgument)) << i;
    EXPECT_FALSE(reply.results(i).status().message().empty());
  }
  EXPECT_NE(reply.results(3).status().message().find("replica_num 9 is over 8"), std::string::npos);
  {
    v1::FinishRequest commit;
    commit.add_items()->set_key("ok");  // write id 0
    v1::AckReply ack;
    grpc::ClientContext context;
    Prepare(&context, std::to_string(master::kProtocolVersion));
    ASSERT_OK(master::FromGrpcStatus(stub->Commit(&context, commit, &ack), "master"));
    EXPECT_EQ(ack.results(0).code(), static_cast<uint32_t>(Code::kInvalidArgument));
  }
  {
    v1::KeysRequest locate;
    locate.add_keys("ok");
    locate.set_client_node("bad node");
    v1::LocateReply located;
    grpc::ClientContext context;
    Prepare(&context, std::to_string(master::kProtocolVersion));
    EXPECT_EQ(master::FromGrpcStatus(stub->Locate(&context, locate, &located), "m").code(), Code::kInvalidArgument);
  }
  // Node sessions: register first, a valid one, then only valid messages.
  v1::NodeMessage beat;
  beat.mutable_heartbeat();
  Status s = RawSession({beat});
  EXPECT_EQ(s.code(), Code::kProtocolError) << s.ToString();
  EXPECT_NE(s.ToString().find("begins with register"), std::string::npos) << s.ToString();
  v1::NodeMessage bad_id;
  bad_id.mutable_register_()->set_node_id("no spaces");
  EXPECT_EQ(RawSession({bad_id}).code(), Code::kProtocolError);
  v1::NodeMessage hello;
  hello.mutable_register_()->set_node_id("raw");
  v1::NodeMessage bad_event;
  bad_event.mutable_events()->add_events()->set_key("");
  EXPECT_EQ(RawSession({hello, bad_event}).code(), Code::kProtocolError);
  v1::NodeMessage stray;
  stray.mutable_reply()->set_request_id(1'000'000);
  s = RawSession({hello, stray});
  EXPECT_EQ(s.code(), Code::kProtocolError) << s.ToString();
  EXPECT_NE(s.ToString().find("never sent"), std::string::npos) << s.ToString();
  // The master is none the worse: the real node is still served.
  auto client = Client(0);
  ASSERT_OK(client->Put("after", Bytes(10, 1), {.preferred_segment = "n0"}));
  EXPECT_EQ(NodeState("n0"), "alive");
}

TEST_F(ClusterAccessTest, TlsWhenTheConfigNamesCertificates) {
  if (std::system("command -v openssl > /dev/null") != 0) GTEST_SKIP() << "openssl is not installed";
  const std::string d = dir_.path();
  const std::string make =
      "cd " + d + " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=nanokv-ca -keyout ca.key "
      "-out ca.pem 2>/dev/null && openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout m.key -out m.csr "
      "2>/dev/null && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext && openssl x509 -req -in m.csr "
      "-CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext -out m.pem 2>/dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0) << "openssl could not make certificates";
  const std::string config = d + "/master.yaml";
  std::ofstream(config) << "tls:\n  cert: " << d << "/m.pem\n  key: " << d << "/m.key\n";
  admin_.tls_ca = d + "/ca.pem";
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--config", config}));
  EXPECT_NE(master_.Log().find("(TLS)"), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  tls:\n    ca: " + d + "/ca.pem\n"));
  ClusterClientOptions tls;
  tls.tls_ca = d + "/ca.pem";
  auto client = Client(0, tls);
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Put("tls:1", Bytes(1000, 4), {.preferred_segment = "n0"}));
  auto got = client->Get("tls:1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, Bytes(1000, 4));
  // Plaintext to a TLS master gets nowhere.
  ClusterClientOptions plaintext;
  plaintext.request_timeout_ms = 2000;
  auto plain = Client(0, plaintext);
  EXPECT_EQ(plain->Ping().status().code(), Code::kUnavailable);
}

TEST_F(ClusterAccessTest, BadConfigsStopAMasterOrAKvdBeforeItStarts) {
  const std::string master_yaml = dir_.path() + "/bad-master.yaml";
  std::ofstream(master_yaml) << "listen: 127.0.0.1:0\nlease_ttl: forever\n";
  auto [code, log] = RefusedStart({KvdBinary(), "--role", "master", "--config", master_yaml});
  EXPECT_EQ(code, 2) << "a config that does not load is a usage error";
  EXPECT_NE(log.find(master_yaml + ":2: lease_ttl: 'forever' is not a duration"), std::string::npos) << log;
  auto [role_code, role_log] = RefusedStart({KvdBinary(), "--role", "mastr"});
  EXPECT_EQ(role_code, 2);
  EXPECT_NE(role_log.find("'mastr' is not node or master"), std::string::npos) << role_log;
  const std::string token = WriteToken("open-token", "x");
  chmod(token.c_str(), 0666);
  auto [token_code, token_log] = RefusedStart({KvdBinary(), "--role", "master", "--listen", "127.0.0.1:0",
                                               "--token-file", token});
  EXPECT_EQ(token_code, 1);
  EXPECT_NE(token_log.find("lets other users read or write it"), std::string::npos) << token_log;
  const std::string kvd_yaml = dir_.path() + "/bad-kvd.yaml";
  std::ofstream(kvd_yaml) << "backend: host\nipc_name: " << ipc_ << "_bad\nobject_store:\n  size: 4MiB\nmaster:\n"
                          << "  addresses: [\"127.0.0.1:7470\"]\n  node_id: \"two words\"\n";
  auto [kvd_code, kvd_log] = RefusedStart({KvdBinary(), "--config", kvd_yaml});
  EXPECT_EQ(kvd_code, 2);
  EXPECT_NE(kvd_log.find(kvd_yaml + ":7: master.node_id: 'two words' is not 1-63 of [A-Za-z0-9_.-]"),
            std::string::npos)
      << kvd_log;
}

}  // namespace
}  // namespace nanokv::testing
