// The cluster of cluster_processes.h (a master and kvds, real processes)
// with ClusterClients in the test as engines, and the node's own object
// stores as its local engines see them.
#ifndef NANOKV_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_
#define NANOKV_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/cluster_client.h"
#include "nanokv/object_store.h"
#include "tests/integration/cluster_processes.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {

class ClusterFixture : public ClusterProcesses {
 protected:
  // A client on node `node` (its local kvd), with the options given.
  std::unique_ptr<ClusterClient> Client(size_t node = 0, ClusterClientOptions options = {}) {
    if (options.masters.empty()) options.masters = {address_};
    if (options.node_id.empty()) options.node_id = "n" + std::to_string(node);
    if (options.host_id.empty()) options.host_id = HostOf(node);
    if (options.ipc_name.empty() && node < nodes_.size()) options.ipc_name = nodes_[node].ipc;
    options.backend = Backend();
    auto client = ClusterClient::Connect(options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // The node's own object store, as an engine on that node sees it.
  std::unique_ptr<ObjectStore> Store(size_t node) {
    ObjectStoreOptions options;
    options.ipc_name = nodes_[node].ipc;
    options.backend = Backend();
    auto store = ObjectStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // What the master says of node `id` (asked with admin_'s token and TLS).
  std::string NodeState(const std::string& id) {
    auto client = Client(nodes_.size(), admin_);
    if (client == nullptr) return "";
    auto status = client->Cluster();
    if (!status.ok()) return "";
    for (const auto& n : status->nodes) {
      if (n.node_id == id) return n.state;
    }
    return "unknown";
  }

  void WaitNodeState(const std::string& id, const std::string& state,
                     std::chrono::seconds within = std::chrono::seconds(20)) {
    std::string seen;
    bool reached = WaitFor([&] { return (seen = NodeState(id)) == state; }, within);
    ASSERT_TRUE(reached) << "node " << id << " is " << seen << ", not " << state;
  }

  // Where the master says `key` lives: its nodes, nearest first ({} if nowhere).
  std::vector<std::string> Where(ClusterClient& client, const std::string& key) {
    auto location = client.GetLocation(key);
    std::vector<std::string> nodes;
    if (location.ok()) {
      for (const Replica& r : location->replicas) nodes.push_back(r.node_id);
    }
    return nodes;
  }

  // The transfer agent's address `node` registered ("" if none).
  std::string DataAddress(ClusterClient& client, const std::string& node) {
    auto cluster = client.Cluster();
    if (!cluster.ok()) return "";
    for (const auto& n : cluster->nodes) {
      if (n.node_id == node) return n.data_address;
    }
    return "";
  }

  ClusterClientOptions admin_;  // how the fixture itself asks the master (token, TLS)
};

// ClusterFixture with this process's own backend (the test's, host or
// cuda) for device buffers the cluster's device calls read and write.
class ClusterDeviceFixture : public ClusterFixture {
 protected:
  void SetUp() override {
    ClusterFixture::SetUp();
    auto opened = gpu::OpenBackend(Backend());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    backend_ = std::move(opened).value();
  }
  void TearDown() override {
    buffers_.clear();
    ClusterFixture::TearDown();
  }
  // At least `bytes` of device memory on device 0, kept until the test
  // ends (nullptr, with a failure, where none is had).
  gpu::DeviceBuffer* NewBuffer(size_t bytes) {
    auto buffer = gpu::DeviceBuffer::Create(*backend_, 0, bytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status().ToString();
    if (!buffer.ok()) return nullptr;
    buffers_.push_back(std::move(buffer).value());
    return buffers_.back().get();
  }
  std::vector<std::byte> Read(const void* device, size_t bytes) {
    std::vector<std::byte> out(bytes);
    EXPECT_OK(backend_->Copy(out.data(), device, bytes, gpu::CopyKind::kDeviceToHost));
    return out;
  }

  std::unique_ptr<gpu::Backend> backend_;
  std::vector<std::unique_ptr<gpu::DeviceBuffer>> buffers_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_CLUSTER_FIXTURE_H_
