// nanokv_cluster_chaos: the chaos run's cluster mode (docs/RELIABILITY.md).
// A real master and N real kvds as nodes; writer threads open, commit, remove
// and locate objects through ClusterClients without pause, with replicas and
// preferred segments, and put and get real bytes through the nodes' transfer
// agents (the data path between nodes: every writer is a client of no node,
// so every copy is remote; a get that succeeds must be byte-exact), while
// the driver kills kvds with SIGKILL at random
// moments (and, every few rounds, the master) and starts them again. With
// --masters 2 or more, a real etcd too: the masters elect a leader, and the
// master killed is the one that leads (restarted, it stands by). At the
// end of each round the writers hold still and the driver checks the
// master's index against the truth, what the live kvds' own stores hold:
//   - no READY object a live node holds is missing from the index;
//   - the index lists no copy that does not exist on its node.
// The index follows the nodes by events, so the check waits for agreement
// (a bounded time: a disagreement that outlives it is a failure, with the
// difference printed). Prints one JSON object; exits 0 when every round
// agreed, 1 otherwise, 2 on bad usage.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "nanokv/cluster_client.h"
#include "nanokv/object_store.h"
#include "tests/integration/process_util.h"
#include "tests/util/etcd_server.h"

namespace nanokv::chaos {
namespace {

using testing::Process;
using testing::WaitFor;
using Copy = std::pair<std::string, std::string>;  // (key, node)

struct Options {
  uint64_t seed = 1;
  int rounds = 10;
  int nodes = 3;
  int writers = 3;
  int master_every = 4;  // kill the master every this many rounds (0: never)
  int masters = 1;       // 2 or more: elected through etcd
  std::string kvd = NANOKV_KVD_BINARY;
};

class Cluster {
 public:
  explicit Cluster(const Options& o) : options_(o), ipc_("cc_" + std::to_string(getpid())) {
    setenv("NANOKV_RUN_DIR", dir_.path().c_str(), 1);
  }
  ~Cluster() {
    for (auto& node : nodes_) node.Signal(SIGKILL);
    for (auto& master : masters_) master.Signal(SIGKILL);
    nodes_.clear();
    masters_.clear();
    testing::RemoveKvdShm(ipc_);
  }

  // The masters: one alone, or several elected through a real etcd. A
  // rebuild ends once `expected` nodes registered.
  bool StartMasters(int expected) {
    if (options_.masters > 1) {
      auto etcd = testing::EtcdServer::Start();
      if (!etcd.ok()) {
        std::fprintf(stderr, "etcd did not start: %s\n", etcd.status().ToString().c_str());
        return false;
      }
      etcd_ = std::move(etcd).value();
    }
    for (int i = 0; i < options_.masters; ++i) {
      if (!StartMaster(static_cast<size_t>(i), expected)) return false;
    }
    return true;
  }

  // Master i, on its address once it has one.
  bool StartMaster(size_t i, int expected) {
    if (i >= masters_.size()) {
      masters_.resize(i + 1);
      addresses_.resize(i + 1);
    }
    std::vector<std::string> argv = {options_.kvd, "--role", "master", "--id", "chaos" + std::to_string(i),
                                     "--listen", addresses_[i].empty() ? "127.0.0.1:0" : addresses_[i],
                                     "--lease-ttl", "1s", "--heartbeat-interval", "200ms", "--rebuild-window", "10s",
                                     "--expected-nodes", std::to_string(expected)};
    if (etcd_ != nullptr) {
      const std::string config = dir_.path() + "/etcd.yaml";
      std::ofstream(config) << "etcd:\n  endpoints: [\"" << etcd_->endpoint() << "\"]\n  prefix: /chaos/" << ipc_
                            << "\n  lease_ttl: 2s\n";
      argv.insert(argv.end(), {"--config", config});
    }
    Process& master = masters_[i];
    master = Process::Start(argv, {}, dir_.path() + "/master" + std::to_string(i) + "." +
                                          std::to_string(++master_starts_) + ".log");
    std::string log;
    bool up = WaitFor([&] {
      log = master.Log();
      return log.find("serving on ") != std::string::npos || !master.Running();
    }, std::chrono::seconds(20));
    size_t at = log.find("serving on ");
    if (!up || at == std::string::npos) return false;
    at += 11;
    // Set once, before the writers start: a restart binds the same address.
    if (addresses_[i].empty()) addresses_[i] = log.substr(at, log.find(' ', at) - at);
    return true;
  }

  void StartNode(int n) {
    const std::string id = "n" + std::to_string(n);
    const std::string config = dir_.path() + "/" + id + ".yaml";
    std::ofstream(config) << "backend: host\nipc_name: " << ipc_ << "_" << id << "\nrun_dir: " << dir_.path()
                          << "\ncapacity: 48MiB\nhost_device_memory: 96MiB\nreserve_pages: 2\n"
                          << "object_store:\n  size: 24MiB\n  write_timeout: 5s\nmaster:\n  addresses: [\""
                          << Join(addresses_, "\", \"") << "\"]\n  node_id: " << id << "\n  retry_interval: 50ms\n"
                          << "  data_address: 127.0.0.1:0\n";
    if (n >= static_cast<int>(nodes_.size())) nodes_.resize(static_cast<size_t>(n) + 1);
    nodes_[static_cast<size_t>(n)] =
        Process::Start({options_.kvd, "--config", config}, {}, dir_.path() + "/" + id + ".log");
  }

  void KillNode(int n) {
    nodes_[static_cast<size_t>(n)].Signal(SIGKILL);
    nodes_[static_cast<size_t>(n)].Wait(std::chrono::seconds(10));
  }

  // Kills the master that leads (the only one, or the elected one) and
  // returns its index; -1 when none leads.
  int KillLeader() {
    std::optional<size_t> leader = masters_.size() == 1 ? std::optional<size_t>(0) : Leader(nullptr);
    if (!leader) return -1;
    masters_[*leader].Signal(SIGKILL);
    masters_[*leader].Wait(std::chrono::seconds(10));
    return static_cast<int>(*leader);
  }

  // The master that says it leads, and what it says.
  std::optional<size_t> Leader(ClusterStatus* out) {
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (!masters_[i].Running()) continue;
      auto client = Client("driver", {addresses_[i]});
      if (client == nullptr) continue;
      auto status = client->Cluster();
      if (!status.ok() || status->term == 0) continue;
      if (out != nullptr) *out = *status;
      return i;
    }
    return std::nullopt;
  }

  int LiveNodes() {
    int n = 0;
    for (auto& node : nodes_) n += node.started() && node.Running() ? 1 : 0;
    return n;
  }

  std::unique_ptr<ClusterClient> Client(const std::string& node, std::vector<std::string> masters = {}) {
    ClusterClientOptions options;
    options.masters = masters.empty() ? addresses_ : std::move(masters);
    options.node_id = node;
    options.request_timeout_ms = 5000;
    auto client = ClusterClient::Connect(options);
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // What the live kvds hold READY, asked of each kvd itself.
  std::set<Copy> Truth() {
    std::set<Copy> truth;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n].Running()) continue;
      ObjectStoreOptions o;
      o.ipc_name = ipc_ + "_n" + std::to_string(n);
      o.backend = "host";
      auto store = ObjectStore::Open(o);
      if (!store.ok()) continue;
      auto listed = (*store)->List();
      if (!listed.ok()) continue;
      for (const ObjectEntry& e : *listed) {
        if (e.state == ObjectState::kReady) truth.insert({e.key, "n" + std::to_string(n)});
      }
    }
    return truth;
  }

  // What the master's index lists; false while it cannot answer (rebuilding).
  bool Index(std::set<Copy>* out) {
    ClusterStatus status;
    std::optional<size_t> leader = Leader(&status);
    if (!leader || status.rebuilding) return false;
    auto client = Client("driver", {addresses_[*leader]});
    if (client == nullptr) return false;
    int alive = 0;
    for (const auto& n : status.nodes) alive += n.state == "alive" ? 1 : 0;
    if (alive != LiveNodes()) {  // a restarted node not registered yet
      if (getenv("CHAOS_DEBUG")) std::fprintf(stderr, "  alive %d of %d\n", alive, LiveNodes());
      return false;
    }
    auto listed = client->ListObjects();
    if (!listed.ok()) return false;
    out->clear();
    for (const ObjectLocation& o : *listed) {
      for (const Replica& r : o.replicas) out->insert({o.key, r.node_id});
    }
    return true;
  }

  std::string master_logs() {
    std::string logs;
    for (auto& m : masters_) logs += m.Log();
    return logs;
  }

 private:
  static std::string Join(const std::vector<std::string>& items, const std::string& separator) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
    return out;
  }

  const Options options_;
  testing::TempDir dir_;
  const std::string ipc_;
  std::unique_ptr<testing::EtcdServer> etcd_;  // with several masters
  std::vector<Process> masters_;
  std::vector<std::string> addresses_;
  int master_starts_ = 0;
  std::vector<Process> nodes_;
};

// A writer: ops without pause until told to hold, then holds until told to go.
struct Writers {
  std::atomic<bool> hold{false}, stop{false};
  std::atomic<int> holding{0};
  std::atomic<uint64_t> ops{0}, failed_ops{0}, unexpected{0};
  std::atomic<uint64_t> puts_ok{0}, gets_checked{0};  // the data path's successes
  std::mutex mu;
  std::map<std::string, uint64_t> refusals;  // by code name
  std::string first_unexpected;
};

// The bytes of object `key`: its size and every byte follow from the key,
// so a reader checks a get without knowing who wrote it.
std::vector<std::byte> BytesOf(const std::string& key) {
  const uint64_t h = std::hash<std::string>()(key);
  std::vector<std::byte> out(1 + h % 300'000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>((i * 31 + h) & 0xff);
  return out;
}

void Write(Cluster& cluster, Writers& w, int id, uint64_t seed, int nodes) {
  std::mt19937_64 random(seed);
  std::unique_ptr<ClusterClient> client;
  std::vector<std::string> mine;
  uint64_t next = 0;
  while (!w.stop.load()) {
    if (w.hold.load()) {
      ++w.holding;
      while (w.hold.load() && !w.stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --w.holding;
      client.reset();  // the master may have moved: connect again
      continue;
    }
    if (client == nullptr) client = cluster.Client("w" + std::to_string(id));
    if (client == nullptr) continue;
    Status status;
    const int op = static_cast<int>(random() % 12);
    if (op >= 10) {
      // The data path: put real bytes into other nodes' stores, or get
      // (and check) one of this writer's objects.
      if (op == 10) {
        WriteOptions options;
        options.replica_num = 1 + static_cast<uint32_t>(random() % 2);
        std::string key = "w" + std::to_string(id) + ":" + std::to_string(next++);
        status = client->Put(key, BytesOf(key), options);
        if (status.ok()) {
          mine.push_back(key);
          ++w.puts_ok;
        }
      } else if (!mine.empty()) {
        // Half the time the newest (most likely still on a live node).
        const std::string& key = random() % 2 == 0 ? mine.back() : mine[random() % mine.size()];
        auto got = client->Get(key);
        status = got.status();
        // A plan's object (committed without bytes) holds any bytes; a put's are exact.
        if (got.ok() && key.back() != 'p' && *got != BytesOf(key)) {
          status = Status::Internal("the bytes of " + key + " differ from what was put");
        } else if (got.ok() && key.back() != 'p') {
          ++w.gets_checked;
        }
      }
    } else if (op < 6) {
      WriteOptions options;
      options.replica_num = 1 + static_cast<uint32_t>(random() % 3);
      if (random() % 3 == 0) options.preferred_segment = "n" + std::to_string(random() % nodes);
      std::string key = "w" + std::to_string(id) + ":" + std::to_string(next++) + "p";  // "p": a plan, no bytes
      auto plan = client->OpenForWrite(key, 1 + random() % 100'000, options);
      status = plan.status();
      if (plan.ok()) {
        status = random() % 8 == 0 ? client->Revoke(*plan) : client->Commit(*plan);
        if (status.ok()) mine.push_back(key);
      }
    } else if (op < 8 && !mine.empty()) {
      size_t at = random() % mine.size();
      status = client->Remove(mine[at]);
      mine.erase(mine.begin() + static_cast<long>(at));
    } else if (!mine.empty()) {
      status = client->GetLocation(mine[random() % mine.size()]).status();
    }
    ++w.ops;
    if (status.code() == Code::kUnavailable) {
      // The master or a node is gone for now: ask again shortly, as an engine would.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!status.ok()) {
      ++w.failed_ops;
      std::lock_guard lock(w.mu);
      ++w.refusals[CodeName(status.code())];
    }
    // Refusals the chaos explains (a node or the master gone, a key gone with
    // its node, the store full); anything else is a bug.
    Code c = status.code();
    if (c != Code::kOk && c != Code::kUnavailable && c != Code::kNotFound && c != Code::kResourceExhausted &&
        c != Code::kFailedPrecondition && c != Code::kAlreadyExists) {
      ++w.unexpected;
      std::lock_guard lock(w.mu);
      if (w.first_unexpected.empty()) w.first_unexpected = status.ToString();
    }
  }
}

std::string Diff(const std::set<Copy>& truth, const std::set<Copy>& index) {
  std::string text;
  int shown = 0;
  for (const Copy& c : truth) {
    if (!index.count(c) && shown++ < 10) text += "  missing from the index: " + c.first + " on " + c.second + "\n";
  }
  for (const Copy& c : index) {
    if (!truth.count(c) && shown++ < 20) text += "  listed but not on its node: " + c.first + " on " + c.second + "\n";
  }
  return text;
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"nanokv_cluster_chaos: kvds and the master killed at random during plans; the index checked "
               "against the nodes after every round"};
  app.add_option("--seed", o.seed);
  app.add_option("--rounds", o.rounds)->check(CLI::Range(1, 100000));
  app.add_option("--nodes", o.nodes)->check(CLI::Range(2, 16));
  app.add_option("--writers", o.writers)->check(CLI::Range(1, 64));
  app.add_option("--master-every", o.master_every, "kill the master every N rounds (0: never)");
  app.add_option("--masters", o.masters, "masters; 2 or more are elected through a real etcd")
      ->check(CLI::Range(1, 5));
  app.add_option("--kvd", o.kvd);
  CLI11_PARSE(app, argc, argv);
  // The data path over loopback TCP, for the kvds too (inherited).
  setenv("UCX_TLS", "tcp", 0);
  std::mt19937_64 random(o.seed);
  Cluster cluster(o);
  if (!cluster.StartMasters(o.nodes)) {
    std::fprintf(stderr, "the masters did not start:\n%s\n", cluster.master_logs().c_str());
    return 1;
  }
  for (int n = 0; n < o.nodes; ++n) cluster.StartNode(n);
  Writers w;
  std::vector<std::thread> writers;
  for (int i = 0; i < o.writers; ++i) {
    writers.emplace_back([&, i] { Write(cluster, w, i, o.seed * 1000 + static_cast<uint64_t>(i), o.nodes); });
  }
  int node_kills = 0, master_kills = 0, failures = 0;
  double worst_agreement_ms = 0;
  for (int round = 1; round <= o.rounds && failures == 0; ++round) {
    // Plans go on while a node dies at a random moment, and comes back.
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 400));
    int victim = static_cast<int>(random() % static_cast<uint64_t>(o.nodes));
    cluster.KillNode(victim);
    ++node_kills;
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 300));
    if (o.master_every > 0 && round % o.master_every == 0) {
      // The leader dies during plans; with etcd a standby takes over and the
      // dead one comes back as a standby.
      const int killed = cluster.KillLeader();
      master_kills += killed >= 0 ? 1 : 0;
      cluster.StartNode(victim);
      if (killed >= 0 && !cluster.StartMaster(static_cast<size_t>(killed), o.nodes)) {
        std::fprintf(stderr, "the master did not restart\n");
        return 1;
      }
    } else {
      cluster.StartNode(victim);
    }
    // The barrier: writers hold still, then the index must agree with the
    // nodes within a bounded time.
    w.hold.store(true);
    WaitFor([&] { return w.holding.load() == o.writers; }, std::chrono::seconds(30));
    auto start = std::chrono::steady_clock::now();
    std::set<Copy> truth, index;
    bool agreed = WaitFor([&] { return cluster.Index(&index) && (truth = cluster.Truth()) == index; },
                          std::chrono::seconds(20));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    worst_agreement_ms = std::max(worst_agreement_ms, ms);
    if (getenv("CHAOS_DEBUG")) std::fprintf(stderr, "round %d: agreed in %.1f ms\n", round, ms);
    if (!agreed) {
      ++failures;
      std::fprintf(stderr, "round %d: the index disagrees with the nodes:\n%s", round, Diff(truth, index).c_str());
    }
    w.hold.store(false);
  }
  w.stop.store(true);
  for (auto& t : writers) t.join();
  if (w.unexpected.load() > 0) {
    ++failures;
    std::fprintf(stderr, "unexpected errors: %s\n", w.first_unexpected.c_str());
  }
  std::string refusals;
  for (const auto& [code, n] : w.refusals) {
    refusals += (refusals.empty() ? "" : ", ") + std::string("\"") + code + "\": " + std::to_string(n);
  }
  std::printf("{\"rounds\": %d, \"masters\": %d, \"nodes\": %d, \"node_kills\": %d, \"master_kills\": %d, \"ops\": %llu, "
              "\"remote_puts\": %llu, \"remote_gets_checked\": %llu, "
              "\"refused_ops\": {%s}, \"unexpected_errors\": %llu, \"worst_agreement_ms\": %.1f, \"ok\": %s}\n",
              o.rounds, o.masters, o.nodes, node_kills, master_kills, static_cast<unsigned long long>(w.ops.load()),
              static_cast<unsigned long long>(w.puts_ok.load()), static_cast<unsigned long long>(w.gets_checked.load()),
              refusals.c_str(), static_cast<unsigned long long>(w.unexpected.load()), worst_agreement_ms,
              failures == 0 ? "true" : "false");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace nanokv::chaos

int main(int argc, char** argv) { return nanokv::chaos::Main(argc, argv); }
