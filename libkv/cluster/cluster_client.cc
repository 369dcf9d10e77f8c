// ClusterClient (nanokv/cluster_client.h): requests to the master through
// MasterConnection, replies checked like any peer's, and the bytes of copies
// on this node through the local kvd's ObjectStore.
#include "nanokv/cluster_client.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <sstream>

#include <spdlog/spdlog.h>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"
#include "libkv/client/quiet_stdout.h"
#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/cluster_put.h"
#include "nanokv/object_store.h"

namespace nanokv {
namespace v1 = master::v1;
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "node";
  return name;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// A pointer into another host's pages cannot be had here: its bytes move
// with Put/Get (the data path between nodes).
Status Remote(const std::string& key, const std::string& node, const std::string& data_address) {
  return Status::Unimplemented("nanokv cluster: the copy of '" + key + "' is on node " + node +
                               (data_address.empty() ? "" : " (data path " + data_address + ")") +
                               ", on another host: its pages cannot be mapped here; move its bytes with Put/Get");
}

}  // namespace

Result<std::unique_ptr<ClusterClient>> ClusterClient::Connect(const ClusterClientOptions& given) {
  client::KeepLogsOffStdout();
  ClusterClientOptions options = given;
  if (options.masters.empty()) options.masters = SplitCommas(Env("NANOKV_MASTERS"));
  if (options.token_file.empty()) options.token_file = Env("NANOKV_TOKEN_FILE");
  if (options.node_id.empty()) options.node_id = Env("NANOKV_NODE_ID");
  if (options.node_id.empty()) options.node_id = HostName();
  if (options.ipc_name.empty()) options.ipc_name = Env("NANOKV_IPC_NAME");
  if (options.ipc_name.empty()) options.ipc_name = "nanokv";
  if (!master::ValidNodeId(options.node_id)) {
    return Status::InvalidArgument("nanokv cluster: node id '" + options.node_id.substr(0, 80) +
                                   "' is not 1-63 of [A-Za-z0-9_.-]");
  }
  if (options.request_timeout_ms == 0) return Status::InvalidArgument("nanokv cluster: request_timeout_ms is 0");
  master::TlsFiles tls{options.tls_ca, options.tls_cert, options.tls_key};
  NANOKV_ASSIGN_OR_RETURN(auto connection,
                          cluster::MasterConnection::Create(options.masters, options.token_file, tls,
                                                            std::chrono::milliseconds(options.request_timeout_ms)));
  // Read once, by the connection: a file rewritten between two reads must
  // not give the master one token and the kvds another.
  std::string token = connection->token();
  auto impl = std::make_unique<Impl>(std::move(options), std::move(connection), std::move(token));
  return std::unique_ptr<ClusterClient>(new ClusterClient(std::move(impl)));
}

ClusterClient::ClusterClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClusterClient::~ClusterClient() = default;

const std::string& ClusterClient::node_id() const { return impl_->options().node_id; }

std::vector<Result<ClusterPlan>> ClusterClient::BatchOpenForWrite(const std::vector<WriteRequest>& requests) {
  google::protobuf::Arena request_arena;
  v1::OpenRequest& request = *google::protobuf::Arena::CreateMessage<v1::OpenRequest>(&request_arena);
  for (const WriteRequest& r : requests) {
    v1::WriteItem* item = request.add_items();
    item->set_key(r.key);
    item->set_bytes_total(r.bytes_total);
    item->set_preferred_segment(r.options.preferred_segment);
    item->set_replica_num(r.options.replica_num);
  }
  google::protobuf::Arena arena;  // a batch's messages without a malloc each
  v1::OpenReply& reply = *google::protobuf::Arena::CreateMessage<v1::OpenReply>(&arena);
  Status status = impl_->master().Run([&](v1::Master::Stub& stub, grpc::ClientContext& context) {
    return stub.Open(&context, request, &reply);
  });
  if (status.ok() && static_cast<size_t>(reply.results_size()) != requests.size()) {
    status = Status::ProtocolError("master: " + std::to_string(reply.results_size()) + " answers to " +
                                   std::to_string(requests.size()) + " opens");
  }
  auto routes = status.ok() ? Impl::RoutesOf(reply.routes()) : Result<Impl::Routes>(status);
  std::vector<Result<ClusterPlan>> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    out.push_back(routes.ok() ? impl_->PlanOf(requests[i].key, reply.results(static_cast<int>(i)), *routes)
                              : Result<ClusterPlan>(routes.status()));
  }
  return out;
}

namespace {
// One Status per item of an AckReply.
std::vector<Status> Acks(const Status& call, const v1::AckReply& reply, size_t items) {
  Status status = call;
  if (status.ok() && static_cast<size_t>(reply.results_size()) != items) {
    status = Status::ProtocolError("master: " + std::to_string(reply.results_size()) + " answers to " +
                                   std::to_string(items) + " items");
  }
  std::vector<Status> out;
  for (size_t i = 0; i < items; ++i) {
    out.push_back(status.ok() ? master::FromItem(reply.results(static_cast<int>(i)), "master") : status);
  }
  return out;
}
}  // namespace

// Committed or revoked: this node's replicas lose their write mappings here
// (ObjectStore::ClosePlan), whatever the master answered.
void ClusterClient::ClosePlans(const std::vector<ClusterPlan>& plans) {
  for (const ClusterPlan& p : plans) {
    for (const ReplicaPlan& replica : p.replicas) {
      if (!cluster::OnThisHost(replica)) continue;
      auto store = impl_->StoreOf(replica);
      if (store.ok()) (*store)->ClosePlan(replica.plan);
    }
  }
}

std::vector<Status> ClusterClient::BatchCommit(const std::vector<ClusterPlan>& plans, bool published_on_device) {
  // READY in each local replica's header is this process's to store (kvd
  // stores nothing on the device). A failed store still commits: the bytes
  // are there for every reader through kvd; device readers see WRITING.
  if (!published_on_device) {
    for (const ClusterPlan& p : plans) {
      for (const ReplicaPlan& replica : p.replicas) {
        if (!cluster::OnThisHost(replica)) continue;
        auto store = impl_->StoreOf(replica);
        Status published = store.ok() ? (*store)->PublishReady(replica.plan) : store.status();
        if (!published.ok()) spdlog::warn("nanokv cluster: READY of '{}': {}", p.key, published.ToString());
      }
    }
  }
  v1::FinishRequest request;
  for (const ClusterPlan& p : plans) {
    v1::WriteRef* ref = request.add_items();
    ref->set_key(p.key);
    ref->set_write_id(p.write_id);
    ref->set_published(published_on_device);
  }
  google::protobuf::Arena arena;  // a batch's messages without a malloc each
  v1::AckReply& reply = *google::protobuf::Arena::CreateMessage<v1::AckReply>(&arena);
  Status status = impl_->master().Run(
      [&](v1::Master::Stub& stub, grpc::ClientContext& context) { return stub.Commit(&context, request, &reply); });
  ClosePlans(plans);
  return Acks(status, reply, plans.size());
}

std::vector<Status> ClusterClient::BatchRevoke(const std::vector<ClusterPlan>& plans) {
  v1::FinishRequest request;
  for (const ClusterPlan& p : plans) {
    v1::WriteRef* ref = request.add_items();
    ref->set_key(p.key);
    ref->set_write_id(p.write_id);
  }
  google::protobuf::Arena arena;  // a batch's messages without a malloc each
  v1::AckReply& reply = *google::protobuf::Arena::CreateMessage<v1::AckReply>(&arena);
  Status status = impl_->master().Run(
      [&](v1::Master::Stub& stub, grpc::ClientContext& context) { return stub.Revoke(&context, request, &reply); });
  ClosePlans(plans);
  return Acks(status, reply, plans.size());
}

std::vector<Status> ClusterClient::BatchRemove(const std::vector<std::string>& keys) {
  v1::KeysRequest request = impl_->Keys(keys);
  google::protobuf::Arena arena;  // a batch's messages without a malloc each
  v1::AckReply& reply = *google::protobuf::Arena::CreateMessage<v1::AckReply>(&arena);
  Status status = impl_->master().Run(
      [&](v1::Master::Stub& stub, grpc::ClientContext& context) { return stub.Remove(&context, request, &reply); });
  return Acks(status, reply, keys.size());
}

std::vector<Result<ObjectLocation>> ClusterClient::BatchGetLocation(const std::vector<std::string>& keys) {
  v1::KeysRequest request = impl_->Keys(keys);
  google::protobuf::Arena arena;  // a batch's messages without a malloc each
  v1::LocateReply& reply = *google::protobuf::Arena::CreateMessage<v1::LocateReply>(&arena);
  Status status = impl_->master().Run(
      [&](v1::Master::Stub& stub, grpc::ClientContext& context) { return stub.Locate(&context, request, &reply); });
  if (status.ok() && static_cast<size_t>(reply.results_size()) != keys.size()) {
    status = Status::ProtocolError("master: " + std::to_string(reply.results_size()) + " locations for " +
                                   std::to_string(keys.size()) + " keys");
  }
  auto routes = status.ok() ? Impl::RoutesOf(reply.routes()) : Result<Impl::Routes>(status);
  std::vector<Result<ObjectLocation>> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    out.push_back(routes.ok() ? impl_->LocationOf(keys[i], reply.results(static_cast<int>(i)), *routes)
                              : Result<ObjectLocation>(routes.status()));
  }
  return out;
}

Result<ClusterPlan> ClusterClient::OpenForWrite(std::string_view key, uint64_t bytes_total,
                                                const WriteOptions& options) {
  return std::move(BatchOpenForWrite({{std::string(key), bytes_total, options}})[0]);
}

Status ClusterClient::Commit(const ClusterPlan& plan, bool published_on_device) {
  return BatchCommit({plan}, published_on_device)[0];
}

Status ClusterClient::Revoke(const ClusterPlan& plan) { return BatchRevoke({plan})[0]; }

Status ClusterClient::Remove(std::string_view key) { return BatchRemove({std::string(key)})[0]; }

Result<ObjectLocation> ClusterClient::GetLocation(std::string_view key) {
  return std::move(BatchGetLocation({std::string(key)})[0]);
}

Result<void*> ClusterClient::PayloadPointer(const ReplicaPlan& replica) {
  if (!cluster::OnThisHost(replica)) return Remote(replica.plan.key, replica.node_id, replica.data_address);
  NANOKV_ASSIGN_OR_RETURN(ObjectStore * store, impl_->StoreOf(replica));
  return store->PayloadPointer(replica.plan);
}

Result<void*> ClusterClient::HeaderPointer(const ReplicaPlan& replica) {
  if (!cluster::OnThisHost(replica)) return Remote(replica.plan.key, replica.node_id, replica.data_address);
  NANOKV_ASSIGN_OR_RETURN(ObjectStore * store, impl_->StoreOf(replica));
  return store->HeaderPointer(replica.plan);
}

Result<uint64_t> ClusterClient::Ping() {
  v1::PingReply reply;
  NANOKV_RETURN_IF_ERROR(impl_->master().Run([&](v1::Master::Stub& stub, grpc::ClientContext& context) {
    return stub.Ping(&context, v1::PingRequest(), &reply);
  }));
  return reply.term();
}

}  // namespace nanokv
