// How every party reaches a master or serves one: TLS through gRPC's
// credentials when certificates are named (plaintext otherwise), the channel
// arguments both sides agree on, the Hello that proves a master holds the
// cluster token, and the metadata every call carries (the protocol version and
// the credential). Used by the master (master/), its
// nodes (daemon/cluster/), ClusterClient (libkv/cluster/) and kvctl.
#ifndef NANOKV_IPC_MASTER_MASTER_CHANNEL_H_
#define NANOKV_IPC_MASTER_MASTER_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "nanokv/status.h"

namespace nanokv::master {

// PEM files. A master serves TLS when cert and key are named, and then
// requires client certificates signed by `ca` when ca is named too. A client
// (kvd, engine, kvctl) speaks TLS when ca is named (the master's certificate
// must chain to it), and presents cert/key when named. All empty: plaintext.
struct TlsFiles {
  std::string ca;
  std::string cert;
  std::string key;
  bool any() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// kInvalidArgument / kNotFound naming the file that is missing or unreadable,
// or a cert without its key.
Result<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls);
Result<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsFiles& tls);

// A channel to `address` ("host:port") with nanokv's limits (message size,
// keepalive, reconnect backoff capped at `max_backoff`).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                           std::chrono::milliseconds max_backoff = std::chrono::seconds(1));

// The credential for calls to the master behind `channel` (`address`, for
// the errors): a Hello with a fresh nonce, the master's proof checked
// (master_auth.h). "" when `token` is empty: nothing to prove, no credential.
// kPermissionDenied for a master that cannot prove the token (an impostor on
// its port, another cluster's, one without a token), the transport's status
// when it cannot be reached. Nothing else is sent to a master before this.
Result<std::string> Authenticate(const std::shared_ptr<grpc::Channel>& channel, const std::string& address,
                                 const std::string& token, std::chrono::milliseconds timeout);

// Puts the protocol version and `credential` (from Authenticate; when not
// empty) on `context`, and its deadline `timeout` from now (0: none).
void PrepareCall(grpc::ClientContext* context, const std::string& credential, std::chrono::milliseconds timeout);

}  // namespace nanokv::master

#endif  // NANOKV_IPC_MASTER_MASTER_CHANNEL_H_
