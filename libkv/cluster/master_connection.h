// ClusterClient's way to the master that leads: a channel per master address
// (TLS and token as configured; each master proves the token before it is
// called, ipc/master/master_auth.h), and a call that follows a refusal by a
// master that does not lead to the leader it names, and a master that cannot
// be reached to the next address. Thread-safe.
#ifndef NANOKV_LIBKV_CLUSTER_MASTER_CONNECTION_H_
#define NANOKV_LIBKV_CLUSTER_MASTER_CONNECTION_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ipc/master/master_channel.h"
#include "ipc/proto/master.grpc.pb.h"
#include "nanokv/status.h"

namespace nanokv::cluster {

class MasterConnection {
 public:
  using Call = std::function<grpc::Status(master::v1::Master::Stub& stub, grpc::ClientContext& context)>;

  // kInvalidArgument without addresses; token and TLS errors name their file.
  static Result<std::unique_ptr<MasterConnection>> Create(std::vector<std::string> addresses,
                                                          const std::string& token_file,
                                                          const master::TlsFiles& tls,
                                                          std::chrono::milliseconds timeout);

  // Runs `call` with a prepared context (version, credential, deadline) on the
  // master believed to lead, following leader hints and unreachable
  // masters; the last answer's Status. *answered: the address that answered.
  Status Run(const Call& call, std::string* answered = nullptr);

  // The cluster token read from the token file at Create ("" without one):
  // the client proves it to other nodes' kvds too.
  const std::string& token() const { return token_; }

 private:
  MasterConnection(std::vector<std::string> addresses, std::string token,
                   std::shared_ptr<grpc::ChannelCredentials> credentials, std::chrono::milliseconds timeout);
  // One master's channel, and the credential its Hello gave (empty until
  // it proved the token; none is needed without one).
  struct Peer {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<master::v1::Master::Stub> stub;
    std::string credential;
    bool proven = false;
  };
  // The peer at `address`, proven first: nothing goes to a master that did
  // not prove it holds the token, not even a credential. Called unlocked
  // (a Hello is a round trip); two threads may both say Hello, either's
  // credential serves.
  Result<Peer*> Proven(const std::string& address);

  std::mutex mu_;
  std::vector<std::string> addresses_;
  size_t current_ = 0;
  std::map<std::string, Peer> peers_;  // never erased: a Peer* stays valid
  const std::string token_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace nanokv::cluster

#endif  // NANOKV_LIBKV_CLUSTER_MASTER_CONNECTION_H_
