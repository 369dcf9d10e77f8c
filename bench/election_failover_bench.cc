// How long the masters are without a leader when the leader dies: the
// leader's process is SIGKILLed (no resignation: its lease must lapse at
// etcd) --kills times, and each time the failover is the time from the kill
// to the standby's on_change(true), both on the monotonic clock of this
// machine (each candidate prints when it became leader). The killed
// candidate is started again and registered before the next kill, so a
// standby is always waiting.
//
// The floor, measured in the same run against the same etcd: a linearizable
// Range and a lease renewal (KeepAlive) round trip. The failover itself is
// set by the lease: etcd deletes the dead leader's key when its lease
// expires, TTL after the last renewal etcd received (0 to TTL/3 before the
// kill), noticed by etcd's check twice a second; the standby's watch, read
// and decision add a few round trips. So it lies in about
// [2/3 TTL, TTL + 0.5 s] plus those round trips.
//
// It starts etcd itself (Debian's etcd-server, as the tests do) and its
// candidates as copies of itself (--candidate), and prints one JSON object.
//
//   election_failover_bench [--kills 20] [--candidates 2] [--lease-ttl-ms 3000]
//                           [--etcd-members 1] [--floor-calls 500]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_util.h"
#include "ipc/etcd/etcd_client.h"
#include "tests/integration/process_util.h"
#include "tests/util/election_candidate.h"
#include "tests/util/etcd_server.h"

namespace nanokv {
namespace {

using namespace std::chrono_literals;
using testing::CandidateEvent;
using testing::Process;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "election_failover_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string SelfPath() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) Die("cannot read /proc/self/exe");
  path[n] = '\0';
  return path;
}

// Microseconds of `calls` round trips of `call` (a Status).
template <typename Call>
std::vector<double> RoundTrips(int calls, Call&& call) {
  std::vector<double> samples;
  for (int i = 0; i < calls; ++i) {
    double start = bench::NowMicros();
    Status status = call();
    if (!status.ok()) Die("floor call: " + status.ToString());
    samples.push_back(bench::NowMicros() - start);
  }
  return samples;
}

struct Candidate {
  std::string id;
  Process process;
  std::vector<CandidateEvent> Events() const { return testing::ParseCandidateEvents(process.Log()); }
  std::optional<CandidateEvent> LastLead() const {
    std::optional<CandidateEvent> last;
    for (const auto& event : Events()) {
      if (event.kind == "leader") last = event;
    }
    return last;
  }
  bool Registered() const { return process.Log().find("stands as candidate") != std::string::npos; }
};

int Run(int argc, char** argv) {
  bench::LogToStderr("election_failover_bench");
  CLI::App app{"Failover time of the masters' election over leader kills"};
  int kills = 20, candidates = 2, etcd_members = 1, floor_calls = 500;
  long long lease_ttl_ms = 3000;
  app.add_option("--kills", kills, "leaders to SIGKILL")->check(CLI::Range(1, 1000));
  app.add_option("--candidates", candidates, "candidate processes")->check(CLI::Range(2, 16));
  app.add_option("--lease-ttl-ms", lease_ttl_ms, "ElectionOptions::lease_ttl")->check(CLI::Range(1000, 60000));
  app.add_option("--etcd-members", etcd_members, "etcd members (1 or 3)")->check(CLI::Range(1, 5));
  app.add_option("--floor-calls", floor_calls, "round trips for the floor")->check(CLI::Range(10, 100000));
  CLI11_PARSE(app, argc, argv);

  auto cluster = testing::EtcdCluster::Start(etcd_members);
  if (!cluster.ok()) Die("etcd: " + cluster.status().ToString());
  std::vector<std::string> endpoints = (*cluster)->endpoints();

  etcd::EtcdOptions options;
  options.endpoints = endpoints;
  auto client = etcd::EtcdClient::Connect(options);
  if (!client.ok()) Die("etcd client: " + client.status().ToString());
  auto lease = (*client)->GrantLease(60s, etcd::DeadlineIn(5s));
  if (!lease.ok()) Die("lease: " + lease.status().ToString());
  std::vector<double> range_us = RoundTrips(floor_calls, [&] {
    return (*client)->Range(etcd::RangeSpec::Key("/bench/floor"), etcd::DeadlineIn(5s)).status();
  });
  std::vector<double> keepalive_us = RoundTrips(floor_calls, [&] {
    return (*client)->KeepAliveOnce(lease->id, etcd::DeadlineIn(5s)).status();
  });

  testing::TempDir dir;
  const std::string self = SelfPath();
  const std::chrono::milliseconds ttl(lease_ttl_ms);
  auto start = [&](const std::string& id) {
    std::vector<std::string> command = {self, "--candidate"};
    for (auto& arg : testing::ElectionCandidateArgs(endpoints, "/nanokv/bench/leader", id, ttl)) command.push_back(arg);
    return Process::Start(command, {}, dir.path() + "/" + id + ".log");
  };
  std::vector<Candidate> all;
  for (int i = 0; i < candidates; ++i) {
    std::string id = "m" + std::to_string(i);
    all.push_back({id, start(id)});
  }
  auto patience = 60s + 3 * ttl;  // only a broken run waits this long
  auto leader_now = [&](uint64_t above) -> Candidate* {
    for (auto& c : all) {
      auto lead = c.LastLead();
      if (lead && lead->term > above && c.process.Running()) return &c;
    }
    return nullptr;
  };
  Candidate* leader = nullptr;
  if (!testing::WaitFor([&] { return (leader = leader_now(0)) != nullptr; }, std::chrono::duration_cast<std::chrono::milliseconds>(patience))) {
    Die("no candidate became leader; first log:\n" + all[0].process.Log());
  }

  std::vector<double> failover_ms;
  for (int kill = 0; kill < kills; ++kill) {
    if (!testing::WaitFor([&] { return std::all_of(all.begin(), all.end(), [](const Candidate& c) { return c.Registered(); }); },
                          std::chrono::duration_cast<std::chrono::milliseconds>(patience))) {
      Die("a candidate did not register");
    }
    const uint64_t term = leader->LastLead()->term;
    const long long killed_at = testing::SteadyNowNanos();
    leader->process.Signal(SIGKILL);
    (void)leader->process.Wait(10s);
    Candidate* next = nullptr;
    if (!testing::WaitFor([&] { return (next = leader_now(term)) != nullptr; },
                          std::chrono::duration_cast<std::chrono::milliseconds>(patience))) {
      Die("no standby took over after kill " + std::to_string(kill));
    }
    failover_ms.push_back(static_cast<double>(next->LastLead()->at_ns - killed_at) / 1e6);
    std::fprintf(stderr, "kill %d: %s -> %s in %.0f ms (term %llu -> %llu)\n", kill, leader->id.c_str(),
                 next->id.c_str(), failover_ms.back(), static_cast<unsigned long long>(term),
                 static_cast<unsigned long long>(next->LastLead()->term));
    std::remove(leader->process.log_path().c_str());  // its old events must not count again
    leader->process = start(leader->id);
    leader = next;
  }
  for (auto& c : all) {
    c.process.Signal(SIGTERM);
    (void)c.process.Wait(10s);
  }

  bench::JsonObject json;
  json.Add("bench", "election_failover")
      .Add("kills", static_cast<long long>(kills))
      .Add("candidates", static_cast<long long>(candidates))
      .Add("etcd_members", static_cast<long long>(etcd_members))
      .Add("lease_ttl_ms", static_cast<long long>(lease_ttl_ms))
      .Add("failover_p50_ms", bench::Quantile(failover_ms, 0.5))
      .Add("failover_max_ms", *std::max_element(failover_ms.begin(), failover_ms.end()))
      .Add("failover_min_ms", *std::min_element(failover_ms.begin(), failover_ms.end()))
      .AddPercentiles("floor_range_us", range_us)
      .AddPercentiles("floor_keepalive_us", keepalive_us);
  std::printf("%s\n", json.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--candidate") == 0) {
    return nanokv::testing::RunElectionCandidate(argc - 1, argv + 1);
  }
  return nanokv::Run(argc, argv);
}
