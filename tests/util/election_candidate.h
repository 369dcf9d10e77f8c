// A master's election and nothing else, as a process of its own: what the
// election's tests and its failover benchmark start several of, and kill.
// It prints one line per event on stdout, flushed, with the monotonic clock
// (the same clock in every process of the machine), so the parent can order
// them against what it did:
//   EVENT candidate <id> <pid>
//   EVENT leader <term> <steady ns>
//   EVENT follower <term> <steady ns>     (stepped down from <term>)
//   EVENT stopped <steady ns>
// It runs until SIGTERM or SIGINT, then Stops the election (revoking its lease).
#ifndef NANOKV_TESTS_UTIL_ELECTION_CANDIDATE_H_
#define NANOKV_TESTS_UTIL_ELECTION_CANDIDATE_H_

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "master/election/leader_election.h"

namespace nanokv::testing {

inline long long SteadyNowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The arguments, for a parent that starts one (argv after the program).
inline std::vector<std::string> ElectionCandidateArgs(const std::vector<std::string>& endpoints,
                                                      const std::string& key, const std::string& id,
                                                      std::chrono::milliseconds lease_ttl) {
  std::string joined;
  for (const auto& endpoint : endpoints) joined += (joined.empty() ? "" : ",") + endpoint;
  return {"--endpoints", joined, "--key", key, "--id", id, "--address", id + ":7470",
          "--lease-ttl-ms", std::to_string(lease_ttl.count())};
}

inline int RunElectionCandidate(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_st("candidate"));
  CLI::App app{"One master's leader election, printing its events"};
  std::vector<std::string> endpoints;
  master::ElectionOptions options;
  long long lease_ttl_ms = 3000;
  app.add_option("--endpoints", endpoints, "etcd endpoints")->required()->delimiter(',');
  app.add_option("--key", options.election_key, "election key")->required();
  app.add_option("--id", options.candidate_id, "candidate id")->required();
  app.add_option("--address", options.address, "address to announce");
  app.add_option("--lease-ttl-ms", lease_ttl_ms, "lease TTL in ms");
  CLI11_PARSE(app, argc, argv);
  options.etcd_endpoints = endpoints;
  options.lease_ttl = std::chrono::milliseconds(lease_ttl_ms);

  // Signals are taken by sigwait below, never by a handler.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::printf("EVENT candidate %s %d\n", options.candidate_id.c_str(), static_cast<int>(getpid()));
  std::fflush(stdout);
  auto election = master::LeaderElection::Start(options, [](bool is_leader, const master::LeaderInfo& leader) {
    std::printf("EVENT %s %llu %lld\n", is_leader ? "leader" : "follower",
                static_cast<unsigned long long>(leader.term), SteadyNowNanos());
    std::fflush(stdout);
  });
  if (!election.ok()) {
    std::fprintf(stderr, "election: %s\n", election.status().ToString().c_str());
    return 2;
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  (*election)->Stop();
  std::printf("EVENT stopped %lld\n", SteadyNowNanos());
  std::fflush(stdout);
  return 0;
}

// One EVENT line of a candidate's output.
struct CandidateEvent {
  std::string kind;    // candidate, leader, follower, stopped
  uint64_t term = 0;   // leader, follower
  long long at_ns = 0; // leader, follower, stopped
};

// The EVENT lines in `output`, in order.
inline std::vector<CandidateEvent> ParseCandidateEvents(const std::string& output) {
  std::vector<CandidateEvent> events;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) break;  // a line still being written
    std::string line = output.substr(start, end - start);
    start = end + 1;
    char kind[16] = {};
    unsigned long long a = 0;
    long long b = 0;
    if (std::sscanf(line.c_str(), "EVENT %15s %llu %lld", kind, &a, &b) < 1) continue;
    CandidateEvent event{kind, 0, 0};
    if (event.kind == "leader" || event.kind == "follower") {
      event.term = a;
      event.at_ns = b;
    } else if (event.kind == "stopped") {
      event.at_ns = static_cast<long long>(a);
    }
    events.push_back(event);
  }
  return events;
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UTIL_ELECTION_CANDIDATE_H_
