// A running master: the gRPC server on its address, the ClusterMaster behind
// it, its leadership and a clock thread (leases, instruction deadlines).
// What `kvd --role master` runs (master_main.cc), and what tests and the
// benchmark start in their own process.
#ifndef NANOKV_MASTER_SERVICE_MASTER_SERVER_H_
#define NANOKV_MASTER_SERVICE_MASTER_SERVER_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "master/config/master_config.h"
#include "master/election/node_roster.h"
#include "master/service/cluster_master.h"
#include "master/service/master_metrics.h"
#include "master/service/master_service.h"
#include "ops/http_server.h"
#include "ops/metrics.h"

namespace nanokv::master {

class MasterServer {
 public:
  // Binds `config.listen`, then leads alone at config.term or, with an
  // `etcd:` block, stands for election (ElectionLeadership) and keeps its
  // nodes in etcd (NodeRoster). With metrics_port, /metrics is bound first
  // (MasterMetrics' series). kUnavailable when an address cannot be bound;
  // errors of the token, TLS and etcd options name them.
  static Result<std::unique_ptr<MasterServer>> Start(const MasterConfig& config);
  ~MasterServer();  // Stop()

  // Stops leading (every node session ends), then the server.
  void Stop();
  // Where it listens, with the port bound ("127.0.0.1:7470").
  const std::string& address() const { return address_; }
  ClusterMaster& master() { return *master_; }
  // "http://127.0.0.1:9464/metrics"; empty when metrics are off.
  std::string metrics_url() const { return metrics_server_ ? metrics_server_->url() : ""; }

 private:
  MasterServer() = default;
  void RunClock();  // the clock thread: Tick every 20 ms

  // The leadership's callback: reads the roster when it begins to lead.
  void OnLeadership(bool is_leader, const LeaderRecord& leader);

  std::string address_;
  std::chrono::milliseconds roster_timeout_{0};
  std::unique_ptr<NodeRoster> roster_;  // with etcd; outlives the master
  std::unique_ptr<Leadership> leadership_;
  std::unique_ptr<ClusterMaster> master_;
  std::unique_ptr<MasterService> service_;
  std::unique_ptr<grpc::Server> server_;
  ops::Registry registry_;
  std::unique_ptr<MasterMetrics> metrics_;
  // Declared after what its thread renders, so it stops first.
  std::unique_ptr<ops::MetricsServer> metrics_server_;
  std::thread clock_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_MASTER_SERVER_H_
