#include "master/service/master_server.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "ipc/master/master_protocol.h"
#include "ipc/master/token.h"

namespace nanokv::master {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "master";
  return name;
}

// "host:0" with the port the server bound.
std::string WithPort(const std::string& address, int port) {
  return address.substr(0, address.rfind(':')) + ":" + std::to_string(port);
}

}  // namespace

Result<std::unique_ptr<MasterServer>> MasterServer::Start(const MasterConfig& config) {
  std::string token;
  if (!config.token_file.empty()) {
    NANOKV_ASSIGN_OR_RETURN(token, ReadTokenFile(config.token_file));
  }
  NANOKV_ASSIGN_OR_RETURN(auto credentials, MakeServerCredentials(config.tls));
  std::unique_ptr<MasterServer> server(new MasterServer());
  ClusterMasterOptions options;
  options.id = config.id.empty() ? HostName() : config.id;
  options.lease_ttl = config.lease_ttl;
  options.heartbeat_interval = config.heartbeat_interval;
  options.instruction_timeout = config.instruction_timeout;
  options.rebuild_window = config.rebuild_window;
  options.expected_nodes = config.expected_nodes;

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // A node's stream is its lease; keepalive pings find a dead peer's
  // connection even when nothing is sent on it.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // The nodes ping every 2 s (ipc/master/master_channel.cc): allowed.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // The service needs the master, whose leadership needs the advertised
  // address, known only once bound (listen may say port 0): the leadership
  // is made with it before it starts.
  auto sole = std::make_unique<SoleLeadership>(options.id, "", config.term);
  SoleLeadership* sole_ptr = sole.get();
  server->leadership_ = std::move(sole);
  server->master_ = std::make_unique<ClusterMaster>(options, *server->leadership_);
  server->service_ = std::make_unique<MasterService>(*server->master_, token);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return Status::Unavailable("master: cannot listen on " + config.listen + " (in use, or not an address here)");
  }
  server->address_ = WithPort(config.listen, port);
  sole_ptr->set_address(config.advertise.empty() ? server->address_ : config.advertise);
  ClusterMaster* master = server->master_.get();
  NANOKV_RETURN_IF_ERROR(server->leadership_->Start(
      [master](bool is_leader, const LeaderRecord& leader) { master->OnLeadership(is_leader, leader); }));
  server->clock_ = std::thread([s = server.get()] { s->RunClock(); });
  spdlog::info("master {}: serving on {} ({}{}), term {}", options.id, server->address_,
               config.tls.any() ? "TLS" : "plaintext", token.empty() ? "" : ", token required", config.term);
  return server;
}

MasterServer::~MasterServer() { Stop(); }

void MasterServer::RunClock() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(20));
    if (stopping_) break;
    lock.unlock();
    master_->Tick(Clock::now());
    lock.lock();
  }
}

void MasterServer::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (clock_.joinable()) clock_.join();
  if (leadership_) leadership_->Stop();  // ends every node session, fails what waits on them
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace nanokv::master
