// ClusterClient's host bytes (nanokv/cluster_client.h): puts and gets of
// host memory, a copy on this host through its kvd's ObjectStore, one on
// another host through RemoteTransfers (its agent), those of a batch all
// at once.
#include <cstring>

#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/cluster_put.h"
#include "nanokv/cluster_client.h"

namespace nanokv {
namespace {

using cluster::NoDataPath;
using cluster::OnThisHost;

// The bytes of `key` from one copy: one on this host through its kvd,
// another host's through its agent.
Result<std::vector<std::byte>> GetFrom(ClusterClient::Impl& impl, const std::string& key, const Replica& replica) {
  if (OnThisHost(replica)) {
    NANOKV_ASSIGN_OR_RETURN(ObjectStore * store, impl.StoreOf(replica));
    return store->Get(key);
  }
  if (replica.data_address.empty()) return NoDataPath(key, replica.node_id);
  return std::move(impl.remote().Get({{replica.node_id, replica.data_address, key}})[0]);
}

// The object from one copy into host memory `to`: its size.
Result<uint64_t> GetOneInto(ClusterClient::Impl& impl, const std::string& key, const Replica& replica,
                         const cluster::GetLanding& to) {
  if (OnThisHost(replica)) {
    NANOKV_ASSIGN_OR_RETURN(ObjectStore * store, impl.StoreOf(replica));
    NANOKV_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, store->Get(key));
    if (bytes.size() > to.capacity) return cluster::NoRoom(key, bytes.size(), to.capacity);
    std::memcpy(to.host, bytes.data(), bytes.size());
    return static_cast<uint64_t>(bytes.size());
  }
  if (replica.data_address.empty()) return NoDataPath(key, replica.node_id);
  cluster::RemoteGetInto get{{replica.node_id, replica.data_address, key}, to};
  return std::move(impl.remote().GetInto({get})[0]);
}

}  // namespace

std::vector<Status> ClusterClient::BatchPut(const std::vector<PutRequest>& requests) {
  std::vector<WriteRequest> opens;
  std::vector<cluster::PutBytes> sources;
  for (const PutRequest& r : requests) {
    opens.push_back({r.key, r.bytes.size(), r.options});
    sources.push_back({r.bytes});
  }
  cluster::PutBatch batch(*this, *impl_, std::move(opens), std::move(sources));
  batch.Start(nullptr);
  return batch.Finish();
}

Status ClusterClient::Put(std::string_view key, std::span<const std::byte> bytes, const WriteOptions& options) {
  return BatchPut({{std::string(key), bytes, options}})[0];
}

std::vector<Result<std::vector<std::byte>>> ClusterClient::BatchGet(const std::vector<std::string>& keys) {
  std::vector<Result<ObjectLocation>> locations = BatchGetLocation(keys);
  std::vector<Result<std::vector<std::byte>>> out;
  // The nearest copy of each key first: those on other hosts all at once.
  std::vector<cluster::RemoteGet> remote;
  std::vector<size_t> remote_items;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!locations[i].ok()) {
      out.push_back(locations[i].status());
      continue;
    }
    const Replica& nearest = locations[i]->replicas.front();
    if (!OnThisHost(nearest) && !nearest.data_address.empty()) {
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
  std::byte none{};  // a 0-byte room still needs an address
  const cluster::GetLanding to{out.empty() ? &none : out.data(), nullptr, nullptr, out.size()};
  NANOKV_ASSIGN_OR_RETURN(ObjectLocation location, GetLocation(key));
  if (location.bytes_total > to.capacity) return cluster::NoRoom(key, location.bytes_total, to.capacity);
  Result<uint64_t> got = Status::Internal("no copy");
  // The nearest copy first, the next one while a node is unavailable.
  for (const Replica& replica : location.replicas) {
    got = GetOneInto(*impl_, std::string(key), replica, to);
    if (got.ok() || got.status().code() != Code::kUnavailable) break;
  }
  return got;
}

}  // namespace nanokv
