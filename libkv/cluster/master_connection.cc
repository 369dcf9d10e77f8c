#include "libkv/cluster/master_connection.h"

#include <algorithm>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_protocol.h"
#include "ipc/master/token.h"

namespace nanokv::cluster {

Result<std::unique_ptr<MasterConnection>> MasterConnection::Create(std::vector<std::string> addresses,
                                                                   const std::string& token_file,
                                                                   const master::TlsFiles& tls,
                                                                   std::chrono::milliseconds timeout) {
  if (addresses.empty()) {
    return Status::InvalidArgument("nanokv cluster: no master address (ClusterClientOptions::masters or "
                                   "$NANOKV_MASTERS)");
  }
  for (const std::string& address : addresses) {
    if (address.empty() || address.size() > master::kMaxAddressBytes || address.find(':') == std::string::npos) {
      return Status::InvalidArgument("nanokv cluster: master address '" + address.substr(0, 80) +
                                     "' is not host:port");
    }
  }
  std::string token;
  if (!token_file.empty()) {
    NANOKV_ASSIGN_OR_RETURN(token, master::ReadTokenFile(token_file));
  }
  NANOKV_ASSIGN_OR_RETURN(auto credentials, master::MakeChannelCredentials(tls));
  return std::unique_ptr<MasterConnection>(
      new MasterConnection(std::move(addresses), std::move(token), std::move(credentials), timeout));
}

MasterConnection::MasterConnection(std::vector<std::string> addresses, std::string token,
                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                   std::chrono::milliseconds timeout)
    : addresses_(std::move(addresses)),
      token_(std::move(token)),
      credentials_(std::move(credentials)),
      timeout_(timeout) {}

Result<MasterConnection::Peer*> MasterConnection::Proven(const std::string& address) {
  Peer* peer;
  {
    std::lock_guard lock(mu_);
    peer = &peers_[address];
    if (peer->stub == nullptr) {
      peer->channel = master::MakeChannel(address, credentials_);
      peer->stub = master::v1::Master::NewStub(peer->channel);
    }
    if (peer->proven) return peer;
  }
  NANOKV_ASSIGN_OR_RETURN(std::string credential, master::Authenticate(peer->channel, address, token_, timeout_));
  std::lock_guard lock(mu_);
  peer->credential = std::move(credential);
  peer->proven = true;
  return peer;
}

Status MasterConnection::Run(const Call& call, std::string* answered) {
  Status last = Status::Unavailable("nanokv cluster: no master answered");
  size_t tries;
  {
    std::lock_guard lock(mu_);
    tries = addresses_.size() + 2;
  }
  for (size_t attempt = 0; attempt < tries; ++attempt) {
    std::string address;
    {
      std::lock_guard lock(mu_);
      address = addresses_[current_ % addresses_.size()];
    }
    auto peer = Proven(address);
    if (!peer.ok()) {
      if (answered != nullptr) *answered = address;
      last = peer.status();
      // Unreachable: the next master. One that failed its proof is refused
      // whatever it would say about leaders.
      if (last.code() != Code::kUnavailable) return last;
      std::lock_guard lock(mu_);
      current_ = (current_ + 1) % addresses_.size();
      continue;
    }
    std::string credential;
    {
      std::lock_guard lock(mu_);
      credential = (*peer)->credential;
    }
    grpc::ClientContext context;
    master::PrepareCall(&context, credential, timeout_);
    grpc::Status status = call(*(*peer)->stub, context);
    if (answered != nullptr) *answered = address;
    if (status.ok()) return Status::OK();
    last = master::FromGrpcStatus(status, "master " + address);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return last;
    const auto& trailers = context.GetServerTrailingMetadata();
    auto hint = trailers.find(master::kLeaderKey);
    std::lock_guard lock(mu_);
    if (hint != trailers.end() && hint->second.size() == 0) {
      // A master that does not lead and knows no leader: ask another.
      current_ = (current_ + 1) % addresses_.size();
    } else if (hint != trailers.end()) {
      // A master that does not lead names the one that does: go there.
      std::string leader(hint->second.data(), std::min<size_t>(hint->second.size(), master::kMaxAddressBytes));
      auto it = std::find(addresses_.begin(), addresses_.end(), leader);
      if (it == addresses_.end()) it = addresses_.insert(addresses_.end(), leader);
      current_ = static_cast<size_t>(it - addresses_.begin());
    } else if (status.error_details().empty()) {
      // The transport's own: that master is not reachable. Try the next.
      current_ = (current_ + 1) % addresses_.size();
    } else {
      return last;  // a master that answered kUnavailable itself (rebuilding): say so
    }
  }
  return last;
}

}  // namespace nanokv::cluster
