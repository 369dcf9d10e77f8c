// ClusterClient's inside, shared by its files (cluster_client.cc, the
// operator views in cluster_client_views.cc): the options as resolved, the
// way to the master, the local object store, and the checks that turn the
// master's replies into the public types.
#ifndef NANOKV_LIBKV_CLUSTER_CLUSTER_CLIENT_IMPL_H_
#define NANOKV_LIBKV_CLUSTER_CLUSTER_CLIENT_IMPL_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"
#include "ipc/proto/master.pb.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"
#include "libkv/cluster/master_connection.h"
#include "libkv/cluster/remote_transfer.h"
#include "nanokv/cluster_client.h"
#include "nanokv/object_store.h"

namespace nanokv {

class ClusterClient::Impl {
 public:
  Impl(ClusterClientOptions options, std::unique_ptr<cluster::MasterConnection> connection, std::string token)
      : options_(std::move(options)),
        connection_(std::move(connection)),
        remote_(std::move(token), std::chrono::milliseconds(options_.request_timeout_ms)) {}

  const ClusterClientOptions& options() const { return options_; }
  cluster::MasterConnection& master() { return *connection_; }
  // Transfers with other nodes' agents (this client's own UCP worker).
  cluster::RemoteTransfers& remote() { return remote_; }

  // The local kvd's object store, opened on first use.
  Result<ObjectStore*> Local() {
    std::lock_guard lock(mu_);
    if (store_ == nullptr) {
      ObjectStoreOptions o;
      o.ipc_name = options_.ipc_name;
      o.backend = options_.backend;
      auto opened = ObjectStore::Open(o);
      if (!opened.ok()) {
        return Status(opened.status().code(), "nanokv cluster: the local kvd '" + options_.ipc_name +
                                                  "' (node " + options_.node_id + "): " +
                                                  std::string(opened.status().message()));
      }
      store_ = std::move(opened).value();
    }
    return store_.get();
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

  // An open result from the master, checked.
  Result<ClusterPlan> PlanOf(const std::string& key, const master::v1::OpenResult& result) const {
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
      plan.replicas.push_back(std::move(replica));
    }
    return plan;
  }

  Result<ObjectLocation> LocationOf(const std::string& key, const master::v1::Location& in) const {
    NANOKV_RETURN_IF_ERROR(master::FromItem(in.status(), "master"));
    ObjectLocation out;
    out.key = key;
    out.bytes_total = in.bytes_total();
    for (const master::v1::Replica& r : in.replicas()) {
      out.replicas.push_back({r.node_id(), r.data_address(), r.device(), r.device_uuid(), r.epoch(),
                              r.node_id() == options_.node_id});
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
  const ClusterClientOptions options_;
  std::unique_ptr<cluster::MasterConnection> connection_;
  std::unique_ptr<gpu::Backend> backend_;  // before remote_: its staging buffers are pinned with it
  cluster::RemoteTransfers remote_;
  std::mutex mu_;
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace nanokv

#endif  // NANOKV_LIBKV_CLUSTER_CLUSTER_CLIENT_IMPL_H_
