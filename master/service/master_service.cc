#include "master/service/master_service.h"

#include <mutex>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"
#include "ipc/master/master_protocol.h"
#include "ipc/master/token.h"
#include "master/service/node_stream.h"

namespace nanokv::master {
namespace {

constexpr size_t kListRows = 1024;

grpc::ServerUnaryReactor* Refused(grpc::CallbackServerContext* context, const Status& why) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(why));
  return reactor;
}

// ListObjects: the index in chunks, one write at a time.
class ListReactor : public grpc::ServerWriteReactor<v1::ListChunk> {
 public:
  ListReactor(const ClusterMaster& master, const Status& admitted) : master_(master) {
    std::lock_guard lock(mu_);
    if (!admitted.ok()) {
      Finish(ToGrpcStatus(admitted));
      return;
    }
    Next();
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
    if (!more_) return Finish(grpc::Status::OK);
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    chunk_.Clear();
    more_ = master_.List(&cursor_, kListRows, &chunk_);
    if (chunk_.objects_size() == 0 && !more_) return Finish(grpc::Status::OK);
    StartWrite(&chunk_);
  }

  const ClusterMaster& master_;
  // Each reaction may run on another thread, ordered by gRPC's own locks,
  // which ThreadSanitizer does not see: this one says it again.
  std::mutex mu_;
  uint64_t cursor_ = 0;
  bool more_ = true;
  v1::ListChunk chunk_;
};

}  // namespace

MasterService::MasterService(ClusterMaster& master, std::string token)
    : master_(master), token_(std::move(token)) {}

Status MasterService::Authorize(const grpc::CallbackServerContext* context) const {
  const auto& metadata = context->client_metadata();
  auto version = metadata.find(kProtocolKey);
  const std::string ours = std::to_string(kProtocolVersion);
  if (version == metadata.end()) {
    return Status::Unsupported("the call carries no nanokv protocol version (metadata " + std::string(kProtocolKey) +
                               "); this master speaks version " + ours);
  }
  std::string theirs(version->second.data(), version->second.size());
  if (theirs != ours) {
    return Status::Unsupported("the caller speaks nanokv protocol version " + theirs.substr(0, 16) +
                               ", this master version " + ours);
  }
  if (token_.empty()) return Status::OK();
  auto token = metadata.find(kTokenKey);
  if (token == metadata.end()) {
    return Status::PermissionDenied("this master asks for the cluster token (token_file) and the call has none");
  }
  if (!TokensEqual(std::string_view(token->second.data(), token->second.size()), token_)) {
    return Status::PermissionDenied("the call's cluster token is not this master's (token_file)");
  }
  return Status::OK();
}

Status MasterService::Admit(grpc::CallbackServerContext* context, bool object_call) const {
  NANOKV_RETURN_IF_ERROR(Authorize(context));
  Status admitted = master_.Admit(object_call);
  if (!admitted.ok() && master_.term() == 0) {
    // Not the leader: where it is ("" when unknown: try another master).
    auto leader = master_.Leader();
    context->AddTrailingMetadata(kLeaderKey, leader ? leader->address : "");
  }
  return admitted;
}

grpc::ServerUnaryReactor* MasterService::Open(grpc::CallbackServerContext* context, const v1::OpenRequest* request,
                                              v1::OpenReply* reply) {
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->items_size()), "open");
  if (!admitted.ok()) return Refused(context, admitted);
  auto* reactor = context->DefaultReactor();
  master_.Open(*request, [reactor, reply](v1::OpenReply answer) {
    *reply = std::move(answer);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Finish(grpc::CallbackServerContext* context,
                                                const v1::FinishRequest* request, v1::AckReply* reply, bool commit) {
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->items_size()), commit ? "commit" : "revoke");
  if (!admitted.ok()) return Refused(context, admitted);
  auto* reactor = context->DefaultReactor();
  master_.Finish(*request, commit, [reactor, reply](v1::AckReply answer) {
    *reply = std::move(answer);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Commit(grpc::CallbackServerContext* context,
                                                const v1::FinishRequest* request, v1::AckReply* reply) {
  return Finish(context, request, reply, true);
}

grpc::ServerUnaryReactor* MasterService::Revoke(grpc::CallbackServerContext* context,
                                                const v1::FinishRequest* request, v1::AckReply* reply) {
  return Finish(context, request, reply, false);
}

grpc::ServerUnaryReactor* MasterService::Remove(grpc::CallbackServerContext* context, const v1::KeysRequest* request,
                                                v1::AckReply* reply) {
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->keys_size()), "remove");
  if (admitted.ok()) admitted = CheckKeysRequest(*request);
  if (!admitted.ok()) return Refused(context, admitted);
  auto* reactor = context->DefaultReactor();
  master_.Remove(*request, [reactor, reply](v1::AckReply answer) {
    *reply = std::move(answer);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Locate(grpc::CallbackServerContext* context, const v1::KeysRequest* request,
                                                v1::LocateReply* reply) {
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->keys_size()), "locate");
  if (admitted.ok()) admitted = CheckKeysRequest(*request);
  if (!admitted.ok()) return Refused(context, admitted);
  *reply = master_.Locate(*request);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Cluster(grpc::CallbackServerContext* context, const v1::ClusterRequest*,
                                                 v1::ClusterReply* reply) {
  // Any master answers: a follower says who leads.
  Status admitted = Authorize(context);
  if (!admitted.ok()) return Refused(context, admitted);
  *reply = master_.Cluster();
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::ListChunk>* MasterService::ListObjects(grpc::CallbackServerContext* context,
                                                                    const v1::ListRequest*) {
  return new ListReactor(master_, Admit(context, true));
}

grpc::ServerUnaryReactor* MasterService::Ping(grpc::CallbackServerContext* context, const v1::PingRequest*,
                                              v1::PingReply* reply) {
  Status admitted = Authorize(context);
  if (!admitted.ok()) return Refused(context, admitted);
  *reply = master_.Ping();
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::NodeMessage, v1::MasterMessage>* MasterService::NodeSession(
    grpc::CallbackServerContext* context) {
  return new NodeStream(master_, context, Authorize(context));
}

}  // namespace nanokv::master
