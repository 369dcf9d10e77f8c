// ClusterClient's device puts through slabs of this node's store
// (ClusterClient::UseSlabs, issue 34): the items a slab takes go into the
// local ObjectStore with no request to the master or kvd; the master learns
// of them from this node's events, as of any object the node holds.
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/cluster_slab_puts.h"
#include "nanokv/cluster_client.h"

namespace nanokv {
namespace cluster {
namespace {

// The store device a slab put of `options` names (-1: the store's one slab
// device), or nullopt where the master's plans take it.
std::optional<int> SlabDeviceOf(const WriteOptions& options, const std::string& node_id) {
  if (options.replica_num != 1) return std::nullopt;
  const std::string& segment = options.preferred_segment;
  if (segment.empty() || segment == node_id) return -1;
  const std::string prefix = node_id + "/";
  if (segment.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int device = -1;
  const char* first = segment.data() + prefix.size();
  const char* last = segment.data() + segment.size();
  auto [end, error] = std::from_chars(first, last, device);
  if (error != std::errc() || end != last || device < 0) return std::nullopt;
  return device;
}

}  // namespace

std::vector<size_t> PutThroughSlabs(ClusterClient::Impl& impl, const std::vector<DevicePut>& items, void* stream,
                                    std::vector<Status>& out) {
  std::vector<size_t> rest;
  if (!impl.uses_slabs.load(std::memory_order_acquire)) {
    for (size_t i = 0; i < items.size(); ++i) rest.push_back(i);
    return rest;
  }
  Result<ObjectStore*> local = impl.Local();
  // By device: one store batch each (one wait on the stream).
  std::map<int, std::vector<size_t>> slabbed;
  for (size_t i = 0; i < items.size(); ++i) {
    const DevicePut& item = items[i];
    const std::optional<int> device = SlabDeviceOf(item.options, impl.options().node_id);
    if (local.ok() && device.has_value() && (*local)->SlabServes(item.key, item.bytes, *device)) {
      slabbed[*device].push_back(i);
    } else {
      rest.push_back(i);
    }
  }
  for (const auto& [device, which] : slabbed) {
    std::vector<ObjectStore::DevicePut> puts;
    puts.reserve(which.size());
    for (size_t i : which) puts.push_back({items[i].key, items[i].src, items[i].bytes});
    std::vector<Status> done = (*local)->BatchPutFromDevice(puts, device, stream);
    for (size_t k = 0; k < which.size(); ++k) out[which[k]] = std::move(done[k]);
  }
  return rest;
}

}  // namespace cluster

Status ClusterClient::UseSlabs(int device, const SlabPutOptions& options) {
  NANOKV_ASSIGN_OR_RETURN(ObjectStore * local, impl_->Local());
  NANOKV_RETURN_IF_ERROR(local->UseSlabs(device, options));
  impl_->uses_slabs.store(true, std::memory_order_release);
  return Status::OK();
}

Status ClusterClient::FlushSlabPuts(uint32_t timeout_ms) {
  if (!impl_->uses_slabs.load(std::memory_order_acquire)) return Status::OK();
  NANOKV_ASSIGN_OR_RETURN(ObjectStore * local, impl_->Local());
  return local->FlushSlabPuts(timeout_ms);
}

}  // namespace nanokv
