// ClusterClient's operator views: the cluster's state and every object's
// copies (kvctl cluster, kvctl objects --cluster).
#include "ipc/master/master_checks.h"
#include "libkv/cluster/cluster_client_impl.h"
#include "nanokv/cluster_client.h"

namespace nanokv {
namespace v1 = master::v1;

namespace {
// How many rows a listing may bring before kvctl is told to stop: 100
// million keys of the largest size would be 26 GB in kvctl.
constexpr size_t kMaxListedObjects = 100'000'000;
}  // namespace

Result<ClusterStatus> ClusterClient::Cluster() {
  v1::ClusterReply reply;
  std::string answered;
  // The question is for any master: a follower answers who leads.
  NANOKV_RETURN_IF_ERROR(impl_->master().Run(
      [&](v1::Master::Stub& stub, grpc::ClientContext& context) {
        return stub.Cluster(&context, v1::ClusterRequest(), &reply);
      },
      &answered));
  ClusterStatus out;
  out.master = answered;
  out.master_id = reply.master_id();
  out.term = reply.term();
  out.leader_id = reply.leader_id();
  out.leader_address = reply.leader_address();
  out.objects = reply.objects();
  out.writes_in_progress = reply.writes_in_progress();
  out.index_bytes = reply.index_bytes();
  out.uptime_ms = reply.uptime_ms();
  out.rebuilding = reply.rebuilding();
  for (const v1::NodeStatus& n : reply.nodes()) {
    ClusterNodeStatus node{n.node_id(), n.data_address(), n.peer(), n.state(), n.objects(),
                           n.heartbeat_age_ms(), n.session_age_ms(), {}, n.data_mode(),
                           n.route().host_id(), n.route().kvd_socket(),
                           impl_->PathTo(n.node_id(), n.route(), n.data_address())};
    for (const v1::DeviceStatus& d : n.devices()) {
      node.devices.push_back({d.device(), d.uuid(), d.capacity_bytes(), d.used_bytes(), d.high_watermark(),
                              d.low_watermark(), d.objects(), d.host_capacity_bytes(), d.host_used_bytes(),
                              d.host_objects()});
    }
    out.nodes.push_back(std::move(node));
  }
  return out;
}

Result<std::vector<ObjectLocation>> ClusterClient::ListObjects() {
  std::vector<ObjectLocation> out;
  Status status = impl_->master().Run([&](v1::Master::Stub& stub, grpc::ClientContext& context) {
    out.clear();
    auto reader = stub.ListObjects(&context, v1::ListRequest());
    v1::ListChunk chunk;
    while (reader->Read(&chunk)) {
      for (const v1::ObjectRow& row : chunk.objects()) {
        if (out.size() >= kMaxListedObjects) {
          context.TryCancel();
          break;
        }
        ObjectLocation location;
        location.key = row.key();
        location.bytes_total = row.bytes_total();
        for (const v1::Replica& r : row.replicas()) {
          location.replicas.push_back({r.node_id(), r.data_address(), r.device(), r.device_uuid(), r.epoch(),
                                       r.node_id() == node_id(), /*same_host=*/false, /*kvd_socket=*/{},
                                       r.tier() == v1::HOST_TIER});
        }
        out.push_back(std::move(location));
      }
    }
    return reader->Finish();
  });
  if (!status.ok()) return status;
  return out;
}

}  // namespace nanokv
