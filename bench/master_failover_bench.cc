// The cluster's failover through real masters: etcd (Debian's etcd-server,
// started as the tests start it), --masters masters (kvd --role master with
// an etcd: block) and --nodes kvds listing them all, --objects READY objects
// spread over the nodes. The leading master is SIGKILLed --kills times; each
// time, on this machine's monotonic clock from the kill:
//   - elected: until a master answers that it leads (the election's part);
//   - serving: until a client that knows every master finds an object
//     again (election + the new leader's rebuild: every node re-registered
//     with its objects, which the roster in etcd says to wait for).
// After each failover every object is looked up (missing ones are counted:
// the goal is none), and the killed master comes back as a standby before
// the next kill. Prints one JSON object; the goal is serving within 5 s.
//
//   master_failover_bench [--kvd PATH] [--kills 20] [--masters 2] [--nodes 3]
//                         [--objects 300] [--lease-ttl-s 3]
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "nanokv/cluster_client.h"
#include "tests/integration/process_util.h"
#include "tests/util/etcd_server.h"

namespace nanokv {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::WaitFor;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "master_failover_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Args {
  std::string kvd;
  int kills = 20;
  int masters = 2;
  int nodes = 3;
  int objects = 300;
  int lease_ttl_s = 3;
};

class Bench {
 public:
  explicit Bench(const Args& args) : args_(args), ipc_("mfb_" + std::to_string(getpid())) {
    setenv("NANOKV_RUN_DIR", dir_.path().c_str(), 1);
    auto etcd = testing::EtcdServer::Start();
    if (!etcd.ok()) Die("etcd: " + etcd.status().ToString());
    etcd_ = std::move(etcd).value();
    std::ofstream(dir_.path() + "/master.yaml")
        << "lease_ttl: 1s\nheartbeat_interval: 200ms\nrebuild_window: 30s\nlog_level: warn\netcd:\n  endpoints: [\""
        << etcd_->endpoint() << "\"]\n  prefix: /bench/" << ipc_ << "\n  lease_ttl: " << args.lease_ttl_s << "s\n";
    masters_.resize(static_cast<size_t>(args.masters));
    addresses_.resize(masters_.size());
    for (size_t i = 0; i < masters_.size(); ++i) StartMaster(i);
    for (int n = 0; n < args.nodes; ++n) StartNode(n);
  }
  ~Bench() {
    for (auto& p : nodes_) p.Signal(SIGKILL);
    for (auto& p : masters_) p.Signal(SIGKILL);
    nodes_.clear();
    masters_.clear();
    testing::RemoveKvdShm(ipc_);
  }

  void StartMaster(size_t i) {
    const std::string log = dir_.path() + "/m" + std::to_string(i) + "." + std::to_string(starts_++) + ".log";
    masters_[i] = Process::Start({args_.kvd, "--role", "master", "--config", dir_.path() + "/master.yaml", "--id",
                                  "m" + std::to_string(i), "--listen",
                                  addresses_[i].empty() ? "127.0.0.1:0" : addresses_[i], "--log-level", "info"},
                                 {}, log);
    std::string text;
    WaitFor([&] {
      text = masters_[i].Log();
      return text.find("serving on ") != std::string::npos || !masters_[i].Running();
    }, 20s);
    size_t at = text.find("serving on ");
    if (at == std::string::npos) Die("master m" + std::to_string(i) + " did not start:\n" + text);
    at += 11;
    if (addresses_[i].empty()) addresses_[i] = text.substr(at, text.find(' ', at) - at);
  }

  void StartNode(int n) {
    const std::string id = "n" + std::to_string(n);
    std::string masters;
    for (const auto& a : addresses_) masters += (masters.empty() ? "\"" : ", \"") + a + "\"";
    const std::string config = dir_.path() + "/" + id + ".yaml";
    std::ofstream(config) << "backend: host\nipc_name: " << ipc_ << "_" << id << "\nrun_dir: " << dir_.path()
                          << "\ncapacity: 48MiB\nhost_device_memory: 96MiB\nreserve_pages: 2\nlog_level: warn\n"
                          << "object_store:\n  size: 24MiB\nmaster:\n  addresses: [" << masters
                          << "]\n  node_id: " << id << "\n  retry_interval: 50ms\n";
    nodes_.push_back(Process::Start({args_.kvd, "--config", config}, {}, dir_.path() + "/" + id + ".log"));
  }

  std::unique_ptr<ClusterClient> Client(std::vector<std::string> masters) {
    ClusterClientOptions options;
    options.masters = std::move(masters);
    options.node_id = "bench";
    options.request_timeout_ms = 1000;
    auto client = ClusterClient::Connect(options);
    if (!client.ok()) Die("client: " + client.status().ToString());
    return std::move(client).value();
  }

  // The master that leads with every node alive and its rebuild done.
  std::optional<size_t> Leader(bool serving) {
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (!masters_[i].Running()) continue;
      auto status = Client({addresses_[i]})->Cluster();
      if (!status.ok() || status->term == 0) continue;
      if (!serving) return i;
      int alive = 0;
      for (const auto& n : status->nodes) alive += n.state == "alive" ? 1 : 0;
      if (!status->rebuilding && alive == args_.nodes) return i;
    }
    return std::nullopt;
  }

  // Every master but the leader stands by, knowing who leads.
  bool StandbysReady(size_t leader) {
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (i == leader) continue;
      auto status = Client({addresses_[i]})->Cluster();
      if (!status.ok() || status->term != 0 || status->leader_address != addresses_[leader]) return false;
    }
    return true;
  }

  int Run() {
    std::optional<size_t> leader;
    if (!WaitFor([&] { return (leader = Leader(true)).has_value(); }, 60s)) Die("no master led with every node");
    auto client = Client(addresses_);
    for (int i = 0; i < args_.objects; ++i) {
      std::string key = "obj" + std::to_string(i);
      auto plan = client->OpenForWrite(key, 4096, {.preferred_segment = "n" + std::to_string(i % args_.nodes)});
      if (!plan.ok()) Die("open " + key + ": " + plan.status().ToString());
      Status committed = client->Commit(*plan);
      if (!committed.ok()) Die("commit " + key + ": " + committed.ToString());
    }
    std::vector<double> elected_ms, serving_ms;
    long long missing = 0;
    for (int kill = 0; kill < args_.kills; ++kill) {
      if (!WaitFor([&] { return (leader = Leader(true)).has_value() && StandbysReady(*leader); }, 60s)) {
        Die("no leader with standbys before kill " + std::to_string(kill));
      }
      const size_t victim = *leader;
      const double start = bench::NowMicros();
      masters_[victim].Signal(SIGKILL);
      masters_[victim].Wait(10s);
      double elected = 0;
      const std::string probe = "obj" + std::to_string(kill % args_.objects);
      bool served = WaitFor([&] {
        if (elected == 0 && Leader(false).has_value()) elected = bench::NowMicros();
        return client->GetLocation(probe).ok();
      }, 60s);
      const double done = bench::NowMicros();
      if (!served) Die("nobody served after kill " + std::to_string(kill));
      if (elected == 0) elected = done;
      elected_ms.push_back((elected - start) / 1000.0);
      serving_ms.push_back((done - start) / 1000.0);
      for (int i = 0; i < args_.objects; ++i) {
        missing += client->GetLocation("obj" + std::to_string(i)).ok() ? 0 : 1;
      }
      std::fprintf(stderr, "kill %d: m%zu killed; a leader in %.0f ms, serving in %.0f ms\n", kill, victim,
                   elected_ms.back(), serving_ms.back());
      StartMaster(victim);
    }
    auto max = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    bench::JsonObject json;
    json.Add("bench", "master_failover")
        .Add("kills", static_cast<long long>(args_.kills))
        .Add("masters", static_cast<long long>(args_.masters))
        .Add("nodes", static_cast<long long>(args_.nodes))
        .Add("objects", static_cast<long long>(args_.objects))
        .Add("etcd_lease_ttl_s", static_cast<long long>(args_.lease_ttl_s))
        .Add("elected_ms_p50", bench::Quantile(elected_ms, 0.5))
        .Add("elected_ms_max", max(elected_ms))
        .Add("serving_ms_p50", bench::Quantile(serving_ms, 0.5))
        .Add("serving_ms_max", max(serving_ms))
        .Add("objects_missing_after_failover", missing)
        .Add("goal_serving_within_5s", max(serving_ms) <= 5000.0);
    std::printf("%s\n", json.str().c_str());
    return missing == 0 ? 0 : 1;
  }

 private:
  const Args args_;
  testing::TempDir dir_;
  const std::string ipc_;
  std::unique_ptr<testing::EtcdServer> etcd_;
  std::vector<Process> masters_;
  std::vector<std::string> addresses_;
  std::vector<Process> nodes_;
  int starts_ = 0;
};

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) {
  nanokv::Args args;
  args.kvd = nanokv::bench::DefaultKvd(argv[0]);
  CLI::App app{"master_failover_bench: the leading master SIGKILLed N times; time to a new leader and to serving"};
  app.add_option("--kvd", args.kvd, "the kvd binary");
  app.add_option("--kills", args.kills)->check(CLI::Range(1, 1000));
  app.add_option("--masters", args.masters)->check(CLI::Range(2, 5));
  app.add_option("--nodes", args.nodes)->check(CLI::Range(1, 16));
  app.add_option("--objects", args.objects)->check(CLI::Range(1, 100000));
  app.add_option("--lease-ttl-s", args.lease_ttl_s, "the masters' etcd lease")->check(CLI::Range(1, 60));
  CLI11_PARSE(app, argc, argv);
  nanokv::bench::LogToStderr("master_failover_bench");
  return nanokv::Bench(args).Run();
}
