// The etcd client against a real etcd (tests/util/etcd_server.h): every call
// and its errors, leases to expiry, watches, and what a caller gets when
// etcd is unreachable or hung (kUnavailable by the deadline, never a call
// that blocks) or when one endpoint of several fails (the next answers).
#include "ipc/etcd/etcd_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/process_util.h"
#include "tests/util/etcd_server.h"
#include "tests/util/status_matchers.h"

namespace nanokv::etcd {
namespace {

using namespace std::chrono_literals;
using testing::EtcdServer;

// Deadlines only a stuck test meets.
constexpr auto kCall = 10s;

std::unique_ptr<EtcdClient> Connect(std::vector<std::string> endpoints,
                                    std::chrono::milliseconds dial_timeout = 5000ms) {
  EtcdOptions options;
  options.endpoints = std::move(endpoints);
  options.dial_timeout = dial_timeout;
  auto client = EtcdClient::Connect(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

// A loopback port nothing listens on: bound, never listened, held open.
class DeadPort {
 public:
  DeadPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    endpoint_ = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  }
  ~DeadPort() { close(fd_); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  int fd_ = -1;
  std::string endpoint_;
};

class EtcdClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto started = EtcdServer::Start();
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    etcd_ = std::move(started).value().release();
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(etcd_, nullptr);
    client_ = Connect({etcd_->endpoint()});
    ASSERT_NE(client_, nullptr);
    // Each test its own keys.
    prefix_ = std::string("/test/") + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "/";
  }

  static EtcdServer* etcd_;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;
};

EtcdServer* EtcdClientTest::etcd_ = nullptr;

TEST_F(EtcdClientTest, PutRangeDelete) {
  auto first = client_->Put(prefix_ + "b", "two", 0, DeadlineIn(kCall));
  ASSERT_OK(first.status());
  auto second = client_->Put(prefix_ + "a", "one", 0, DeadlineIn(kCall));
  ASSERT_OK(second.status());
  EXPECT_GT(*second, *first);
  ASSERT_OK(client_->Put(prefix_ + "c", "three", 0, DeadlineIn(kCall)).status());
  ASSERT_OK(client_->Put(prefix_ + "b", "two again", 0, DeadlineIn(kCall)).status());

  auto range = client_->Range(RangeSpec::Prefix(prefix_), DeadlineIn(kCall));
  ASSERT_OK(range.status());
  ASSERT_EQ(range->kvs.size(), 3u);
  EXPECT_EQ(range->kvs[0].key, prefix_ + "a");  // by key
  EXPECT_EQ(range->kvs[1].value, "two again");
  EXPECT_EQ(range->kvs[1].version, 2);
  EXPECT_EQ(range->kvs[1].create_revision, *first);
  EXPECT_GT(range->kvs[1].mod_revision, range->kvs[1].create_revision);
  EXPECT_GE(range->revision, range->kvs[1].mod_revision);

  RangeSpec by_creation = RangeSpec::Prefix(prefix_);
  by_creation.sort = RangeSpec::Sort::kCreateRevision;
  by_creation.limit = 2;
  auto sorted = client_->Range(by_creation, DeadlineIn(kCall));
  ASSERT_OK(sorted.status());
  ASSERT_EQ(sorted->kvs.size(), 2u);
  EXPECT_EQ(sorted->kvs[0].key, prefix_ + "b");
  EXPECT_EQ(sorted->kvs[1].key, prefix_ + "a");
  EXPECT_TRUE(sorted->more);
  EXPECT_EQ(sorted->count, 3);

  auto missing = client_->Get(prefix_ + "z", DeadlineIn(kCall));
  ASSERT_OK(missing.status());
  EXPECT_FALSE(missing->has_value());
  auto one = client_->Get(prefix_ + "c", DeadlineIn(kCall));
  ASSERT_OK(one.status());
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ((*one)->value, "three");

  auto deleted = client_->Delete(prefix_, PrefixEnd(prefix_), DeadlineIn(kCall));
  ASSERT_OK(deleted.status());
  EXPECT_EQ(*deleted, 3);
  auto empty = client_->Range(RangeSpec::Prefix(prefix_), DeadlineIn(kCall));
  ASSERT_OK(empty.status());
  EXPECT_TRUE(empty->kvs.empty());
}

TEST_F(EtcdClientTest, TxnCreatesOnlyWhatDoesNotExist) {
  const std::string key = prefix_ + "leader";
  TxnSpec create;
  create.compares = {Compare::CreateRevision(key, Compare::Op::kEqual, 0)};
  create.success = {TxnOp::Put(key, "first")};
  create.failure = {TxnOp::Get(key)};

  auto won = client_->Txn(create, DeadlineIn(kCall));
  ASSERT_OK(won.status());
  EXPECT_TRUE(won->succeeded);
  ASSERT_EQ(won->results.size(), 1u);
  EXPECT_EQ(won->results[0].kind, TxnOp::Kind::kPut);

  create.success = {TxnOp::Put(key, "second")};
  auto lost = client_->Txn(create, DeadlineIn(kCall));
  ASSERT_OK(lost.status());
  EXPECT_FALSE(lost->succeeded);
  ASSERT_EQ(lost->results.size(), 1u);
  ASSERT_EQ(lost->results[0].kvs.size(), 1u);
  EXPECT_EQ(lost->results[0].kvs[0].value, "first");
  EXPECT_EQ(lost->results[0].kvs[0].create_revision, won->revision);

  // Compare on value and version; a delete in the same transaction.
  TxnSpec swap;
  swap.compares = {Compare::Value(key, Compare::Op::kEqual, "first"),
                   Compare::Version(key, Compare::Op::kEqual, 1)};
  swap.success = {TxnOp::Delete(key), TxnOp::Put(prefix_ + "other", "x")};
  auto swapped = client_->Txn(swap, DeadlineIn(kCall));
  ASSERT_OK(swapped.status());
  EXPECT_TRUE(swapped->succeeded);
  ASSERT_EQ(swapped->results.size(), 2u);
  EXPECT_EQ(swapped->results[0].deleted, 1);
  auto again = client_->Txn(swap, DeadlineIn(kCall));
  ASSERT_OK(again.status());
  EXPECT_FALSE(again->succeeded);
  EXPECT_TRUE(again->results.empty());
}

TEST_F(EtcdClientTest, LeaseKeepsItsKeysUntilRevoked) {
  auto lease = client_->GrantLease(30s, DeadlineIn(kCall));
  ASSERT_OK(lease.status());
  EXPECT_EQ(lease->ttl, 30s);
  ASSERT_OK(client_->Put(prefix_ + "held", "x", lease->id, DeadlineIn(kCall)).status());

  auto ttl = client_->TimeToLive(lease->id, true, DeadlineIn(kCall));
  ASSERT_OK(ttl.status());
  EXPECT_EQ(ttl->granted, 30s);
  EXPECT_GT(ttl->remaining.count(), 0);
  ASSERT_EQ(ttl->keys.size(), 1u);
  EXPECT_EQ(ttl->keys[0], prefix_ + "held");

  for (int i = 0; i < 3; ++i) {  // the stream is kept and reused
    auto renewed = client_->KeepAliveOnce(lease->id, DeadlineIn(kCall));
    ASSERT_OK(renewed.status());
    EXPECT_EQ(*renewed, 30s);
  }

  ASSERT_OK(client_->RevokeLease(lease->id, DeadlineIn(kCall)));
  auto gone = client_->Get(prefix_ + "held", DeadlineIn(kCall));
  ASSERT_OK(gone.status());
  EXPECT_FALSE(gone->has_value());
  EXPECT_EQ(client_->KeepAliveOnce(lease->id, DeadlineIn(kCall)).status().code(), Code::kNotFound);
  EXPECT_EQ(client_->RevokeLease(lease->id, DeadlineIn(kCall)).code(), Code::kNotFound);
  auto expired = client_->TimeToLive(lease->id, false, DeadlineIn(kCall));
  ASSERT_OK(expired.status());
  EXPECT_LT(expired->remaining.count(), 0);
}

TEST_F(EtcdClientTest, KeysGoWhenTheirLeaseExpires) {
  auto lease = client_->GrantLease(1s, DeadlineIn(kCall));
  ASSERT_OK(lease.status());
  ASSERT_OK(client_->Put(prefix_ + "short", "x", lease->id, DeadlineIn(kCall)).status());
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto read = client_->Get(prefix_ + "short", DeadlineIn(kCall));
        return read.ok() && !read->has_value();
      },
      30s));
  EXPECT_EQ(client_->KeepAliveOnce(lease->id, DeadlineIn(kCall)).status().code(), Code::kNotFound);
  EXPECT_EQ(client_->GrantLease(0s, DeadlineIn(kCall)).status().code(), Code::kInvalidArgument);
}

TEST_F(EtcdClientTest, WatchSeesChangesInOrder) {
  auto before = client_->Put(prefix_ + "old", "1", 0, DeadlineIn(kCall));
  ASSERT_OK(before.status());
  auto watch = client_->Watch({prefix_, PrefixEnd(prefix_), 0, false}, DeadlineIn(kCall));
  ASSERT_OK(watch.status());

  auto idle = (*watch)->Next(DeadlineIn(100ms));  // nothing happened: the deadline
  ASSERT_OK(idle.status());
  EXPECT_FALSE(idle->has_value());

  ASSERT_OK(client_->Put(prefix_ + "k", "v", 0, DeadlineIn(kCall)).status());
  ASSERT_OK(client_->Delete(prefix_ + "k", "", DeadlineIn(kCall)).status());
  std::vector<WatchEvent> events;
  while (events.size() < 2) {
    auto batch = (*watch)->Next(DeadlineIn(kCall));
    ASSERT_OK(batch.status());
    ASSERT_TRUE(batch->has_value());
    for (auto& event : (*batch)->events) events.push_back(event);
  }
  EXPECT_EQ(events[0].type, WatchEvent::Type::kPut);
  EXPECT_EQ(events[0].kv.value, "v");
  EXPECT_EQ(events[1].type, WatchEvent::Type::kDelete);
  EXPECT_EQ(events[1].kv.key, prefix_ + "k");
  EXPECT_GT(events[1].kv.mod_revision, events[0].kv.mod_revision);

  // From a past revision: the history since then.
  auto history = client_->Watch({prefix_, PrefixEnd(prefix_), *before, true}, DeadlineIn(kCall));
  ASSERT_OK(history.status());
  auto batch = (*history)->Next(DeadlineIn(kCall));
  ASSERT_OK(batch.status());
  ASSERT_TRUE(batch->has_value());
  ASSERT_FALSE((*batch)->events.empty());
  EXPECT_EQ((*batch)->events[0].kv.key, prefix_ + "old");
}

TEST_F(EtcdClientTest, CancelWakesAWatchInProgress) {
  auto watch = client_->Watch({prefix_, PrefixEnd(prefix_), 0, false}, DeadlineIn(kCall));
  ASSERT_OK(watch.status());
  std::thread canceller([&] { (*watch)->Cancel(); });
  auto next = (*watch)->Next(DeadlineIn(600s));  // returns because of Cancel, not the deadline
  canceller.join();
  EXPECT_EQ(next.status().code(), Code::kUnavailable) << next.status().ToString();
  EXPECT_EQ((*watch)->Next(DeadlineIn(kCall)).status().code(), Code::kUnavailable);  // ended for good
}

TEST(EtcdOptionsTest, AreChecked) {
  auto code = [](std::vector<std::string> endpoints, std::string ca = "", std::string cert = "") {
    EtcdOptions options;
    options.endpoints = std::move(endpoints);
    options.ca_file = std::move(ca);
    options.cert_file = std::move(cert);
    return EtcdClient::Connect(options).status().code();
  };
  EXPECT_EQ(code({}), Code::kInvalidArgument);
  EXPECT_EQ(code({"localhost"}), Code::kInvalidArgument);
  EXPECT_EQ(code({"127.0.0.1:70000"}), Code::kInvalidArgument);
  EXPECT_EQ(code({"http://127.0.0.1:x"}), Code::kInvalidArgument);
  EXPECT_EQ(code({"127.0.0.1:2379"}, "", "/c.pem"), Code::kInvalidArgument);  // a cert without its key
  EXPECT_EQ(code({"127.0.0.1:2379"}, "/nonexistent/ca.pem"), Code::kNotFound);
}

TEST(EtcdUnreachableTest, NothingListeningIsUnavailableByTheDeadline) {
  DeadPort dead;
  EtcdOptions options;
  options.endpoints = {dead.endpoint()};
  options.dial_timeout = 200ms;
  auto refused = EtcdClient::Connect(options);
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find(dead.endpoint()), std::string_view::npos) << refused.status().ToString();

  auto lazy = Connect({dead.endpoint()}, 0ms);  // dial_timeout 0: no wait
  ASSERT_NE(lazy, nullptr);
  EXPECT_EQ(lazy->Range(RangeSpec::Key("k"), DeadlineIn(300ms)).status().code(), Code::kUnavailable);
  EXPECT_EQ(lazy->KeepAliveOnce(1, DeadlineIn(300ms)).status().code(), Code::kUnavailable);
  EXPECT_EQ(lazy->Watch({"k", "", 0, false}, DeadlineIn(300ms)).status().code(), Code::kUnavailable);
  // A deadline already past: no call at all.
  EXPECT_EQ(lazy->Put("k", "v", 0, etcd::Clock::now()).status().code(), Code::kUnavailable);
}

TEST(EtcdUnreachableTest, AHungEtcdIsUnavailableByTheDeadline) {
  auto etcd = EtcdServer::Start();
  ASSERT_OK(etcd.status());
  auto client = Connect({(*etcd)->endpoint()});
  ASSERT_NE(client, nullptr);
  auto lease = client->GrantLease(30s, DeadlineIn(kCall));
  ASSERT_OK(lease.status());
  ASSERT_OK(client->KeepAliveOnce(lease->id, DeadlineIn(kCall)).status());  // the stream is open
  auto watch = client->Watch({"/hung/", PrefixEnd("/hung/"), 0, false}, DeadlineIn(kCall));
  ASSERT_OK(watch.status());

  (*etcd)->Pause();
  // Connections stay open and etcd says nothing: each call ends by its own
  // deadline with kUnavailable (the test hangs if one does not).
  EXPECT_EQ(client->Put("/hung/k", "v", 0, DeadlineIn(300ms)).status().code(), Code::kUnavailable);
  EXPECT_EQ(client->Range(RangeSpec::Key("/hung/k"), DeadlineIn(300ms)).status().code(), Code::kUnavailable);
  EXPECT_EQ(client->KeepAliveOnce(lease->id, DeadlineIn(300ms)).status().code(), Code::kUnavailable);
  auto quiet = (*watch)->Next(DeadlineIn(300ms));
  ASSERT_OK(quiet.status());
  EXPECT_FALSE(quiet->has_value());

  (*etcd)->Resume();
  // The same client works again: the renewal opens a new stream.
  auto renewed = client->KeepAliveOnce(lease->id, DeadlineIn(kCall));
  ASSERT_OK(renewed.status());
  ASSERT_OK(client->Put("/hung/k", "v", 0, DeadlineIn(kCall)).status());
  bool seen = false;
  while (!seen) {
    auto batch = (*watch)->Next(DeadlineIn(kCall));
    ASSERT_OK(batch.status());
    ASSERT_TRUE(batch->has_value());
    for (const auto& event : (*batch)->events) seen |= event.kv.key == "/hung/k";
  }
}

TEST(EtcdFailoverTest, ADeadEndpointIsSkipped) {
  auto etcd = EtcdServer::Start();
  ASSERT_OK(etcd.status());
  DeadPort dead;
  auto client = Connect({dead.endpoint(), (*etcd)->endpoint()});
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->current_endpoint(), 1u);  // Connect chose the one that accepted
  ASSERT_OK(client->Put("/failover/k", "v", 0, DeadlineIn(kCall)).status());

  auto lazy = Connect({dead.endpoint(), (*etcd)->endpoint()}, 0ms);
  ASSERT_NE(lazy, nullptr);
  EXPECT_EQ(lazy->current_endpoint(), 0u);
  auto read = lazy->Get("/failover/k", DeadlineIn(kCall));  // refused at once, then the next
  ASSERT_OK(read.status());
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(lazy->current_endpoint(), 1u);
  auto lease = lazy->GrantLease(30s, DeadlineIn(kCall));
  ASSERT_OK(lease.status());
  ASSERT_OK(lazy->KeepAliveOnce(lease->id, DeadlineIn(kCall)).status());
}

// Three members: a hung one and a dead one are passed over, and a member
// that comes back serves again.
TEST(EtcdFailoverTest, ClusterMembersHungOrKilled) {
  auto cluster = testing::EtcdCluster::Start(3);
  ASSERT_OK(cluster.status());
  auto client = Connect((*cluster)->endpoints());
  ASSERT_NE(client, nullptr);
  auto lease = client->GrantLease(30s, DeadlineIn(kCall));
  ASSERT_OK(lease.status());

  const size_t hung = client->current_endpoint();
  (*cluster)->member(hung).Pause();
  // The hung member takes its share of the deadline, then another answers.
  ASSERT_OK(client->Put("/cluster/a", "1", 0, DeadlineIn(kCall)).status());
  EXPECT_NE(client->current_endpoint(), hung);
  ASSERT_OK(client->KeepAliveOnce(lease->id, DeadlineIn(kCall)).status());

  (*cluster)->member(hung).Resume();
  const size_t killed = client->current_endpoint();
  (*cluster)->member(killed).Kill();
  auto read = client->Get("/cluster/a", DeadlineIn(kCall));
  ASSERT_OK(read.status());
  ASSERT_TRUE(read->has_value());
  EXPECT_NE(client->current_endpoint(), killed);
  ASSERT_OK(client->KeepAliveOnce(lease->id, DeadlineIn(kCall)).status());

  ASSERT_OK((*cluster)->member(killed).Restart());
  auto from_restarted = Connect({(*cluster)->member(killed).endpoint()});
  ASSERT_NE(from_restarted, nullptr);
  auto caught_up = from_restarted->Get("/cluster/a", DeadlineIn(kCall));
  ASSERT_OK(caught_up.status());
  EXPECT_TRUE(caught_up->has_value());
}

// etcd serving clients over TLS with --client-cert-auth: our client with the
// CA, its certificate and key gets through; without a certificate, over
// plaintext, or trusting another CA, it does not.
TEST(EtcdTlsTest, ClientCertificatesAreRequiredAndChecked) {
  testing::TempDir dir, other_dir;
  auto certs = testing::MakeTestCertificates(dir.path());
  ASSERT_OK(certs.status());
  auto other = testing::MakeTestCertificates(other_dir.path());
  ASSERT_OK(other.status());
  auto etcd = EtcdServer::Start(&*certs);
  ASSERT_OK(etcd.status());
  const std::string https = (*etcd)->endpoint();
  ASSERT_EQ(https.rfind("https://", 0), 0u);
  const std::string bare = https.substr(8);

  auto put = [](std::string endpoint, std::string ca, std::string cert, std::string key) {
    EtcdOptions options;
    options.endpoints = {std::move(endpoint)};
    options.dial_timeout = 0ms;
    options.ca_file = std::move(ca);
    options.cert_file = std::move(cert);
    options.key_file = std::move(key);
    auto client = EtcdClient::Connect(options);
    if (!client.ok()) return client.status();
    return (*client)->Put("/tls/k", "v", 0, DeadlineIn(2s)).status();
  };
  EXPECT_OK(put(https, certs->ca_file, certs->cert_file, certs->key_file));
  EXPECT_OK(put(bare, certs->ca_file, certs->cert_file, certs->key_file));  // TLS files make it TLS
  EXPECT_EQ(put(https, certs->ca_file, "", "").code(), Code::kUnavailable);  // no client certificate
  EXPECT_EQ(put("http://" + bare, "", "", "").code(), Code::kUnavailable);    // plaintext
  EXPECT_EQ(put(https, other->ca_file, other->cert_file, other->key_file).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace nanokv::etcd
