#include "master/service/master_service.h"

#include <mutex>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_auth.h"
#include "ipc/master/master_checks.h"
#include "ipc/master/master_protocol.h"
#include "master/service/master_metrics.h"
#include "master/service/node_stream.h"

namespace nanokv::master {
namespace {

constexpr size_t kListRows = 1024;

using Started = MasterMetrics::Clock::time_point;

grpc::ServerUnaryReactor* Refused(grpc::CallbackServerContext* context, const Status& why, MasterMetrics* metrics,
                                  MasterCall call, Started started) {
  if (metrics != nullptr) metrics->Answered(call, why, started);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(why));
  return reactor;
}

// ListObjects: the index in chunks, one write at a time.
class ListReactor : public grpc::ServerWriteReactor<v1::ListChunk> {
 public:
  ListReactor(const ClusterMaster& master, const Status& admitted, MasterMetrics* metrics, Started started)
      : master_(master), metrics_(metrics), started_(started), result_(admitted) {
    std::lock_guard lock(mu_);
    if (!admitted.ok()) {
      Finish(ToGrpcStatus(admitted));
      return;
    }
    Next();
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    if (!ok) {
      result_ = Status::Unavailable("the reader went away");
      return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
    }
    if (!more_) return Finish(grpc::Status::OK);
    Next();
  }
  void OnDone() override {
    {
      std::lock_guard lock(mu_);
      if (metrics_ != nullptr) metrics_->Answered(MasterCall::kList, result_, started_);
    }
    delete this;
  }

 private:
  void Next() {
    chunk_.Clear();
    more_ = master_.List(&cursor_, kListRows, &chunk_);
    if (chunk_.objects_size() == 0 && !more_) return Finish(grpc::Status::OK);
    StartWrite(&chunk_);
  }

  const ClusterMaster& master_;
  MasterMetrics* const metrics_;
  const Started started_;
  // Each reaction may run on another thread, ordered by gRPC's own locks,
  // which ThreadSanitizer does not see: this one says it again.
  std::mutex mu_;
  uint64_t cursor_ = 0;
  bool more_ = true;
  Status result_;  // the refusal, or why the list ended early
  v1::ListChunk chunk_;
};

}  // namespace

MasterService::MasterService(ClusterMaster& master, std::string token, MasterMetrics* metrics)
    : master_(master), token_(std::move(token)), metrics_(metrics) {}

Status MasterService::CheckVersion(const grpc::CallbackServerContext* context) const {
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
  return Status::OK();
}

Status MasterService::Authorize(const grpc::CallbackServerContext* context) const {
  NANOKV_RETURN_IF_ERROR(CheckVersion(context));
  if (token_.empty()) return Status::OK();
  const auto& metadata = context->client_metadata();
  auto credential = metadata.find(kCredentialKey);
  if (credential == metadata.end()) {
    return Status::PermissionDenied(
        "this master asks for the cluster token (token_file) and the call has no "
        "credential made from one");
  }
  return CheckCredential(token_, std::string_view(credential->second.data(), credential->second.size()));
}

grpc::ServerUnaryReactor* MasterService::Hello(grpc::CallbackServerContext* context, const v1::HelloRequest* request,
                                               v1::HelloReply* reply) {
  const Started started = MasterMetrics::Clock::now();
  Status admitted = CheckVersion(context);
  if (admitted.ok() && request->nonce().size() != kNonceBytes) {
    admitted = Status::InvalidArgument("hello: a nonce of " + std::to_string(request->nonce().size()) +
                                       " bytes (want " + std::to_string(kNonceBytes) + ")");
  }
  if (!admitted.ok()) return Refused(context, admitted, metrics_, MasterCall::kHello, started);
  if (!token_.empty()) {
    HelloAnswer answer = AnswerHello(token_, request->nonce());
    reply->set_ticket(std::move(answer.ticket));
    reply->set_proof(std::move(answer.proof));
  }
  if (metrics_ != nullptr) metrics_->Answered(MasterCall::kHello, Status::OK(), started);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
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
  const Started started = MasterMetrics::Clock::now();
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->items_size()), "open");
  if (!admitted.ok()) return Refused(context, admitted, metrics_, MasterCall::kOpen, started);
  auto* reactor = context->DefaultReactor();
  master_.Open(*request, [reactor, reply, metrics = metrics_, started](v1::OpenReply answer) {
    if (metrics != nullptr) {
      metrics->Items(MasterCall::kOpen, answer.results());
      metrics->Answered(MasterCall::kOpen, Status::OK(), started);
    }
    *reply = std::move(answer);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Finish(grpc::CallbackServerContext* context,
                                                const v1::FinishRequest* request, v1::AckReply* reply, bool commit) {
  const Started started = MasterMetrics::Clock::now();
  const MasterCall call = commit ? MasterCall::kCommit : MasterCall::kRevoke;
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->items_size()), commit ? "commit" : "revoke");
  if (!admitted.ok()) return Refused(context, admitted, metrics_, call, started);
  auto* reactor = context->DefaultReactor();
  master_.Finish(*request, commit, [reactor, reply, metrics = metrics_, call, started](v1::AckReply answer) {
    if (metrics != nullptr) {
      metrics->Items(call, answer.results());
      metrics->Answered(call, Status::OK(), started);
    }
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
  const Started started = MasterMetrics::Clock::now();
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->keys_size()), "remove");
  if (admitted.ok()) admitted = CheckKeysRequest(*request);
  if (!admitted.ok()) return Refused(context, admitted, metrics_, MasterCall::kRemove, started);
  auto* reactor = context->DefaultReactor();
  master_.Remove(*request, [reactor, reply, metrics = metrics_, started](v1::AckReply answer) {
    if (metrics != nullptr) {
      metrics->Items(MasterCall::kRemove, answer.results());
      metrics->Answered(MasterCall::kRemove, Status::OK(), started);
    }
    *reply = std::move(answer);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Locate(grpc::CallbackServerContext* context, const v1::KeysRequest* request,
                                                v1::LocateReply* reply) {
  const Started started = MasterMetrics::Clock::now();
  Status admitted = Admit(context, true);
  if (admitted.ok()) admitted = CheckBatchSize(static_cast<size_t>(request->keys_size()), "locate");
  if (admitted.ok()) admitted = CheckKeysRequest(*request);
  if (!admitted.ok()) return Refused(context, admitted, metrics_, MasterCall::kLocate, started);
  *reply = master_.Locate(*request);
  if (metrics_ != nullptr) metrics_->Answered(MasterCall::kLocate, Status::OK(), started);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* MasterService::Cluster(grpc::CallbackServerContext* context, const v1::ClusterRequest*,
                                                 v1::ClusterReply* reply) {
  const Started started = MasterMetrics::Clock::now();
  // Any master answers: a follower says who leads.
  Status admitted = Authorize(context);
  if (!admitted.ok()) return Refused(context, admitted, metrics_, MasterCall::kCluster, started);
  *reply = master_.Cluster();
  if (metrics_ != nullptr) metrics_->Answered(MasterCall::kCluster, Status::OK(), started);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1::ListChunk>* MasterService::ListObjects(grpc::CallbackServerContext* context,
                                                                    const v1::ListRequest*) {
  const Started started = MasterMetrics::Clock::now();
  return new ListReactor(master_, Admit(context, true), metrics_, started);
}

grpc::ServerUnaryReactor* MasterService::Ping(grpc::CallbackServerContext* context, const v1::PingRequest*,
                                              v1::PingReply* reply) {
  const Started started = MasterMetrics::Clock::now();
  Status admitted = Authorize(context);
  if (!admitted.ok()) return Refused(context, admitted, metrics_, MasterCall::kPing, started);
  *reply = master_.Ping();
  if (metrics_ != nullptr) metrics_->Answered(MasterCall::kPing, Status::OK(), started);
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::NodeMessage, v1::MasterMessage>* MasterService::NodeSession(
    grpc::CallbackServerContext* context) {
  return new NodeStream(master_, context, Authorize(context));
}

}  // namespace nanokv::master
