// The cluster's C ABI (nanokv/nanokv.h, nanokv_cluster_*) against a real
// master and kvds: what Python's nanokv.Cluster stands on, here under the
// sanitizers too (the Python suite runs uninstrumented).
#include <cstring>

#include "nanokv/nanokv.h"
#include "tests/integration/cluster_processes.h"

namespace nanokv::testing {
namespace {

class ClusterCapiTest : public ClusterProcesses {
 protected:
  nanokv_cluster_t* Connect(const char* node = "n0") {
    const char* masters[] = {address_.c_str()};
    nanokv_cluster_options_t o{};
    o.masters = masters;
    o.master_count = 1;
    o.node_id = node;
    std::string ipc = nodes_[0].ipc;
    o.ipc_name = ipc.c_str();
    o.backend = "host";
    nanokv_cluster_t* cluster = nullptr;
    EXPECT_EQ(nanokv_cluster_connect(&o, &cluster), NANOKV_OK) << nanokv_last_error();
    return cluster;
  }
};

TEST_F(ClusterCapiTest, PutGetLocatePlansAndBatches) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  nanokv_cluster_t* c = Connect();
  ASSERT_NE(c, nullptr);
  const auto data = Bytes(5000, 5);
  nanokv_write_options_t here{"n0", 1};
  ASSERT_EQ(nanokv_cluster_put(c, "c:1", data.data(), data.size(), &here), NANOKV_OK) << nanokv_last_error();
  std::vector<std::byte> out(10000);
  uint64_t bytes = 0;
  ASSERT_EQ(nanokv_cluster_get(c, "c:1", out.data(), out.size(), &bytes), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(bytes, data.size());
  EXPECT_EQ(std::memcmp(out.data(), data.data(), bytes), 0);
  EXPECT_EQ(nanokv_cluster_get(c, "c:1", out.data(), 10, &bytes), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(bytes, data.size());
  nanokv_replica_t replicas[4];
  size_t count = 0;
  ASSERT_EQ(nanokv_cluster_locate(c, "c:1", replicas, 4, &count, &bytes), NANOKV_OK);
  ASSERT_EQ(count, 1u);
  EXPECT_STREQ(replicas[0].node_id, "n0");
  EXPECT_EQ(replicas[0].local, 1);
  nanokv_write_options_t there{"n1", 1};
  // Another node's copy: its bytes move through n1's transfer agent.
  ASSERT_EQ(nanokv_cluster_put(c, "c:2", data.data(), data.size(), &there), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_get(c, "c:2", out.data(), out.size(), &bytes), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(bytes, data.size());
  EXPECT_EQ(std::memcmp(out.data(), data.data(), bytes), 0);

  nanokv_write_options_t two{nullptr, 2};
  nanokv_cluster_plan_t* plan = nullptr;
  ASSERT_EQ(nanokv_cluster_open(c, "c:plan", 64, &two, &plan), NANOKV_OK) << nanokv_last_error();
  size_t n = 0;
  ASSERT_EQ(nanokv_cluster_plan_replicas(plan, &n), NANOKV_OK);
  ASSERT_EQ(n, 2u);
  for (size_t i = 0; i < n; ++i) {
    nanokv_replica_t r;
    ASSERT_EQ(nanokv_cluster_plan_replica(plan, i, &r), NANOKV_OK);
    void* payload = nullptr;
    EXPECT_EQ(nanokv_cluster_plan_payload(plan, i, &payload), r.local ? NANOKV_OK : NANOKV_UNIMPLEMENTED);
  }
  EXPECT_EQ(nanokv_cluster_close(c), NANOKV_FAILED_PRECONDITION) << "a plan is alive";
  ASSERT_EQ(nanokv_cluster_commit(plan, 0), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_plan_free(plan), NANOKV_OK);
  EXPECT_EQ(nanokv_cluster_plan_free(plan), NANOKV_INVALID_ARGUMENT) << "freed twice";

  const char* keys[] = {"c:b1", "c:b2", "bad key"};
  const void* values[] = {data.data(), data.data(), data.data()};
  uint64_t sizes[] = {10, 20, 30};
  int results[3];
  ASSERT_EQ(nanokv_cluster_put_batch(c, keys, values, sizes, 3, &here, results), NANOKV_OK);
  EXPECT_EQ(results[0], NANOKV_OK);
  EXPECT_EQ(results[1], NANOKV_OK);
  EXPECT_EQ(results[2], NANOKV_INVALID_ARGUMENT);
  std::vector<std::byte> a(100), b(100), d(100);
  void* outs[] = {a.data(), b.data(), d.data()};
  uint64_t capacities[] = {100, 100, 100};
  uint64_t got[3];
  ASSERT_EQ(nanokv_cluster_get_batch(c, keys, outs, capacities, 3, got, results), NANOKV_OK);
  EXPECT_EQ(got[1], 20u);
  EXPECT_EQ(std::memcmp(b.data(), data.data(), 20), 0);
  nanokv_replica_t many[6];
  size_t counts[3];
  ASSERT_EQ(nanokv_cluster_locate_batch(c, keys, 3, many, 2, counts, nullptr, results), NANOKV_OK);
  EXPECT_EQ(counts[0], 1u);
  EXPECT_STREQ(many[2].node_id, "n0");
  nanokv_cluster_plan_t* plans[3];
  ASSERT_EQ(nanokv_cluster_open_batch(c, keys, sizes, 3, nullptr, plans, results), NANOKV_OK);
  EXPECT_EQ(results[0], NANOKV_ALREADY_EXISTS);
  EXPECT_EQ(plans[0], nullptr);
  ASSERT_EQ(nanokv_cluster_remove_batch(c, keys, 2, results), NANOKV_OK);
  EXPECT_EQ(results[0], NANOKV_OK);
  ASSERT_EQ(nanokv_cluster_remove(c, "c:1"), NANOKV_OK);
  EXPECT_EQ(nanokv_cluster_remove(c, "c:1"), NANOKV_NOT_FOUND);
  EXPECT_EQ(nanokv_cluster_put(nullptr, "k", data.data(), 1, nullptr), NANOKV_INVALID_ARGUMENT);
  EXPECT_STREQ(nanokv_code_name(NANOKV_UNIMPLEMENTED), "Unimplemented");
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
}

}  // namespace
}  // namespace nanokv::testing
