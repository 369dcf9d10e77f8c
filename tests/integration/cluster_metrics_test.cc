// The master's /metrics (kvd --role master --metrics-port): a scrape says what
// the test did through real kvds (plans by result, calls, the index, the
// nodes and their stores) and what `Cluster()` says, and promtool finds
// nothing to lint.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "tests/integration/cluster_fixture.h"
#include "tests/util/http_get.h"

namespace nanokv::testing {
namespace {

class ClusterMetricsTest : public ClusterFixture {
 protected:
  // The port the master logged ("metrics at http://127.0.0.1:<port>/metrics").
  uint16_t MetricsPort() {
    const std::string marker = "metrics at http://127.0.0.1:";
    std::string log;
    bool logged = WaitFor([&] { return (log = master_.Log()).find(marker) != std::string::npos; },
                          std::chrono::seconds(20));
    EXPECT_TRUE(logged) << log;
    return logged ? static_cast<uint16_t>(std::stoul(log.substr(log.find(marker) + marker.size()))) : 0;
  }

  std::vector<MetricSample> Scrape(uint16_t port, std::string* text = nullptr) {
    auto reply = HttpGet("127.0.0.1", port, "/metrics");
    EXPECT_TRUE(reply.ok() && reply->status == 200) << (reply.ok() ? reply->body : reply.status().ToString());
    if (!reply.ok()) return {};
    if (text != nullptr) *text = reply->body;
    auto samples = ParseExposition(reply->body);
    EXPECT_TRUE(samples.ok()) << samples.status().ToString();
    return samples.ok() ? *samples : std::vector<MetricSample>{};
  }
};

TEST_F(ClusterMetricsTest, AScrapeSaysWhatTheClusterDid) {
  ASSERT_NO_FATAL_FAILURE(StartMaster({"--metrics-port", "0"}));
  ASSERT_NO_FATAL_FAILURE(StartNode(8));
  ASSERT_NO_FATAL_FAILURE(StartNode(16));
  const uint16_t port = MetricsPort();
  ASSERT_NE(port, 0);
  auto client = Client(0);
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> bytes(4096, std::byte{7});
  // On the client's own node: bytes move only there until the cross-node path exists.
  const WriteOptions here{.preferred_segment = "n0"};
  for (int i = 0; i < 5; ++i) ASSERT_OK(client->Put("m:" + std::to_string(i), bytes, here));
  // A key already READY: the open's item is refused (AlreadyExists).
  EXPECT_EQ(client->Put("m:0", bytes, here).code(), Code::kAlreadyExists);
  // Larger than any node's store: no plan (Unavailable).
  auto huge = client->OpenForWrite("m:huge", uint64_t{1} << 40);
  EXPECT_FALSE(huge.ok());
  ASSERT_OK(client->Remove("m:4"));
  auto cluster = client->Cluster();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();

  std::string text;
  const auto samples = Scrape(port, &text);
  auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return FindSample(samples, name, labels).value_or(-1);
  };
  EXPECT_EQ(value("nanokv_master_leader"), 1);
  EXPECT_EQ(value("nanokv_master_term"), static_cast<double>(cluster->term));
  EXPECT_EQ(value("nanokv_master_rebuilding"), 0);
  EXPECT_EQ(value("nanokv_master_index_objects"), 4);
  EXPECT_GT(value("nanokv_master_index_bytes"), 0);
  EXPECT_EQ(value("nanokv_master_writes_in_progress"), 0);
  EXPECT_EQ(value("nanokv_master_nodes", {{"state", "alive"}}), 2);
  EXPECT_EQ(value("nanokv_master_nodes", {{"state", "dead"}}), 0);
  EXPECT_EQ(value("nanokv_master_info", {{"id", "m0"}}), 1);
  // Plans by result: 5 placed, one on a READY key, one with no room.
  EXPECT_EQ(value("nanokv_master_items_total", {{"call", "open"}, {"code", "OK"}}), 5);
  EXPECT_EQ(value("nanokv_master_items_total", {{"call", "open"}, {"code", "AlreadyExists"}}), 1);
  EXPECT_EQ(value("nanokv_master_items_total", {{"call", "open"}, {"code", "Unavailable"}}), 1);
  EXPECT_EQ(value("nanokv_master_items_total", {{"call", "commit"}, {"code", "OK"}}), 5);
  EXPECT_EQ(value("nanokv_master_items_total", {{"call", "remove"}, {"code", "OK"}}), 1);
  EXPECT_EQ(value("nanokv_master_requests_total", {{"call", "open"}, {"code", "OK"}}), 7);
  EXPECT_EQ(value("nanokv_master_request_duration_seconds_count", {{"call", "open"}}), 7);
  EXPECT_GE(value("nanokv_master_requests_total", {{"call", "cluster"}, {"code", "OK"}}), 1);
  // Each node's store as the node reported it, and its copies.
  double objects = 0;
  for (const auto& node : cluster->nodes) {
    for (const auto& d : node.devices) {
      EXPECT_EQ(value("nanokv_master_node_store_capacity_bytes",
                      {{"node", node.node_id}, {"device", std::to_string(d.device)}}),
                static_cast<double>(d.capacity_bytes))
          << node.node_id;
    }
    objects += value("nanokv_master_node_objects", {{"node", node.node_id}});
  }
  EXPECT_EQ(objects, 4);

  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian's prometheus package): format not linted";
  }
  const std::string file = dir_.path() + "/metrics.txt";
  std::ofstream(file) << text;
  const std::string lint_out = dir_.path() + "/promtool.out";
  int rc = std::system(("promtool check metrics < '" + file + "' > '" + lint_out + "' 2>&1").c_str());
  std::ifstream in(lint_out);
  std::string lint((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << lint;
  EXPECT_EQ(lint, "") << "promtool found problems";
}

TEST_F(ClusterMetricsTest, MetricsAreOffUnlessConfigured) {
  // Off unless configured: no port logged, nothing listening.
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  EXPECT_EQ(master_.Log().find("metrics at"), std::string::npos);
}

}  // namespace
}  // namespace nanokv::testing
