// The master's gRPC service (ipc/proto/master.proto) on gRPC's callback API:
// no thread waits for a node's answer, a call is finished from whichever
// thread brings it. Every call but Hello is admitted first: the protocol
// version, the credential made from the cluster token (constant-time), then whether this master leads (a refusal
// names the leader, and carries its address as metadata kLeaderKey);
// requests are range-checked as a whole here and item by item in
// ClusterMaster.
#ifndef NANOKV_MASTER_SERVICE_MASTER_SERVICE_H_
#define NANOKV_MASTER_SERVICE_MASTER_SERVICE_H_

#include <string>

#include "ipc/proto/master.grpc.pb.h"
#include "master/service/cluster_master.h"
#include "master/service/master_metrics.h"

namespace nanokv::master {

class MasterService final : public v1::Master::CallbackService {
 public:
  // `token` empty: no token asked. `master` must outlive the service, and
  // `metrics` too when not null (null: /metrics is off).
  MasterService(ClusterMaster& master, std::string token, MasterMetrics* metrics = nullptr);

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* context, const v1::HelloRequest* request,
                                  v1::HelloReply* reply) override;
  grpc::ServerUnaryReactor* Open(grpc::CallbackServerContext* context, const v1::OpenRequest* request,
                                 v1::OpenReply* reply) override;
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* context, const v1::FinishRequest* request,
                                   v1::AckReply* reply) override;
  grpc::ServerUnaryReactor* Revoke(grpc::CallbackServerContext* context, const v1::FinishRequest* request,
                                   v1::AckReply* reply) override;
  grpc::ServerUnaryReactor* Remove(grpc::CallbackServerContext* context, const v1::KeysRequest* request,
                                   v1::AckReply* reply) override;
  grpc::ServerUnaryReactor* Locate(grpc::CallbackServerContext* context, const v1::KeysRequest* request,
                                   v1::LocateReply* reply) override;
  grpc::ServerUnaryReactor* Cluster(grpc::CallbackServerContext* context, const v1::ClusterRequest* request,
                                    v1::ClusterReply* reply) override;
  grpc::ServerWriteReactor<v1::ListChunk>* ListObjects(grpc::CallbackServerContext* context,
                                                       const v1::ListRequest* request) override;
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context, const v1::PingRequest* request,
                                 v1::PingReply* reply) override;
  grpc::ServerBidiReactor<v1::NodeMessage, v1::MasterMessage>* NodeSession(
      grpc::CallbackServerContext* context) override;

 private:
  // The protocol version of the call.
  Status CheckVersion(const grpc::CallbackServerContext* context) const;
  // The version, then the credential made from the token (master_auth.h).
  Status Authorize(const grpc::CallbackServerContext* context) const;
  // Authorize, then ClusterMaster::Admit; on a refusal by a master that does
  // not lead, the leader's address goes into the trailing metadata.
  Status Admit(grpc::CallbackServerContext* context, bool object_call) const;
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const v1::FinishRequest* request,
                                   v1::AckReply* reply, bool commit);

  ClusterMaster& master_;
  const std::string token_;
  MasterMetrics* const metrics_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_MASTER_SERVICE_H_
