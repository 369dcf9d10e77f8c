// ClusterClient's device puts through slabs of this host's stores
// (ClusterClient::UseSlabs and UseSlabsOn, issue 34): the items a slab
// takes go into this node's ObjectStore, or another node's of this host
// (through its kvd's socket and pages), with no request to the master or
// kvd; the master learns of them from that node's events, as of any object
// it holds.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipc/master/master_checks.h"
#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/cluster_slab_puts.h"
#include "nanokv/cluster_client.h"

namespace nanokv {
namespace cluster {
namespace {

// Where a slab put of `options` goes: a store of this host holding slabs
// and its device (-1: the store's one slab device), or nullopt where the
// master's plans take it.
struct SlabTarget {
  ObjectStore* store = nullptr;
  int device = -1;
};
std::optional<SlabTarget> SlabTargetOf(ClusterClient::Impl& impl, const WriteOptions& options) {
  if (options.replica_num != 1) return std::nullopt;
  Result<master::Segment> segment = master::ParseSegment(options.preferred_segment);  // a bad one: the plans' refusal
  if (!segment.ok()) return std::nullopt;
  if (segment->node_id.empty() || segment->node_id == impl.options().node_id) {
    Result<ObjectStore*> local = impl.Local();
    if (!local.ok()) return std::nullopt;
    return SlabTarget{*local, segment->device};
  }
  ObjectStore* store = impl.SlabStoreOf(segment->node_id);
  if (store == nullptr) return std::nullopt;
  return SlabTarget{store, segment->device};
}

}  // namespace

std::vector<size_t> PutThroughSlabs(ClusterClient::Impl& impl, const std::vector<DevicePut>& items, void* stream,
                                    std::vector<Status>& out) {
  std::vector<size_t> rest;
  if (!impl.uses_slabs.load(std::memory_order_acquire)) {
    for (size_t i = 0; i < items.size(); ++i) rest.push_back(i);
    return rest;
  }
  // By store and device: one store batch each (one wait on the stream).
  std::map<std::pair<ObjectStore*, int>, std::vector<size_t>> slabbed;
  // Each segment's target found once a batch (a parse and the client's lock).
  std::map<std::pair<std::string_view, uint32_t>, std::optional<SlabTarget>> targets;
  for (size_t i = 0; i < items.size(); ++i) {
    const DevicePut& item = items[i];
    auto [known, fresh] = targets.try_emplace({item.options.preferred_segment, item.options.replica_num});
    if (fresh) known->second = SlabTargetOf(impl, item.options);
    const std::optional<SlabTarget>& target = known->second;
    if (target.has_value() && target->store->SlabServes(item.key, item.bytes, target->device)) {
      slabbed[{target->store, target->device}].push_back(i);
    } else {
      rest.push_back(i);
    }
  }
  for (const auto& [where, which] : slabbed) {
    std::vector<ObjectStore::DevicePut> puts;
    puts.reserve(which.size());
    for (size_t i : which) puts.push_back({items[i].key, items[i].src, items[i].bytes});
    std::vector<Status> done = where.first->BatchPutFromDevice(puts, where.second, stream);
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

Status ClusterClient::UseSlabsOn(std::string_view segment, const SlabPutOptions& options) {
  NANOKV_ASSIGN_OR_RETURN(master::Segment parsed, master::ParseSegment(segment));
  if (parsed.device < 0) {
    return Status::InvalidArgument("slabs on '" + std::string(segment) +
                                   "': name the node and its store's device, as <node>/<device>");
  }
  const std::string& node = parsed.node_id;
  const int device = parsed.device;
  if (node == impl_->options().node_id) return UseSlabs(device, options);
  NANOKV_ASSIGN_OR_RETURN(ClusterStatus cluster, Cluster());
  for (const ClusterNodeStatus& n : cluster.nodes) {
    if (n.node_id != node) continue;
    if (n.path != "host") {
      return Status::FailedPrecondition("slabs on '" + std::string(segment) + "': node " + node +
                                        " is not another node of this host (its path is '" + n.path +
                                        "'): a slab is written through its kvd's pages, on this host only");
    }
    NANOKV_ASSIGN_OR_RETURN(ObjectStore * store, impl_->StoreAt(node, n.kvd_socket));
    NANOKV_RETURN_IF_ERROR(store->UseSlabs(device, options));
    impl_->NoteSlabStore(node, store);
    impl_->uses_slabs.store(true, std::memory_order_release);
    return Status::OK();
  }
  return Status::NotFound("slabs on '" + std::string(segment) + "': the master knows no node " + node);
}

Status ClusterClient::FlushSlabPuts(uint32_t timeout_ms) {
  if (!impl_->uses_slabs.load(std::memory_order_acquire)) return Status::OK();
  Status first;  // every store flushed; the first one's trouble answered
  for (ObjectStore* store : impl_->SlabStores()) {
    Status flushed = store->FlushSlabPuts(timeout_ms);
    if (first.ok()) first = std::move(flushed);
  }
  return first;
}

}  // namespace nanokv
