#include "master/service/master_server.h"

#include <unistd.h>

#include <algorithm>
#include <functional>

#include <grpcpp/resource_quota.h>
#include <spdlog/spdlog.h>

#include "ipc/master/master_protocol.h"
#include "ipc/master/token.h"
#include "master/service/election_leadership.h"

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
  if (config.metrics_port) {
    // Bound before anything is made: a port in use stops the start here.
    ops::MetricsServerOptions metrics;
    metrics.address = config.metrics_address;
    metrics.port = *config.metrics_port;
    NANOKV_ASSIGN_OR_RETURN(server->metrics_server_,
                            ops::MetricsServer::Start(metrics, [s = server.get()] { return s->registry_.Render(); }));
  }
  ClusterMasterOptions options;
  options.id = config.id.empty() ? HostName() : config.id;
  options.lease_ttl = config.lease_ttl;
  options.heartbeat_interval = config.heartbeat_interval;
  options.instruction_timeout = config.instruction_timeout;
  options.rebuild_window = config.rebuild_window;
  options.expected_nodes = config.expected_nodes;
  options.max_objects_per_node = config.max_objects_per_node;

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // gRPC 1.51 reads a unary request whole before any handler, and so the
  // credential check, sees it: what every caller's requests may hold at
  // once is bounded here instead (unauthenticated 60 MiB calls took the
  // master to 1.1 GB without it).
  grpc::ResourceQuota quota("nanokv-master");
  quota.Resize(kMasterBufferBytes);
  builder.SetResourceQuota(quota);
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
  // is made first and told the address before it starts.
  std::function<void(const std::string&)> set_address;
  if (config.etcd.enabled()) {
    etcd::EtcdOptions etcd_options;
    etcd_options.endpoints = config.etcd.endpoints;
    etcd_options.ca_file = config.etcd.tls.ca;
    etcd_options.cert_file = config.etcd.tls.cert;
    etcd_options.key_file = config.etcd.tls.key;
    NANOKV_ASSIGN_OR_RETURN(server->roster_, NodeRoster::Start(etcd_options, config.etcd.nodes_prefix()));
    ElectionOptions election;
    election.etcd_endpoints = config.etcd.endpoints;
    election.election_key = config.etcd.election_key();
    election.candidate_id = options.id;
    election.lease_ttl = config.etcd.lease_ttl;
    election.etcd_ca_file = config.etcd.tls.ca;
    election.etcd_cert_file = config.etcd.tls.cert;
    election.etcd_key_file = config.etcd.tls.key;
    auto elected = std::make_unique<ElectionLeadership>(std::move(election));
    set_address = [e = elected.get()](const std::string& address) { e->set_address(address); };
    server->leadership_ = std::move(elected);
    // Read while the master refuses every call (it has not taken up its
    // term yet), so well within the lease.
    server->roster_timeout_ = std::max(std::chrono::milliseconds(200), config.etcd.lease_ttl / 5);
  } else {
    auto sole = std::make_unique<SoleLeadership>(options.id, "", config.term);
    set_address = [s = sole.get()](const std::string& address) { s->set_address(address); };
    server->leadership_ = std::move(sole);
  }
  server->master_ = std::make_unique<ClusterMaster>(options, *server->leadership_);
  server->master_->set_roster(server->roster_.get());
  if (server->metrics_server_) {
    server->metrics_ = std::make_unique<MasterMetrics>(server->registry_, *server->master_);
  }
  server->service_ = std::make_unique<MasterService>(*server->master_, token, server->metrics_.get());
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return Status::Unavailable("master: cannot listen on " + config.listen + " (in use, or not an address here)");
  }
  server->address_ = WithPort(config.listen, port);
  set_address(config.advertise.empty() ? server->address_ : config.advertise);
  NANOKV_RETURN_IF_ERROR(server->leadership_->Start(
      [s = server.get()](bool is_leader, const LeaderRecord& leader) { s->OnLeadership(is_leader, leader); }));
  server->clock_ = std::thread([s = server.get()] { s->RunClock(); });
  spdlog::info("master {}: serving on {} ({}{}), {}", options.id, server->address_,
               config.tls.any() ? "TLS" : "plaintext", token.empty() ? "" : ", token required",
               config.etcd.enabled() ? "standing for election under " + config.etcd.election_key()
                                     : "term " + std::to_string(config.term));
  if (server->metrics_server_) spdlog::info("master {}: metrics at {}", options.id, server->metrics_url());
  return server;
}

void MasterServer::OnLeadership(bool is_leader, const LeaderRecord& leader) {
  if (!is_leader || roster_ == nullptr) {
    master_->OnLeadership(is_leader, leader);
    return;
  }
  auto listed = roster_->Read(etcd::Clock::now() + roster_timeout_);
  if (!listed.ok()) {
    // Without the list the rebuild waits for expected_nodes or the window:
    // slower, never wrong.
    spdlog::warn("master: cannot read the node roster ({}); the rebuild waits out its window",
                 listed.status().ToString());
    master_->OnLeadership(true, leader);
    return;
  }
  master_->OnLeadership(true, leader, std::move(listed).value());
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
  // What the roster still has to write (a node that just registered) goes
  // first: the next leader waits for the nodes it lists.
  if (roster_) roster_->Flush(etcd::Clock::now() + std::chrono::seconds(1));
  if (leadership_) leadership_->Stop();  // ends every node session, fails what waits on them
  if (roster_) roster_->Stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

}  // namespace nanokv::master
