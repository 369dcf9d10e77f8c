// ClusterClient's inside, shared by its files (cluster_client.cc, the
// operator views in cluster_client_views.cc, puts and gets): the options as
// resolved, the way to the master, the object stores of this host's kvds
// (this node's, and other nodes' on this host by their sockets), the thread
// that commits stream-ordered puts, and the checks that turn the master's
// replies into the public types.
#ifndef NANOKV_LIBKV_CLUSTER_CLUSTER_CLIENT_IMPL_H_
#define NANOKV_LIBKV_CLUSTER_CLUSTER_CLIENT_IMPL_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/host_identity.h"
#include "gpu/backend.h"
#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"
#include "ipc/proto/master.pb.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"
#include "libkv/cluster/master_connection.h"
#include "libkv/cluster/put_committer.h"
#include "libkv/cluster/remote_transfer.h"
#include "nanokv/cluster_client.h"
#include "nanokv/object_store.h"

namespace nanokv {

class ClusterClient::Impl {
 public:
  Impl(ClusterClientOptions options, std::unique_ptr<cluster::MasterConnection> connection, std::string token)
      : options_(std::move(options)),
        host_id_(HostIdentity(options_.host_id)),
        connection_(std::move(connection)),
        remote_(std::move(token), std::chrono::milliseconds(options_.request_timeout_ms)) {}

  const ClusterClientOptions& options() const { return options_; }
  cluster::MasterConnection& master() { return *connection_; }
  // Transfers with other nodes' agents (this client's own UCP worker).
  cluster::RemoteTransfers& remote() { return remote_; }

  // The local kvd's object store, opened on first use.
  Result<ObjectStore*> Local() { return StoreAt(options_.node_id, ""); }
  // ClusterClient::UseSlabs or UseSlabsOn was called: device puts may go
  // through slabs of this host's stores.
  std::atomic<bool> uses_slabs{false};
  // Stores of other nodes of this host that hold slabs (UseSlabsOn), by node id.
  void NoteSlabStore(const std::string& node_id, ObjectStore* store) {
    std::lock_guard lock(mu_);
    slab_stores_[node_id] = store;
  }
  // This node's store and those UseSlabsOn reached: FlushSlabPuts' stores.
  std::vector<ObjectStore*> SlabStores() {
    std::vector<ObjectStore*> out;
    if (auto local = Local(); local.ok()) out.push_back(*local);
    std::lock_guard lock(mu_);
    for (const auto& [node, store] : slab_stores_) out.push_back(store);
    return out;
  }
  ObjectStore* SlabStoreOf(const std::string& node_id) {
    std::lock_guard lock(mu_);
    auto it = slab_stores_.find(node_id);
    return it == slab_stores_.end() ? nullptr : it->second;
  }

  // The object store of a kvd of this host: this node's (by ipc_name), or
  // another node's by its socket (its route), opened on first use and kept.
  Result<ObjectStore*> StoreAt(const std::string& node_id, const std::string& kvd_socket) {
    const bool local = node_id == options_.node_id;
    std::lock_guard lock(mu_);
    std::unique_ptr<ObjectStore>& store = stores_[local ? std::string() : kvd_socket];
    if (store != nullptr) return store.get();
    ObjectStoreOptions o;
    o.ipc_name = options_.ipc_name;
    o.socket_path = local ? "" : kvd_socket;
    o.backend = options_.backend;
    NANOKV_ASSIGN_OR_RETURN(o.access_devices, AccessDevicesLocked());
    auto opened = ObjectStore::Open(o);
    if (!opened.ok()) {
      std::string which = local ? "the local kvd '" + options_.ipc_name + "'" : "the kvd at " + kvd_socket;
      return Status(opened.status().code(), "nanokv cluster: " + which + " (node " + node_id + "): " +
                                                std::string(opened.status().message()));
    }
    if (!local) {
      spdlog::info("nanokv cluster: node {} is on this host ({}): its copies move through its kvd at {}, "
                   "device bytes GPU to GPU",
                   node_id, host_id_, kvd_socket);
    }
    store = std::move(opened).value();
    return store.get();
  }
  // The store a replica's bytes go through, when it is on this host.
  Result<ObjectStore*> StoreOf(const ReplicaPlan& replica) { return StoreAt(replica.node_id, replica.kvd_socket); }
  Result<ObjectStore*> StoreOf(const Replica& replica) { return StoreAt(replica.node_id, replica.kvd_socket); }

  const std::string& host_id() const { return host_id_; }
  // The path this client's bytes take to a node's copies ("local", "host",
  // "network", "none"): kvctl cluster's column, the log's words.
  std::string PathTo(const std::string& node_id, const master::v1::NodeRoute& route,
                     const std::string& data_address) const {
    if (node_id == options_.node_id) return "local";
    if (SameHost(route)) return "host";
    return data_address.empty() ? "none" : "network";
  }

  // The thread that commits stream-ordered puts, started on first use.
  cluster::PutCommitter& committer() {
    std::lock_guard lock(mu_);
    if (committer_ == nullptr) committer_ = std::make_unique<cluster::PutCommitter>();
    return *committer_;
  }

  // This process's backend, for device bytes staged through host memory
  // (PutFromDevice / GetToDevice), opened on first use.
  Result<gpu::Backend*> DeviceBackend() {
    std::lock_guard lock(mu_);
    if (backend_ == nullptr) {
      NANOKV_ASSIGN_OR_RETURN(backend_, gpu::OpenBackend(options_.backend));
    }
    return backend_.get();
  }

  // A reply's route table (OpenReply, LocateReply), checked: node id -> route.
  using Routes = std::map<std::string, master::v1::NodeRoute, std::less<>>;
  static Result<Routes> RoutesOf(const google::protobuf::RepeatedPtrField<master::v1::NodeRouteEntry>& entries) {
    Routes routes;
    for (const master::v1::NodeRouteEntry& entry : entries) {
      Status checked = master::CheckRoute(entry.route(), "master: route of " + entry.node_id().substr(0, 64));
      if (!checked.ok()) return Status::ProtocolError(checked.ToString());
      routes[entry.node_id()] = entry.route();
    }
    return routes;
  }

  // An open result from the master, checked.
  Result<ClusterPlan> PlanOf(const std::string& key, const master::v1::OpenResult& result, const Routes& routes) const {
    NANOKV_RETURN_IF_ERROR(master::FromItem(result.status(), "master"));
    if (result.write_id() == 0 || result.replicas_size() == 0) {
      return Status::ProtocolError("master: an open of '" + key + "' answered without a write or a plan");
    }
    ClusterPlan plan;
    plan.key = key;
    plan.write_id = result.write_id();
    for (const master::v1::ReplicaPlan& r : result.replicas()) {
      Status checked = wire::CheckObjectPlan(r.plan());
      if (!checked.ok()) return Status::ProtocolError("master: a plan for '" + key + "': " + checked.ToString());
      if (!master::ValidNodeId(r.node_id())) return Status::ProtocolError("master: a plan names no valid node");
      ReplicaPlan replica;
      replica.node_id = r.node_id();
      replica.data_address = r.data_address();
      replica.plan = wire::FromWirePlan(key, r.plan());
      replica.local = r.node_id() == options_.node_id;
      if (auto route = routes.find(r.node_id()); route != routes.end() && !replica.local) {
        replica.same_host = SameHost(route->second);
        replica.kvd_socket = route->second.kvd_socket();
      }
      plan.replicas.push_back(std::move(replica));
    }
    return plan;
  }

  Result<ObjectLocation> LocationOf(const std::string& key, const master::v1::Location& in, const Routes& routes) const {
    NANOKV_RETURN_IF_ERROR(master::FromItem(in.status(), "master"));
    ObjectLocation out;
    out.key = key;
    out.bytes_total = in.bytes_total();
    for (const master::v1::Replica& r : in.replicas()) {
      const bool local = r.node_id() == options_.node_id;
      auto route = local ? routes.end() : routes.find(r.node_id());
      const bool same_host = route != routes.end() && SameHost(route->second);
      out.replicas.push_back({r.node_id(), r.data_address(), r.device(), r.device_uuid(), r.epoch(), local, same_host,
                              same_host ? route->second.kvd_socket() : std::string(),
                              r.tier() == master::v1::HOST_TIER});
    }
    if (out.replicas.empty()) return Status::ProtocolError("master: a location of '" + key + "' without copies");
    return out;
  }

  master::v1::KeysRequest Keys(const std::vector<std::string>& keys) const {
    master::v1::KeysRequest request;
    for (const std::string& key : keys) request.add_keys(key);
    request.set_client_node(options_.node_id);
    return request;
  }

 private:
  // Whether a node's route says it is on this host (and names its kvd).
  bool SameHost(const master::v1::NodeRoute& route) const {
    return !host_id_.empty() && route.host_id() == host_id_ && !route.kvd_socket().empty();
  }
  // Every device of this process's backend, unless the options name some.
  // REQUIRES: mu_ held.
  Result<std::vector<int>> AccessDevicesLocked() {
    if (!options_.access_devices.empty()) return options_.access_devices;
    if (backend_ == nullptr) {
      NANOKV_ASSIGN_OR_RETURN(backend_, gpu::OpenBackend(options_.backend));
    }
    std::vector<int> all;
    for (int d = 0; d < backend_->device_count(); ++d) all.push_back(d);
    return all;
  }

  const ClusterClientOptions options_;
  const std::string host_id_;
  std::unique_ptr<cluster::MasterConnection> connection_;
  std::unique_ptr<gpu::Backend> backend_;  // before remote_: its staging buffers are pinned with it
  cluster::RemoteTransfers remote_;
  std::mutex mu_;
  // By kvd socket; "" is this node's kvd (by ipc_name).
  std::map<std::string, std::unique_ptr<ObjectStore>> stores_;
  std::map<std::string, ObjectStore*> slab_stores_;   // GUARDED_BY(mu_); stores_ owns them
  std::unique_ptr<cluster::PutCommitter> committer_;  // last: its thread goes first
};

}  // namespace nanokv

#endif  // NANOKV_LIBKV_CLUSTER_CLUSTER_CLIENT_IMPL_H_
