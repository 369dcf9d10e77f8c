// The etcd client's connections: one gRPC channel per endpoint, with the
// stubs of the three services we call, and what a gRPC status means to us.
// Internal to ipc/etcd/ (callers use etcd_client.h).
#ifndef NANOKV_IPC_ETCD_ETCD_CHANNEL_H_
#define NANOKV_IPC_ETCD_ETCD_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include "ipc/etcd/etcd_types.h"
#include "ipc/proto/etcd_v3.grpc.pb.h"
#include "nanokv/status.h"

namespace nanokv::etcd {

struct EtcdOptions {
  // "host:port", "http://host:port" (plaintext) or "https://host:port" (TLS).
  // A bare "host:port" is TLS when a TLS file is named below, else plaintext.
  std::vector<std::string> endpoints;
  // Connect waits this long for one endpoint to accept a connection, and
  // fails with kUnavailable otherwise. 0: do not wait (calls fail with
  // kUnavailable until etcd answers; the election starts this way).
  std::chrono::milliseconds dial_timeout{2000};
  // TLS (PEM files): the CA that signed etcd's certificate (empty: the
  // system's roots), and this client's certificate and key, both or neither
  // (etcd's --client-cert-auth).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// One endpoint: its name as the options gave it, its channel, the stubs.
struct Endpoint {
  std::string name;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
};

// Checks the options (at least one endpoint, each host:port with a port in
// range, TLS files readable, cert and key together) and makes a channel per
// endpoint. Nothing connects yet. kInvalidArgument or kNotFound name the fault.
Result<std::vector<std::unique_ptr<Endpoint>>> OpenEndpoints(const EtcdOptions& options);

// The grpc::Status of a call to `endpoint` as ours: kUnavailable for what
// another endpoint or a later try may cure (unreachable, deadline, no raft
// leader: EtcdClient tries the next endpoint on it, and on nothing else),
// kNotFound (e.g. no such lease), kInvalidArgument, ...; the
// message names the endpoint and the call.
Status FromGrpc(const grpc::Status& status, std::string_view endpoint, std::string_view what);

// gRPC takes deadlines on the system clock; ours are monotonic.
std::chrono::system_clock::time_point ToSystemDeadline(Deadline deadline);

}  // namespace nanokv::etcd

#endif  // NANOKV_IPC_ETCD_ETCD_CHANNEL_H_
