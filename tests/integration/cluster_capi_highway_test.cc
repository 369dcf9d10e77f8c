// The KV highway through the C ABI (nanokv/nanokv.h: device batches, the
// stream-ordered put, views) against a real master and two kvds, with only
// libnanokv.so linked: what Python's nanokv.Cluster stands on. Device memory
// is a KV tensor's pages mapped here (the host backend's device memory).
#include <cstring>
#include <string>
#include <vector>

#include "nanokv/nanokv.h"
#include "tests/integration/cluster_processes.h"

namespace nanokv::testing {
namespace {

class ClusterCapiHighwayTest : public ClusterProcesses {
 protected:
  void TearDown() override {
    if (engine_ != nullptr) {
      for (nanokv_tensor_t* t : {src_tensor_, dst_tensor_}) {
        if (t != nullptr) {
          EXPECT_EQ(nanokv_tensor_destroy(t), NANOKV_OK) << nanokv_last_error();
        }
      }
      EXPECT_EQ(nanokv_detach(engine_), NANOKV_OK) << nanokv_last_error();
    }
    ClusterProcesses::TearDown();
  }

  // A master and two nodes; with `one_host`, both on one host and without
  // a transfer agent, so only the path through n1's kvd socket moves bytes.
  void StartCluster(bool one_host) {
    one_host_ = one_host;
    if (one_host) data_address_ = "";
    StartMaster();
    StartNode(16);
    StartNode(16);
  }

  // A cluster client on `node`, saying it is on that node's host.
  nanokv_cluster_t* Connect(size_t node) {
    const char* masters[] = {address_.c_str()};
    const std::string node_id = "n" + std::to_string(node), host = HostOf(node);
    nanokv_cluster_options_t o{};
    o.masters = masters;
    o.master_count = 1;
    o.node_id = node_id.c_str();
    o.host_id = host.c_str();
    o.ipc_name = nodes_[node].ipc.c_str();
    o.backend = "host";
    nanokv_cluster_t* cluster = nullptr;
    EXPECT_EQ(nanokv_cluster_connect(&o, &cluster), NANOKV_OK) << nanokv_last_error();
    return cluster;
  }

  // 8 MiB of device memory for sources and 8 for destinations: a KV
  // tensor's pages through n0's kvd.
  void MakeDeviceMemory() {
    nanokv_options_t attach;
    ASSERT_EQ(nanokv_options_init(&attach), NANOKV_OK);
    attach.ipc_name = nodes_[0].ipc.c_str();
    attach.tenant = "capi-highway";
    ASSERT_EQ(nanokv_attach(&attach, &engine_), NANOKV_OK) << nanokv_last_error();
    for (nanokv_tensor_t** t : {&src_tensor_, &dst_tensor_}) {
      ASSERT_EQ(nanokv_tensor_create(engine_, 0, kDevice, t), NANOKV_OK) << nanokv_last_error();
      ASSERT_EQ(nanokv_tensor_grow(*t, kDevice / kPage), NANOKV_OK) << nanokv_last_error();
    }
    ASSERT_EQ(nanokv_tensor_data(src_tensor_, reinterpret_cast<void**>(&src_)), NANOKV_OK);
    ASSERT_EQ(nanokv_tensor_data(dst_tensor_, reinterpret_cast<void**>(&dst_)), NANOKV_OK);
    ASSERT_EQ(nanokv_fill_device(engine_, dst_, 0xEE, kDevice), NANOKV_OK);
  }

  // `count` objects of `bytes` at src_ (object i holding Bytes(bytes, seed + i)).
  void Stage(size_t count, size_t bytes, int seed) {
    for (size_t i = 0; i < count; ++i) {
      const auto data = Bytes(bytes, seed + static_cast<int>(i));
      ASSERT_EQ(nanokv_copy_to_device(engine_, src_ + i * bytes, data.data(), bytes), NANOKV_OK);
    }
  }
  std::vector<std::byte> Read(const void* device, size_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_EQ(nanokv_copy_to_host(engine_, out.data(), device, bytes), NANOKV_OK) << nanokv_last_error();
    return out;
  }

  // The keys prefix0 .. prefix<count-1> and their C strings.
  struct Keys {
    std::vector<std::string> names;
    std::vector<const char*> c;
  };
  static Keys KeysOf(const std::string& prefix, size_t count) {
    Keys keys;
    for (size_t i = 0; i < count; ++i) keys.names.push_back(prefix + std::to_string(i));
    for (const std::string& k : keys.names) keys.c.push_back(k.c_str());
    return keys;
  }

  // Puts `count` staged objects of `bytes` to node `to` as one batch.
  void PutBatch(nanokv_cluster_t* c, const Keys& keys, size_t bytes, const char* to) {
    const size_t count = keys.c.size();
    std::vector<const void*> srcs;
    for (size_t i = 0; i < count; ++i) srcs.push_back(src_ + i * bytes);
    std::vector<uint64_t> sizes(count, bytes);
    std::vector<int> results(count, -1);
    nanokv_write_options_t there{to, 1};
    ASSERT_EQ(nanokv_cluster_put_from_device_batch(c, keys.c.data(), srcs.data(), sizes.data(), count, &there,
                                                   nullptr, results.data()),
              NANOKV_OK)
        << nanokv_last_error();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(results[i], NANOKV_OK) << keys.names[i] << ": " << nanokv_last_error();
  }

  // Gets them back into dst_ as one batch and checks every byte.
  void ExpectBatchBack(nanokv_cluster_t* c, const Keys& keys, size_t bytes, int seed) {
    const size_t count = keys.c.size();
    ASSERT_EQ(nanokv_fill_device(engine_, dst_, 0xEE, kDevice), NANOKV_OK);
    std::vector<void*> dsts;
    for (size_t i = 0; i < count; ++i) dsts.push_back(dst_ + i * bytes);
    std::vector<uint64_t> capacities(count, bytes), sizes(count, 0);
    std::vector<int> results(count, -1);
    ASSERT_EQ(nanokv_cluster_get_to_device_batch(c, keys.c.data(), dsts.data(), capacities.data(), count, nullptr,
                                                 sizes.data(), results.data()),
              NANOKV_OK)
        << nanokv_last_error();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(results[i], NANOKV_OK) << keys.names[i] << ": " << nanokv_last_error();
      EXPECT_EQ(sizes[i], bytes);
      EXPECT_EQ(Read(dst_ + i * bytes, bytes), Bytes(bytes, seed + static_cast<int>(i))) << keys.names[i];
    }
  }

  static constexpr size_t kDevice = 8u << 20;
  nanokv_client_t* engine_ = nullptr;
  nanokv_tensor_t* src_tensor_ = nullptr;
  nanokv_tensor_t* dst_tensor_ = nullptr;
  std::byte* src_ = nullptr;
  std::byte* dst_ = nullptr;
};

// n1 has no transfer agent: only the host path (its kvd's socket and pages,
// which host_id in the options selects) can carry these bytes.
TEST_F(ClusterCapiHighwayTest, BatchesMoveThroughAnotherKvdOfThisHost) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/true));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  nanokv_cluster_t* producer = Connect(0);
  nanokv_cluster_t* decoder = Connect(1);
  ASSERT_NE(producer, nullptr);
  ASSERT_NE(decoder, nullptr);
  const size_t count = 33, bytes = 100'001;
  ASSERT_NO_FATAL_FAILURE(Stage(count, bytes, 7));
  const Keys keys = KeysOf("hw:L", count);
  ASSERT_NO_FATAL_FAILURE(PutBatch(producer, keys, bytes, "n1"));
  nanokv_replica_t replica;
  size_t copies = 0;
  ASSERT_EQ(nanokv_cluster_locate(producer, "hw:L0", &replica, 1, &copies, nullptr), NANOKV_OK);
  EXPECT_STREQ(replica.node_id, "n1");
  EXPECT_EQ(replica.local, 0);
  EXPECT_EQ(replica.same_host, 1);
  ASSERT_NO_FATAL_FAILURE(ExpectBatchBack(decoder, keys, bytes, 7));   // its own node's copies
  ASSERT_NO_FATAL_FAILURE(ExpectBatchBack(producer, keys, bytes, 7));  // another node's, same host

  // One item short of room, one absent: each answers alone, nothing copied
  // for them, the others whole.
  const char* some[] = {"hw:L1", "hw:L2", "hw:absent"};
  void* dsts[] = {dst_, dst_ + bytes, dst_ + 2 * bytes};
  uint64_t capacities[] = {bytes, bytes - 1, bytes};
  uint64_t sizes[] = {9, 9, 9};
  int results[] = {-1, -1, -1};
  ASSERT_EQ(nanokv_fill_device(engine_, dst_, 0xEE, kDevice), NANOKV_OK);
  ASSERT_EQ(nanokv_cluster_get_to_device_batch(producer, some, dsts, capacities, 3, nullptr, sizes, results),
            NANOKV_OK);
  EXPECT_EQ(results[0], NANOKV_OK);
  EXPECT_EQ(results[1], NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(results[2], NANOKV_NOT_FOUND);
  EXPECT_NE(std::strstr(nanokv_last_error(), "hw:L2"), nullptr) << nanokv_last_error();
  EXPECT_EQ(sizes[0], bytes);
  EXPECT_EQ(sizes[1], 0u);
  EXPECT_EQ(sizes[2], 0u);
  EXPECT_EQ(Read(dst_, bytes), Bytes(bytes, 8));
  EXPECT_EQ(Read(dst_ + bytes, bytes - 1), std::vector<std::byte>(bytes - 1, std::byte{0xEE}));

  // A key twice in one batch: one stands, the other fails alone.
  const char* twice[] = {"hw:twice", "hw:twice"};
  const void* srcs[] = {src_, src_};
  uint64_t lengths[] = {4096, 4096};
  nanokv_write_options_t there{"n1", 1};
  ASSERT_EQ(nanokv_cluster_put_from_device_batch(producer, twice, srcs, lengths, 2, &there, nullptr, results),
            NANOKV_OK);
  EXPECT_NE(results[0] == NANOKV_OK, results[1] == NANOKV_OK) << results[0] << " / " << results[1];
  ASSERT_EQ(nanokv_cluster_close(producer), NANOKV_OK);
  ASSERT_EQ(nanokv_cluster_close(decoder), NANOKV_OK);
}

// Without host_id the client is on the boot id's host, which is not the
// nodes' ("host-shared"): n1 is another host, and without a transfer agent
// nothing carries its bytes. The option is what put them on one host.
TEST_F(ClusterCapiHighwayTest, HostIdDecidesThePath) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/true));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  ASSERT_NO_FATAL_FAILURE(Stage(1, 5000, 3));
  const char* masters[] = {address_.c_str()};
  nanokv_cluster_options_t o{};
  o.masters = masters;
  o.master_count = 1;
  o.node_id = "n0";
  o.ipc_name = nodes_[0].ipc.c_str();
  o.backend = "host";
  o.host_id = "another-host";
  nanokv_cluster_t* elsewhere = nullptr;
  ASSERT_EQ(nanokv_cluster_connect(&o, &elsewhere), NANOKV_OK) << nanokv_last_error();
  const char* key[] = {"hw:far"};
  const void* src[] = {src_};
  uint64_t size[] = {5000};
  int result = -1;
  nanokv_write_options_t there{"n1", 1};
  ASSERT_EQ(nanokv_cluster_put_from_device_batch(elsewhere, key, src, size, 1, &there, nullptr, &result),
            NANOKV_OK);
  EXPECT_EQ(result, NANOKV_FAILED_PRECONDITION);
  EXPECT_NE(std::strstr(nanokv_last_error(), "master.data_address"), nullptr) << nanokv_last_error();
  nanokv_replica_t replica;
  size_t copies = 0;
  EXPECT_EQ(nanokv_cluster_locate(elsewhere, "hw:far", &replica, 1, &copies, nullptr), NANOKV_NOT_FOUND)
      << "a failed item is revoked";
  ASSERT_EQ(nanokv_cluster_close(elsewhere), NANOKV_OK);
  nanokv_cluster_t* here = Connect(0);
  ASSERT_NE(here, nullptr);
  ASSERT_EQ(nanokv_cluster_put_from_device_batch(here, key, src, size, 1, &there, nullptr, &result), NANOKV_OK);
  EXPECT_EQ(result, NANOKV_OK) << nanokv_last_error();
  o.access_devices = nullptr;
  o.access_device_count = 2;
  EXPECT_EQ(nanokv_cluster_connect(&o, &elsewhere), NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "access_devices is null"), nullptr) << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_close(here), NANOKV_OK);
}

TEST_F(ClusterCapiHighwayTest, AStreamOrderedPutIsWaitedOnThroughItsHandle) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/true));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  nanokv_cluster_t* c = Connect(0);
  ASSERT_NE(c, nullptr);
  const size_t count = 12, bytes = 65'537;
  ASSERT_NO_FATAL_FAILURE(Stage(count, bytes, 21));
  const Keys keys = KeysOf("async:", count);
  std::vector<const void*> srcs;
  for (size_t i = 0; i < count; ++i) srcs.push_back(src_ + i * bytes);
  std::vector<uint64_t> sizes(count, bytes);
  nanokv_write_options_t there{"n1", 1};
  nanokv_cluster_pending_t* pending = nullptr;
  ASSERT_EQ(nanokv_cluster_put_from_device_async(c, keys.c.data(), srcs.data(), sizes.data(), count, &there,
                                                 nullptr, &pending),
            NANOKV_OK)
      << nanokv_last_error();
  size_t items = 0;
  ASSERT_EQ(nanokv_cluster_pending_count(pending, &items), NANOKV_OK);
  EXPECT_EQ(items, count);
  void* event = reinterpret_cast<void*>(1);
  ASSERT_EQ(nanokv_cluster_pending_event(pending, &event), NANOKV_OK);
  EXPECT_EQ(event, nullptr) << "the host backend copies during the call: no event";
  EXPECT_EQ(nanokv_cluster_close(c), NANOKV_FAILED_PRECONDITION) << "a pending put is alive";
  EXPECT_NE(std::strstr(nanokv_last_error(), "pending put"), nullptr) << nanokv_last_error();
  std::vector<int> results(count, -1);
  EXPECT_EQ(nanokv_cluster_pending_wait(pending, results.data(), count - 1), NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "results holds 11 entries, the batch has 12"), nullptr)
      << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_pending_wait(pending, results.data(), count), NANOKV_OK);
  for (size_t i = 0; i < count; ++i) EXPECT_EQ(results[i], NANOKV_OK) << keys.names[i];
  int done = 0;
  ASSERT_EQ(nanokv_cluster_pending_done(pending, &done), NANOKV_OK);
  EXPECT_EQ(done, 1);
  ASSERT_EQ(nanokv_cluster_pending_free(pending), NANOKV_OK);
  EXPECT_EQ(nanokv_cluster_pending_done(pending, &done), NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "unknown pending put handle"), nullptr) << nanokv_last_error();
  ASSERT_NO_FATAL_FAILURE(ExpectBatchBack(c, keys, bytes, 21));

  // Freed unwaited: free waits, and the batch stands whole.
  const Keys more = KeysOf("unwaited:", count);
  ASSERT_EQ(nanokv_cluster_put_from_device_async(c, more.c.data(), srcs.data(), sizes.data(), count, &there,
                                                 nullptr, &pending),
            NANOKV_OK);
  ASSERT_EQ(nanokv_cluster_pending_free(pending), NANOKV_OK);
  ASSERT_NO_FATAL_FAILURE(ExpectBatchBack(c, more, bytes, 21));
  // A refused batch makes no handle.
  pending = nullptr;
  EXPECT_EQ(nanokv_cluster_put_from_device_async(c, more.c.data(), srcs.data(), sizes.data(), 0, &there, nullptr,
                                                 &pending),
            NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "count is 0"), nullptr) << nanokv_last_error();
  EXPECT_EQ(pending, nullptr);
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
}

TEST_F(ClusterCapiHighwayTest, ViewsReadCopiesOfThisHostInPlace) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/true));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  nanokv_cluster_t* c = Connect(0);
  ASSERT_NE(c, nullptr);
  const size_t bytes = 300'000;
  ASSERT_NO_FATAL_FAILURE(Stage(2, bytes, 50));
  const Keys keys = KeysOf("view:", 2);
  ASSERT_NO_FATAL_FAILURE(PutBatch(c, keys, bytes, "n1"));
  nanokv_view_t* view = nullptr;
  ASSERT_EQ(nanokv_cluster_view(c, "view:1", &view), NANOKV_OK) << nanokv_last_error();
  const void* data = nullptr;
  uint64_t size = 0;
  ASSERT_EQ(nanokv_view_data(view, &data), NANOKV_OK);
  ASSERT_EQ(nanokv_view_size(view, &size), NANOKV_OK);
  ASSERT_EQ(size, bytes);
  EXPECT_EQ(Read(data, size), Bytes(bytes, 51)) << "n1's pages, read in place";
  EXPECT_EQ(nanokv_cluster_remove(c, "view:1"), NANOKV_FAILED_PRECONDITION) << "a view holds its object";

  const char* batch[] = {"view:0", "view:absent", "view:1"};
  nanokv_view_t* views[3];
  int results[3];
  ASSERT_EQ(nanokv_cluster_view_batch(c, batch, 3, views, results), NANOKV_OK);
  EXPECT_EQ(results[0], NANOKV_OK);
  EXPECT_EQ(results[1], NANOKV_NOT_FOUND);
  EXPECT_EQ(results[2], NANOKV_OK);
  EXPECT_EQ(views[1], nullptr);
  ASSERT_EQ(nanokv_view_data(views[0], &data), NANOKV_OK);
  EXPECT_EQ(Read(data, bytes), Bytes(bytes, 50));
  // The cluster goes first; the views still read, and hold, until freed.
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
  EXPECT_EQ(Read(data, bytes), Bytes(bytes, 50));
  for (nanokv_view_t* v : {view, views[0], views[2]}) ASSERT_EQ(nanokv_view_free(v), NANOKV_OK);
  c = Connect(0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(nanokv_cluster_remove(c, "view:1"), NANOKV_OK) << nanokv_last_error();
  EXPECT_EQ(nanokv_cluster_view(c, "view:1", &view), NANOKV_NOT_FOUND);
  EXPECT_EQ(nanokv_cluster_view(c, nullptr, &view), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(nanokv_cluster_view(c, "view:0", nullptr), NANOKV_INVALID_ARGUMENT);
  EXPECT_EQ(nanokv_cluster_view_batch(c, batch, 3, nullptr, results), NANOKV_INVALID_ARGUMENT);
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
}

TEST_F(ClusterCapiHighwayTest, AnotherHostsCopyMovesOverUcxAndIsNotViewed) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/false));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  nanokv_cluster_t* c = Connect(0);
  ASSERT_NE(c, nullptr);
  const size_t count = 5, bytes = 700'001;
  ASSERT_NO_FATAL_FAILURE(Stage(count, bytes, 60));
  const Keys keys = KeysOf("far:", count);
  ASSERT_NO_FATAL_FAILURE(PutBatch(c, keys, bytes, "n1"));
  nanokv_replica_t replica;
  size_t copies = 0;
  ASSERT_EQ(nanokv_cluster_locate(c, "far:0", &replica, 1, &copies, nullptr), NANOKV_OK);
  EXPECT_EQ(replica.same_host, 0);
  ASSERT_NO_FATAL_FAILURE(ExpectBatchBack(c, keys, bytes, 60));
  nanokv_view_t* view = nullptr;
  EXPECT_EQ(nanokv_cluster_view(c, "far:0", &view), NANOKV_FAILED_PRECONDITION);
  EXPECT_NE(std::strstr(nanokv_last_error(), "on another host"), nullptr) << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
}

// To another host the committer sends the sources over UCX after the
// stream ran, so freeing the handle must wait for that: the caller may reuse
// the sources as soon as free returns.
TEST_F(ClusterCapiHighwayTest, FreeingAStreamOrderedPutWaitsBeforeTheSourcesAreReused) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/false));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  nanokv_cluster_t* c = Connect(0);
  ASSERT_NE(c, nullptr);
  const size_t count = 6, bytes = (1u << 20) + 7;
  ASSERT_NO_FATAL_FAILURE(Stage(count, bytes, 70));
  const Keys keys = KeysOf("reuse:", count);
  std::vector<const void*> srcs;
  for (size_t i = 0; i < count; ++i) srcs.push_back(src_ + i * bytes);
  std::vector<uint64_t> sizes(count, bytes);
  nanokv_write_options_t there{"n1", 1};
  nanokv_cluster_pending_t* pending = nullptr;
  ASSERT_EQ(nanokv_cluster_put_from_device_async(c, keys.c.data(), srcs.data(), sizes.data(), count, &there,
                                                 nullptr, &pending),
            NANOKV_OK)
      << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_pending_free(pending), NANOKV_OK);
  ASSERT_EQ(nanokv_fill_device(engine_, src_, 0, count * bytes), NANOKV_OK);  // reused at once
  ASSERT_NO_FATAL_FAILURE(ExpectBatchBack(c, keys, bytes, 70));
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
}

TEST_F(ClusterCapiHighwayTest, BadArgumentsAreNamedBeforeAnythingMoves) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(/*one_host=*/true));
  ASSERT_NO_FATAL_FAILURE(MakeDeviceMemory());
  nanokv_cluster_t* c = Connect(0);
  ASSERT_NE(c, nullptr);
  const char* keys[] = {"bad:0", "bad:1"};
  const char* null_key[] = {"bad:0", nullptr};
  const void* srcs[] = {src_, nullptr};
  void* dsts[] = {dst_, nullptr};
  uint64_t sizes[] = {64, 64};
  int results[2];
  nanokv_write_options_t there{"n1", 1};
  nanokv_cluster_pending_t* pending = nullptr;
  auto expect = [](int code, const char* text) {
    EXPECT_EQ(code, NANOKV_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(nanokv_last_error(), text), nullptr) << nanokv_last_error() << " (want " << text << ")";
  };
  expect(nanokv_cluster_put_from_device_batch(c, keys, srcs, sizes, 2, &there, nullptr, results), "srcs[1] is null");
  expect(nanokv_cluster_put_from_device_batch(c, null_key, srcs, sizes, 2, &there, nullptr, results),
         "keys[1] is null");
  expect(nanokv_cluster_put_from_device_batch(c, keys, srcs, sizes, 1, &there, nullptr, nullptr), "results is null");
  expect(nanokv_cluster_put_from_device_batch(nullptr, keys, srcs, sizes, 1, &there, nullptr, results),
         "cluster is null");
  expect(nanokv_cluster_get_to_device_batch(c, keys, dsts, sizes, 2, nullptr, sizes, results), "dsts[1] is null");
  expect(nanokv_cluster_get_to_device_batch(c, keys, dsts, nullptr, 1, nullptr, sizes, results),
         "capacities is null");
  expect(nanokv_cluster_put_from_device_async(c, keys, srcs, sizes, 2, &there, nullptr, &pending), "srcs[1] is null");
  expect(nanokv_cluster_put_from_device_async(c, keys, srcs, sizes, 1, &there, nullptr, nullptr),
         "pending_out is null");
  expect(nanokv_cluster_pending_wait(nullptr, results, 2), "pending put is null");
  expect(nanokv_cluster_pending_event(reinterpret_cast<nanokv_cluster_pending_t*>(c), nullptr),
         "unknown pending put handle");
  expect(nanokv_cluster_pending_free(reinterpret_cast<nanokv_cluster_pending_t*>(c)), "unknown pending put handle");
  for (const char* key : keys) {
    nanokv_replica_t replica;
    size_t copies = 0;
    EXPECT_EQ(nanokv_cluster_locate(c, key, &replica, 1, &copies, nullptr), NANOKV_NOT_FOUND) << key;
  }
  // Empty batches do nothing and need no arrays.
  EXPECT_EQ(nanokv_cluster_put_from_device_batch(c, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr),
            NANOKV_OK);
  EXPECT_EQ(nanokv_cluster_get_to_device_batch(c, nullptr, nullptr, nullptr, 0, nullptr, nullptr, nullptr),
            NANOKV_OK);
  // Memory no device reaches: the item is refused, nothing stored.
  std::vector<std::byte> host(4096);
  const void* host_src[] = {host.data()};
  ASSERT_EQ(nanokv_cluster_put_from_device_batch(c, keys, host_src, sizes, 1, &there, nullptr, results), NANOKV_OK);
  EXPECT_EQ(results[0], NANOKV_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(nanokv_last_error(), "is not device memory"), nullptr) << nanokv_last_error();
  ASSERT_EQ(nanokv_cluster_close(c), NANOKV_OK);
}

}  // namespace
}  // namespace nanokv::testing
