// Endpoints that never say hello to a kvd's transfer agent, on real
// processes: a process speaking raw UCP opens thousands of them (the agent
// keeps a bounded few, an authenticated peer still transfers, kvd stops
// cleanly and its log stays short), or one that stays silent (dropped after
// transfer.timeout).
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>

#include "base/open_file_limit.h"
#include "daemon/transfer/hello_gate.h"
#include "ipc/ucx/ucx.h"
#include "libkv/cluster/remote_transfer.h"
#include "tests/integration/cluster_fixture.h"

namespace nanokv::testing {
namespace {

// `count` endpoints from one UCP worker of this process, wired up (a flush
// each), then silent.
class SilentEndpoints {
 public:
  SilentEndpoints(const std::string& address, int count) {
    auto context = ucx::Context::Create();
    EXPECT_TRUE(context.ok()) << context.status().ToString();
    if (!context.ok()) return;
    context_ = std::move(context).value();
    worker_ = std::move(ucx::Worker::Create(*context_)).value();
    auto to = ucx::ParseHostPort(address, "agent");
    EXPECT_TRUE(to.ok());
    std::vector<void*> flushes;
    for (int i = 0; i < count; ++i) {
      auto ep = ucx::ConnectEndpoint(*worker_, *to, &SilentEndpoints::OnError, this);
      EXPECT_TRUE(ep.ok()) << ep.status().ToString();
      if (!ep.ok()) return;
      eps_.push_back(*ep);
      flushes.push_back(ucx::FlushEndpoint(*ep));
    }
    EXPECT_OK(Progress([&] { return std::all_of(flushes.begin(), flushes.end(), Done); }));
  }
  ~SilentEndpoints() {
    if (worker_ == nullptr) return;
    std::vector<void*> closing;
    for (ucp_ep_h ep : eps_) closing.push_back(ucx::CloseEndpoint(*worker_, ep, true));
    (void)Progress([&] { return std::all_of(closing.begin(), closing.end(), Done); });
  }
  // Until at least `n` of them were ended by the agent.
  Status WaitEnded(int n) {
    return Progress([&] { return ended_ >= n; });
  }
  int ended() const { return ended_; }

 private:
  static void OnError(void* arg, ucp_ep_h, ucs_status_t) { ++static_cast<SilentEndpoints*>(arg)->ended_; }
  // Frees a done request (and forgets it).
  static bool Done(void*& request) {
    if (request != nullptr && ucx::RequestDone(request)) request = nullptr;
    return request == nullptr;
  }
  Status Progress(const std::function<bool()>& done) {
    return worker_->ProgressUntil(done, std::chrono::seconds(60), "silent endpoints");
  }

  std::unique_ptr<ucx::Context> context_;
  std::unique_ptr<ucx::Worker> worker_;
  std::vector<ucp_ep_h> eps_;
  int ended_ = 0;
};

size_t LinesWith(const std::string& log, const std::string& text) {
  size_t lines = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++lines;
  return lines;
}

class ClusterTransferFloodTest : public ClusterFixture {};

TEST_F(ClusterTransferFloodTest, AHelloLessFloodIsBoundedAndKvdStopsCleanly) {
  (void)RaiseOpenFileLimit();  // the flood's endpoints cost this process fds too
  const std::string token = dir_.path() + "/token";
  std::ofstream(token) << "cluster-secret-29\n";
  chmod(token.c_str(), 0600);
  admin_.token_file = token;
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--token-file", token}));
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  token_file: " + token + "\n"));
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  token_file: " + token + "\n"));
  // This process's worker holds one UCX async handler per endpoint, more
  // than UCX's default of 1024 here. Set after the kvds started: they keep
  // their own.
  setenv("UCX_ASYNC_MAX_EVENTS", "100000", 1);
  ClusterClientOptions with_token;
  with_token.token_file = token;
  auto client = Client(0, with_token);
  ASSERT_NE(client, nullptr);
  const auto data = Bytes(70'000, 29);
  ASSERT_OK(client->Put("flood:a", data, {.preferred_segment = "n1"}));
  const std::string n1 = DataAddress(*client, "n1");
  ASSERT_FALSE(n1.empty());
  {
    // Past UCX's 1024 handlers a worker: 2000 endpoints from one host. The
    // agent keeps the newest of them waiting for a hello and ends the rest.
    constexpr int kFlood = 2000;
    SilentEndpoints flood(n1, kFlood);
    ASSERT_OK(flood.WaitEnded(kFlood - static_cast<int>(kvd::kMaxHelloWaitersPerHost)));
    // While the flood holds its places, a peer with the token transfers.
    cluster::RemoteTransfers peer("cluster-secret-29", std::chrono::seconds(20));
    auto got = peer.Get({{"n1", n1, "flood:a"}});
    ASSERT_TRUE(got[0].ok()) << got[0].status().ToString();
    EXPECT_TRUE(*got[0] == data);
    // kvd stops with the flood's endpoints still open: cleanly.
    nodes_[1].process.Signal(SIGTERM);
    auto code = nodes_[1].process.Wait(std::chrono::seconds(30));
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0) << "kvd did not stop cleanly";
  }
  // Its log summarised the endpoints it ended instead of a line each.
  const std::string log = nodes_[1].process.Log();
  EXPECT_NE(log.find("ended for a newer one"), std::string::npos);
  EXPECT_LT(LinesWith(log, "transfer agent: "), 20u) << log;
  EXPECT_EQ(LinesWith(log, "failed to close fd"), 0u);
}

TEST_F(ClusterTransferFloodTest, ASilentEndpointIsDroppedAfterTheTimeout) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode(8, "  transfer:\n    timeout: 500ms\n"));
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  const std::string n1 = DataAddress(*client, "n1");
  ASSERT_FALSE(n1.empty());
  SilentEndpoints silent(n1, 1);
  ASSERT_OK(silent.WaitEnded(1));
  EXPECT_TRUE(WaitFor([&] {
    return nodes_[1].process.Log().find("silent for transfer.timeout before its hello") != std::string::npos;
  }, std::chrono::seconds(10))) << nodes_[1].process.Log();
}

}  // namespace
}  // namespace nanokv::testing
