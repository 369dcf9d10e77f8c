// kvctl cluster and kvctl objects --cluster as pure views: each node's
// host-tier copies beside its copies, each copy's tier (text and JSON).
#include "kvctl/cluster.h"

#include <gtest/gtest.h>

namespace nanokv::kvctl {
namespace {

TEST(ClusterViews, EachCopysTierAndEachNodesHostTierCopiesAreShown) {
  ClusterStatus status;
  status.master = "127.0.0.1:1";
  status.master_id = "m";
  status.term = 1;
  ClusterNodeStatus node;
  node.node_id = "n0";
  node.state = "alive";
  node.objects = 5;
  ClusterDeviceStatus device;
  device.capacity_bytes = 16u << 20;
  device.used_bytes = 8u << 20;
  device.host_capacity_bytes = 32u << 20;
  device.host_used_bytes = 4u << 20;
  device.objects = 5;
  device.host_objects = 2;
  node.devices.push_back(device);
  status.nodes.push_back(node);
  const std::string text = ClusterView(status, /*json=*/false, /*colour=*/false);
  EXPECT_NE(text.find("5 (2 host)"), std::string::npos) << text;
  EXPECT_NE(text.find("4.00 MiB of 32.0 MiB"), std::string::npos) << text;
  EXPECT_NE(ClusterView(status, true, false).find("\"host_objects\":2"), std::string::npos);

  ObjectLocation x;
  x.key = "x";
  x.bytes_total = 100;
  x.replicas.push_back({"n1", "", 0, "", 3, false, false, "", /*host_tier=*/false});
  x.replicas.push_back({"n0", "", 1, "", 2, false, false, "", /*host_tier=*/true});
  const std::string rows = ClusterObjectsView({x}, false);
  EXPECT_NE(rows.find("n1:0,n0:1(host)"), std::string::npos) << rows;
  const std::string json = ClusterObjectsView({x}, true);
  EXPECT_NE(json.find("\"tier\":\"gpu\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"tier\":\"host\""), std::string::npos) << json;
}

}  // namespace
}  // namespace nanokv::kvctl
