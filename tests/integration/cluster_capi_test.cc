// The cluster's C ABI (nanokv/nanokv.h, nanokv_cluster_*) against a real
// master and kvds: what Python's nanokv.Cluster stands on, here under the
// sanitizers too (the Python suite runs uninstrumented).
#include <algorithm>
#include <cstring>
#include <vector>

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

// A put into another node's plan and a get into a local device buffer, both
// by device pointer: on the host backend, device memory is pages mapped in
// this process (a KV tensor's, through n0's kvd).
TEST_F(ClusterCapiTest, DeviceBytesCrossNodesByDevicePointer) {
  ASSERT_NO_FATAL_FAILURE(StartMaster());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  ASSERT_NO_FATAL_FAILURE(StartNode());
  nanokv_options_t attach;
  ASSERT_EQ(nanokv_options_init(&attach), NANOKV_OK);
  const std::string ipc = nodes_[0].ipc;
  attach.ipc_name = ipc.c_str();
  attach.tenant = "cluster-capi-device";
  nanokv_client_t* engine = nullptr;
  ASSERT_EQ(nanokv_attach(&attach, &engine), NANOKV_OK) << nanokv_last_error();
  nanokv_tensor_t* src_tensor = nullptr;
  nanokv_tensor_t* dst_tensor = nullptr;
  ASSERT_EQ(nanokv_tensor_create(engine, 0, 2u << 20, &src_tensor), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_tensor_create(engine, 0, 2u << 20, &dst_tensor), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_tensor_grow(src_tensor, 1), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_tensor_grow(dst_tensor, 1), NANOKV_OK) << nanokv_last_error();
  void* src = nullptr;
  void* dst = nullptr;
  ASSERT_EQ(nanokv_tensor_data(src_tensor, &src), NANOKV_OK);
  ASSERT_EQ(nanokv_tensor_data(dst_tensor, &dst), NANOKV_OK);
  const size_t bytes = (1u << 20) + 5;
  const auto data = Bytes(bytes, 9);
  ASSERT_EQ(nanokv_copy_to_device(engine, src, data.data(), bytes), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_fill_device(engine, dst, 0xAB, 2u << 20), NANOKV_OK);

  nanokv_cluster_t* c = Connect();
  ASSERT_NE(c, nullptr);
  const char* backend = nullptr;
  ASSERT_EQ(nanokv_cluster_backend(c, &backend), NANOKV_OK) << nanokv_last_error();
  EXPECT_STREQ(backend, "host");
  nanokv_write_options_t there{"n1", 1};
  ASSERT_EQ(nanokv_cluster_put_from_device(c, "d:1", src, bytes, &there), NANOKV_OK) << nanokv_last_error();
  nanokv_replica_t replica;
  size_t count = 0;
  ASSERT_EQ(nanokv_cluster_locate(c, "d:1", &replica, 1, &count, nullptr), NANOKV_OK);
  ASSERT_EQ(count, 1u);
  EXPECT_STREQ(replica.node_id, "n1");
  EXPECT_EQ(replica.local, 0);

  // One byte short: refused, nothing written into the destination.
  uint64_t got = 7;
  EXPECT_EQ(nanokv_cluster_get_to_device(c, "d:1", dst, bytes - 1, &got), NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "of room"), nullptr) << nanokv_last_error();
  EXPECT_EQ(got, 7u);
  std::vector<std::byte> back(2u << 20);
  ASSERT_EQ(nanokv_copy_to_host(engine, back.data(), dst, back.size()), NANOKV_OK);
  EXPECT_EQ(std::count(back.begin(), back.end(), std::byte{0xAB}), static_cast<long>(back.size()));

  ASSERT_EQ(nanokv_cluster_get_to_device(c, "d:1", dst, 2u << 20, &got), NANOKV_OK) << nanokv_last_error();
  EXPECT_EQ(got, bytes);
  ASSERT_EQ(nanokv_copy_to_host(engine, back.data(), dst, back.size()), NANOKV_OK);
  EXPECT_EQ(std::memcmp(back.data(), data.data(), bytes), 0);
  EXPECT_EQ(back[bytes], std::byte{0xAB}) << "nothing past the object";
  ASSERT_EQ(nanokv_cluster_get_to_device(c, "d:1", dst, bytes, nullptr), NANOKV_OK) << "bytes_out may be NULL";

  // Memory no device reaches (a GPU would fault) and null addresses: refused
  // before anything moves; the key stays free.
  std::vector<std::byte> host(4096);
  EXPECT_EQ(nanokv_cluster_put_from_device(c, "d:host", host.data(), host.size(), &there),
            NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "is not device memory"), nullptr) << nanokv_last_error();
  EXPECT_EQ(nanokv_cluster_locate(c, "d:host", &replica, 1, &count, nullptr), NANOKV_NOT_FOUND);
  EXPECT_EQ(nanokv_cluster_get_to_device(c, "d:1", host.data(), host.size() + bytes, &got),
            NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "is not device memory"), nullptr) << nanokv_last_error();
  EXPECT_EQ(nanokv_cluster_put_from_device(c, "d:null", nullptr, 8, nullptr), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(nanokv_cluster_get_to_device(c, "d:1", nullptr, bytes, &got), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(nanokv_cluster_get_to_device(c, "d:absent", dst, bytes, &got), NANOKV_NOT_FOUND);
  EXPECT_EQ(nanokv_cluster_put_from_device(c, nullptr, src, 8, nullptr), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(nanokv_cluster_get_to_device(nullptr, "d:1", dst, bytes, &got), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(nanokv_cluster_backend(c, nullptr), NANOKV_INVALID_ARGUMENT);

  ASSERT_EQ(nanokv_cluster_remove(c, "d:1"), NANOKV_OK) << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
  ASSERT_EQ(nanokv_tensor_destroy(src_tensor), NANOKV_OK);
  ASSERT_EQ(nanokv_tensor_destroy(dst_tensor), NANOKV_OK);
  ASSERT_EQ(nanokv_detach(engine), NANOKV_OK);
}

}  // namespace
}  // namespace nanokv::testing
