#include "ipc/master/master_channel.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>

#include "base/small_file.h"
#include "ipc/master/grpc_status.h"
#include "ipc/master/master_auth.h"
#include "ipc/master/master_protocol.h"
#include "ipc/proto/master.grpc.pb.h"

namespace nanokv::master {
namespace {

Result<std::string> ReadPem(const std::string& path, const char* what) {
  return ReadPemFile(path, std::string("tls ") + what);
}

}  // namespace

Result<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls) {
  if (!tls.any()) return grpc::InsecureServerCredentials();
  if (tls.cert.empty() || tls.key.empty()) {
    return Status::InvalidArgument("tls: a master serving TLS needs both cert and key");
  }
  grpc::SslServerCredentialsOptions options(tls.ca.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  NANOKV_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.cert, "cert"));
  NANOKV_ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.key, "key"));
  options.pem_key_cert_pairs.push_back(pair);
  if (!tls.ca.empty()) {
    NANOKV_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls.ca, "ca"));
  }
  return grpc::SslServerCredentials(options);
}

Result<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsFiles& tls) {
  if (!tls.any()) return grpc::InsecureChannelCredentials();
  if (tls.ca.empty()) {
    return Status::InvalidArgument("tls: a client needs ca, the certificate the master's must chain to");
  }
  if (tls.cert.empty() != tls.key.empty()) {
    return Status::InvalidArgument("tls: a client certificate needs both cert and key");
  }
  grpc::SslCredentialsOptions options;
  NANOKV_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls.ca, "ca"));
  if (!tls.cert.empty()) {
    NANOKV_ASSIGN_OR_RETURN(options.pem_cert_chain, ReadPem(tls.cert, "cert"));
    NANOKV_ASSIGN_OR_RETURN(options.pem_private_key, ReadPem(tls.key, "key"));
  }
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                           std::chrono::milliseconds max_backoff) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // A master that went away is tried again soon, not after gRPC's default
  // two-minute backoff: kvds re-register as soon as one answers.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(max_backoff.count()));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Also the least time gRPC gives one connection attempt (its HTTP/2
  // handshake included): at 100 ms a master slowed by ThreadSanitizer on a
  // busy 2-core machine missed it and a call failed UNAVAILABLE at once. A
  // master that is gone refuses the connection at once anyway.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  // Each channel its own connection: a client's channels to several masters,
  // and the node agent's after a reconnect, never share a dead subchannel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Keepalive pings find a master that hangs (a stopped process answers no
  // ping) even on a session where nothing is being sent.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Retries are the caller's (MasterConnection::Run follows the leader;
  // the node agent reconnects): gRPC's own retry filter would only keep a
  // copy of every request sent, a batch's hundreds of items included.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  return grpc::CreateCustomChannel(address, creds, args);
}

Result<std::string> Authenticate(const std::shared_ptr<grpc::Channel>& channel, const std::string& address,
                                 const std::string& token, std::chrono::milliseconds timeout) {
  if (token.empty()) return std::string();
  auto stub = v1::Master::NewStub(channel);
  grpc::ClientContext context;
  PrepareCall(&context, "", timeout);
  v1::HelloRequest request;
  const std::string nonce = NewNonce();
  request.set_nonce(nonce);
  v1::HelloReply reply;
  grpc::Status status = stub->Hello(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, "master " + address);
  if (reply.ticket().empty() && reply.proof().empty()) {
    return Status::PermissionDenied("master " + address +
                                    " has no cluster token (token_file) and this side has one: it cannot prove it "
                                    "is this cluster's master; give it the token");
  }
  auto credential = AcceptHello(token, nonce, reply.ticket(), reply.proof());
  if (!credential.ok()) {
    return Status(credential.status().code(), "master " + address + ": " + std::string(credential.status().message()));
  }
  return credential;
}

void PrepareCall(grpc::ClientContext* context, const std::string& credential, std::chrono::milliseconds timeout) {
  context->AddMetadata(kProtocolKey, std::to_string(kProtocolVersion));
  if (!credential.empty()) context->AddMetadata(kCredentialKey, credential);
  if (timeout.count() > 0) context->set_deadline(std::chrono::system_clock::now() + timeout);
}

}  // namespace nanokv::master
