// ClusterClient's bytes (nanokv/cluster_client.h): puts and gets of host
// and device memory, a copy on this node through the local kvd's
// ObjectStore, one on another node through RemoteTransfers (its agent),
// those of a batch all at once.
#include <cstring>
#include <new>

#include "libkv/cluster/cluster_client_impl.h"
#include "nanokv/cluster_client.h"

namespace nanokv {
namespace {

// A node that registered without a data path (no master.data_address).
Status NoDataPath(const std::string& key, const std::string& node) {
  return Status::FailedPrecondition("nanokv cluster: the copy of '" + key + "' is on node " + node +
                                    ", which has no data path (master.data_address in its kvd config)");
}

// Whether `bytes` at `at` are device memory `backend` reaches (its first and
// last byte read back): checked before a transfer to another node starts,
// so memory no device reaches is refused with nothing moved and no plan or
// read lease taken. Two one-byte copies against a transfer of milliseconds.
Status CheckDeviceRange(gpu::Backend& backend, const void* at, uint64_t bytes) {
  if (bytes == 0) return Status::OK();
  std::byte probe[1];
  const auto* first = static_cast<const std::byte*>(at);
  NANOKV_RETURN_IF_ERROR(backend.Copy(probe, first, 1, gpu::CopyKind::kDeviceToHost));
  return backend.Copy(probe, first + bytes - 1, 1, gpu::CopyKind::kDeviceToHost);
}

// The bytes of a device source in host memory, for a copy on this node
// (ObjectStore::CopyIn takes host bytes).
Status CopyInLocal(ObjectStore& store, const ReplicaPlan& replica, const cluster::PutBytes& source) {
  if (source.device == nullptr) return store.CopyIn(replica.plan, source.host);
  std::vector<std::byte> staging;
  try {
    staging.resize(replica.plan.bytes_total);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("put from device of '" + replica.plan.key + "': " +
                               std::to_string(replica.plan.bytes_total) + " bytes of host staging");
  }
  NANOKV_RETURN_IF_ERROR(
      source.backend->Copy(staging.data(), source.device, staging.size(), gpu::CopyKind::kDeviceToHost));
  return store.CopyIn(replica.plan, staging);
}

// Open, copy into every copy (those on other nodes all at once, pipelined:
// one endpoint per node, this client's UCP worker), commit; a failed copy
// revokes its write.
std::vector<Status> PutAll(ClusterClient& client, ClusterClient::Impl& impl, const std::vector<WriteRequest>& opens,
                           const std::vector<cluster::PutBytes>& sources) {
  std::vector<Result<ClusterPlan>> plans = client.BatchOpenForWrite(opens);
  std::vector<Status> out(opens.size());
  std::vector<Status> copied(opens.size());
  std::vector<cluster::RemotePut> remote;
  std::vector<size_t> remote_items;
  for (size_t i = 0; i < opens.size(); ++i) {
    if (!plans[i].ok()) continue;
    for (const ReplicaPlan& replica : plans[i]->replicas) {
      if (!replica.local) {
        if (replica.data_address.empty()) {
          copied[i] = NoDataPath(opens[i].key, replica.node_id);
          break;
        }
        remote.push_back({replica.node_id, replica.data_address, replica.plan, sources[i]});
        remote_items.push_back(i);
        continue;
      }
      auto store = impl.Local();
      copied[i] = store.ok() ? CopyInLocal(**store, replica, sources[i]) : store.status();
      if (!copied[i].ok()) break;
    }
  }
  if (!remote.empty()) {
    std::vector<Status> sent = impl.remote().Put(remote);
    for (size_t k = 0; k < sent.size(); ++k) {
      if (copied[remote_items[k]].ok() && !sent[k].ok()) copied[remote_items[k]] = sent[k];
    }
  }
  std::vector<ClusterPlan> to_commit, to_revoke;
  std::vector<size_t> committed_items;
  for (size_t i = 0; i < opens.size(); ++i) {
    if (!plans[i].ok()) {
      out[i] = plans[i].status();
    } else if (copied[i].ok()) {
      to_commit.push_back(*plans[i]);
      committed_items.push_back(i);
    } else {
      out[i] = copied[i];
      to_revoke.push_back(*plans[i]);
    }
  }
  if (!to_revoke.empty()) client.BatchRevoke(to_revoke);  // the failure is what the caller hears
  if (!to_commit.empty()) {
    std::vector<Status> commits = client.BatchCommit(to_commit);
    for (size_t k = 0; k < commits.size(); ++k) out[committed_items[k]] = commits[k];
  }
  return out;
}

// The bytes of `key` from one copy: this node's through the local kvd,
// another node's through its agent.
Result<std::vector<std::byte>> GetFrom(ClusterClient::Impl& impl, const std::string& key, const Replica& replica) {
  if (replica.local) {
    auto store = impl.Local();
    return store.ok() ? (*store)->Get(key) : Result<std::vector<std::byte>>(store.status());
  }
  if (replica.data_address.empty()) return NoDataPath(key, replica.node_id);
  return std::move(impl.remote().Get({{replica.node_id, replica.data_address, key}})[0]);
}

// The object from one copy into `to`: its size.
Result<uint64_t> GetInto(ClusterClient::Impl& impl, const std::string& key, const Replica& replica,
                         const cluster::GetLanding& to) {
  if (replica.local) {
    NANOKV_ASSIGN_OR_RETURN(ObjectStore * store, impl.Local());
    if (to.device != nullptr) return store->GetToDevice(key, to.device, to.capacity);
    NANOKV_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, store->Get(key));
    if (bytes.size() > to.capacity) return cluster::NoRoom(key, bytes.size(), to.capacity);
    std::memcpy(to.host, bytes.data(), bytes.size());
    return static_cast<uint64_t>(bytes.size());
  }
  if (replica.data_address.empty()) return NoDataPath(key, replica.node_id);
  if (to.device != nullptr) NANOKV_RETURN_IF_ERROR(CheckDeviceRange(*to.backend, to.device, to.capacity));
  cluster::RemoteGetInto get{{replica.node_id, replica.data_address, key}, to};
  return std::move(impl.remote().GetInto({get})[0]);
}

// The nearest copy first, the next one while a node is unavailable.
Result<uint64_t> GetIntoNearest(ClusterClient& client, ClusterClient::Impl& impl, std::string_view key,
                                const cluster::GetLanding& to) {
  NANOKV_ASSIGN_OR_RETURN(ObjectLocation location, client.GetLocation(key));
  if (location.bytes_total > to.capacity) return cluster::NoRoom(key, location.bytes_total, to.capacity);
  Result<uint64_t> got = Status::Internal("no copy");
  for (const Replica& replica : location.replicas) {
    got = GetInto(impl, std::string(key), replica, to);
    if (got.ok() || got.status().code() != Code::kUnavailable) break;
  }
  return got;
}

}  // namespace

std::vector<Status> ClusterClient::BatchPut(const std::vector<PutRequest>& requests) {
  std::vector<WriteRequest> opens;
  std::vector<cluster::PutBytes> sources;
  for (const PutRequest& r : requests) {
    opens.push_back({r.key, r.bytes.size(), r.options});
    sources.push_back({r.bytes});
  }
  return PutAll(*this, *impl_, opens, sources);
}

Status ClusterClient::Put(std::string_view key, std::span<const std::byte> bytes, const WriteOptions& options) {
  return BatchPut({{std::string(key), bytes, options}})[0];
}

std::vector<Result<std::vector<std::byte>>> ClusterClient::BatchGet(const std::vector<std::string>& keys) {
  std::vector<Result<ObjectLocation>> locations = BatchGetLocation(keys);
  std::vector<Result<std::vector<std::byte>>> out;
  // The nearest copy of each key first: those on other nodes all at once.
  std::vector<cluster::RemoteGet> remote;
  std::vector<size_t> remote_items;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!locations[i].ok()) {
      out.push_back(locations[i].status());
      continue;
    }
    const Replica& nearest = locations[i]->replicas.front();
    if (!nearest.local && !nearest.data_address.empty()) {
      out.push_back(Status::Internal("pending"));
      remote.push_back({nearest.node_id, nearest.data_address, keys[i]});
      remote_items.push_back(i);
      continue;
    }
    out.push_back(GetFrom(*impl_, keys[i], nearest));
  }
  if (!remote.empty()) {
    std::vector<Result<std::vector<std::byte>>> got = impl_->remote().Get(remote);
    for (size_t k = 0; k < got.size(); ++k) out[remote_items[k]] = std::move(got[k]);
  }
  // A copy whose node is gone: the next copy, in order.
  for (size_t i = 0; i < keys.size(); ++i) {
    if (out[i].ok() || out[i].status().code() != Code::kUnavailable || !locations[i].ok()) continue;
    for (size_t r = 1; r < locations[i]->replicas.size() && !out[i].ok(); ++r) {
      Result<std::vector<std::byte>> again = GetFrom(*impl_, keys[i], locations[i]->replicas[r]);
      if (again.ok() || again.status().code() != Code::kUnavailable) out[i] = std::move(again);
    }
  }
  return out;
}

Result<std::vector<std::byte>> ClusterClient::Get(std::string_view key) {
  return std::move(BatchGet({std::string(key)})[0]);
}

Result<uint64_t> ClusterClient::GetInto(std::string_view key, std::span<std::byte> out) {
  if (out.data() == nullptr && !out.empty()) return Status::InvalidArgument("get into: null destination");
  std::byte none{};  // a 0-byte room still needs an address to tell host from device
  return GetIntoNearest(*this, *impl_, key, {out.empty() ? &none : out.data(), nullptr, nullptr, out.size()});
}

Status ClusterClient::PutFromDevice(std::string_view key, const void* src, uint64_t bytes,
                                    const WriteOptions& options) {
  if (src == nullptr) return Status::InvalidArgument("put from device: null source");
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  NANOKV_RETURN_IF_ERROR(CheckDeviceRange(*backend, src, bytes));
  return PutAll(*this, *impl_, {{std::string(key), bytes, options}}, {{{}, src, backend}})[0];
}

Result<uint64_t> ClusterClient::GetToDevice(std::string_view key, void* dst, uint64_t capacity) {
  if (dst == nullptr) return Status::InvalidArgument("get to device: null destination");
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  return GetIntoNearest(*this, *impl_, key, {nullptr, dst, backend, capacity});
}

Result<std::string> ClusterClient::DeviceBackendName() {
  NANOKV_ASSIGN_OR_RETURN(gpu::Backend * backend, impl_->DeviceBackend());
  return std::string(backend->name());
}

}  // namespace nanokv
