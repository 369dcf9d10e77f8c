// The prefix cache's two stores: the node's ObjectStore (this kvd's pages)
// and the cluster (ClusterClient: any node, located through the master).
#include <utility>

#include "libkv/prefix/prefix_backend.h"

namespace nanokv {
namespace {

// A key the store does not have, or has not READY, is simply absent; any
// other item error (a node gone) too: the prefix stops there either way.
std::vector<bool> Present(const auto& located) {
  std::vector<bool> out;
  out.reserve(located.size());
  for (const auto& item : located) out.push_back(item.ok());
  return out;
}

// Every item failed the same way: the store could not be asked at all.
template <typename T>
Status WholeCallFailure(const std::vector<Result<T>>& located) {
  if (located.empty() || located[0].ok()) return Status::OK();
  const Code code = located[0].status().code();
  if (code != Code::kUnavailable && code != Code::kProtocolError) {
    return Status::OK();
  }
  for (const auto& item : located) {
    if (item.ok() || item.status().code() != code) return Status::OK();
  }
  return located[0].status();
}

class NodeBackend final : public PrefixBackend {
 public:
  NodeBackend(ObjectStore* store, int preferred_device) : store_(store), preferred_device_(preferred_device) {}

  Result<std::string> DeviceBackendName() override {
    NANOKV_ASSIGN_OR_RETURN(ObjectStoreInfo info, store_->Info());
    return info.backend;
  }

  Result<std::vector<bool>> Exists(const std::vector<std::string>& keys) override {
    std::vector<Result<ObjectPlan>> located = store_->BatchGetLocation(keys);
    NANOKV_RETURN_IF_ERROR(WholeCallFailure(located));
    return Present(located);
  }

  std::vector<Status> Put(const std::vector<PrefixPut>& items, void* stream) override {
    std::vector<ObjectStore::DevicePut> puts;
    puts.reserve(items.size());
    for (const PrefixPut& p : items) puts.push_back({p.key, p.src, p.bytes});
    return store_->BatchPutFromDevice(puts, preferred_device_, stream);
  }

  std::vector<Result<uint64_t>> Get(const std::vector<PrefixGet>& items, void* stream) override {
    std::vector<ObjectStore::DeviceGet> gets;
    gets.reserve(items.size());
    for (const PrefixGet& g : items) gets.push_back({g.key, g.dst, g.capacity});
    return store_->BatchGetToDevice(gets, stream);
  }

  std::vector<Result<ObjectView>> Views(const std::vector<std::string>& keys) override {
    return store_->BatchView(keys);
  }

 private:
  ObjectStore* store_;
  int preferred_device_;
};

class ClusterBackend final : public PrefixBackend {
 public:
  ClusterBackend(ClusterClient* cluster, WriteOptions write) : cluster_(cluster), write_(std::move(write)) {}

  Result<std::string> DeviceBackendName() override { return cluster_->DeviceBackendName(); }

  Result<std::vector<bool>> Exists(const std::vector<std::string>& keys) override {
    std::vector<Result<ObjectLocation>> located = cluster_->BatchGetLocation(keys);
    NANOKV_RETURN_IF_ERROR(WholeCallFailure(located));
    std::vector<bool> out = Present(located);
    // A key the master knows with no READY copy left is no hit either.
    for (size_t i = 0; i < located.size(); ++i) {
      if (located[i].ok() && located[i]->replicas.empty()) out[i] = false;
    }
    return out;
  }

  std::vector<Status> Put(const std::vector<PrefixPut>& items, void* stream) override {
    std::vector<DevicePut> puts;
    puts.reserve(items.size());
    for (const PrefixPut& p : items) puts.push_back({p.key, p.src, p.bytes, write_});
    return cluster_->BatchPutFromDevice(puts, stream);
  }

  std::vector<Result<uint64_t>> Get(const std::vector<PrefixGet>& items, void* stream) override {
    std::vector<DeviceGet> gets;
    gets.reserve(items.size());
    for (const PrefixGet& g : items) gets.push_back({g.key, g.dst, g.capacity});
    return cluster_->BatchGetToDevice(gets, stream);
  }

  std::vector<Result<ObjectView>> Views(const std::vector<std::string>& keys) override {
    return cluster_->BatchView(keys);
  }

 private:
  ClusterClient* cluster_;
  WriteOptions write_;
};

}  // namespace

std::unique_ptr<PrefixBackend> NodePrefixBackend(ObjectStore* store, int preferred_device) {
  return std::make_unique<NodeBackend>(store, preferred_device);
}

std::unique_ptr<PrefixBackend> ClusterPrefixBackend(ClusterClient* cluster, WriteOptions write) {
  return std::make_unique<ClusterBackend>(cluster, std::move(write));
}

}  // namespace nanokv
