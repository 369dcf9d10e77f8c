// The masters' election against a real etcd: one leader of several, a
// higher term at each change of leader, a standby leading after the leader
// resigns or is SIGKILLed, and a leader stepping down when etcd hangs
// (SIGSTOP) with nobody claiming leadership until etcd answers again. A
// sampler watches IsLeader() of every in-process candidate throughout: two
// at once is split brain. Assertions are on the order of events, never on
// how long they took (the failover time is printed, and measured in
// bench/election_failover_bench.cc).
#include "master/election/leader_election.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "tests/integration/process_util.h"
#include "tests/util/election_candidate.h"
#include "tests/util/etcd_server.h"
#include "tests/util/status_matchers.h"

namespace nanokv::master {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;
using testing::EtcdServer;
using testing::WaitFor;

// Only a stuck test waits this long.
constexpr auto kPatience = 60s;
constexpr auto kTtl = 1000ms;  // etcd's smallest lease with the test settings
// Where no lease has to lapse: long enough that a loaded machine (TSan, other
// builds) does not make a leader miss its renewals and step down.
constexpr auto kStableTtl = 3000ms;

// What happened, in one order across candidates and the test's own steps.
class Timeline {
 public:
  void Add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(std::move(what));
  }
  std::vector<std::string> entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }
  // Entries after the first `marker`, up to the next `until` (or the end).
  std::vector<std::string> Between(const std::string& marker, const std::string& until) const {
    std::vector<std::string> all = entries(), out;
    auto from = std::find(all.begin(), all.end(), marker);
    for (auto it = from == all.end() ? all.end() : from + 1; it != all.end() && *it != until; ++it) out.push_back(*it);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> entries_;
};

// An in-process candidate with its own etcd client, recording its events.
struct Candidate {
  std::string id;
  std::unique_ptr<LeaderElection> election;
  std::atomic<int> became_leader{0};
  std::atomic<int> stepped_down{0};
  std::atomic<uint64_t> last_term{0};
};

class LeaderElectionTest : public ::testing::Test {
 protected:
  // The candidates resign before etcd goes (members below are destroyed
  // after TearDown).
  void TearDown() override {
    sampling_ = false;
    if (sampler_.joinable()) sampler_.join();
    EXPECT_EQ(overlaps_.load(), 0) << "two candidates claimed leadership at once";
    for (auto& candidate : candidates_) Retire(*candidate);
  }

  // Stops a candidate (it resigns) and drops it; the sampler skips it after.
  void Retire(Candidate& candidate) {
    if (candidate.election) candidate.election->Stop();
    std::lock_guard<std::mutex> lock(candidates_mu_);
    candidate.election.reset();
  }

  // A single etcd member for the test; false (and a failure) if it did not start.
  bool StartEtcd() {
    auto started = EtcdServer::Start();
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (started.ok()) etcd_ = std::move(started).value();
    return etcd_ != nullptr;
  }

  Candidate& Add(const std::vector<std::string>& endpoints, const std::string& id,
                 std::chrono::milliseconds ttl = kTtl) {
    auto candidate = std::make_unique<Candidate>();
    candidate->id = id;
    Candidate* c = candidate.get();
    ElectionOptions options;
    options.etcd_endpoints = endpoints;
    options.election_key = "/nanokv/test/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    options.candidate_id = id;
    options.address = id + ":7470";
    options.lease_ttl = ttl;
    auto started = LeaderElection::Start(options, [this, c](bool is_leader, const LeaderInfo& leader) {
      EXPECT_EQ(leader.id, c->id);
      EXPECT_GT(leader.term, 0u);
      (is_leader ? c->became_leader : c->stepped_down)++;
      c->last_term = leader.term;
      timeline_.Add(c->id + (is_leader ? " leads " : " steps down ") + std::to_string(leader.term));
    });
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    std::lock_guard<std::mutex> lock(candidates_mu_);  // the sampler reads them
    if (started.ok()) c->election = std::move(started).value();
    candidates_.push_back(std::move(candidate));
    return *c;
  }

  // Samples every candidate's IsLeader() until TearDown.
  void StartSampler() {
    sampling_ = true;
    sampler_ = std::thread([this] {
      while (sampling_) {
        int leaders = 0;
        {
          std::lock_guard<std::mutex> lock(candidates_mu_);
          for (auto& candidate : candidates_) leaders += candidate->election && candidate->election->IsLeader();
        }
        if (leaders > 1) overlaps_++;
        std::this_thread::sleep_for(1ms);
      }
    });
  }

  // The one candidate that leads, once exactly one does and every running
  // candidate sees it as leader; nullptr if that never happens.
  Candidate* AgreedLeader() {
    Candidate* leader = nullptr;
    bool agreed = WaitFor(
        [&] {
          leader = nullptr;
          int count = 0;
          for (auto& c : candidates_) {
            if (c->election && c->election->IsLeader()) {
              leader = c.get();
              ++count;
            }
          }
          if (count != 1) return false;
          for (auto& c : candidates_) {
            if (!c->election) continue;
            auto seen = c->election->Leader();
            if (!seen || seen->id != leader->id || seen->term != leader->election->term()) return false;
          }
          return true;
        },
        kPatience);
    return agreed ? leader : nullptr;
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<EtcdCluster> cluster_;
  // Changed by the test's thread only, under candidates_mu_ (the sampler
  // reads them under it); the test's thread reads them without it.
  std::mutex candidates_mu_;
  std::vector<std::unique_ptr<Candidate>> candidates_;
  Timeline timeline_;
  std::thread sampler_;
  std::atomic<bool> sampling_{false};
  std::atomic<int> overlaps_{0};
};

TEST_F(LeaderElectionTest, OneLeaderOfThree) {
  ASSERT_TRUE(StartEtcd());
  StartSampler();
  for (const char* id : {"m1", "m2", "m3"}) Add({etcd_->endpoint()}, id, kStableTtl);
  Candidate* leader = AgreedLeader();
  ASSERT_NE(leader, nullptr);
  // IsLeader() turns true just before on_change runs (the master checks its
  // own led term for that window), so the callback is awaited, not assumed.
  EXPECT_TRUE(WaitFor([&] { return leader->last_term.load() == leader->election->term(); }, kPatience));
  EXPECT_EQ(leader->became_leader.load(), 1);
  for (auto& c : candidates_) {
    if (c.get() == leader) continue;
    EXPECT_EQ(c->election->term(), 0u);
    EXPECT_EQ(c->became_leader.load(), 0);
    EXPECT_EQ(c->election->Leader()->address, leader->id + ":7470");
  }
}

TEST_F(LeaderElectionTest, TheLeadersStopElectsAnotherWithAHigherTerm) {
  ASSERT_TRUE(StartEtcd());
  StartSampler();
  Add({etcd_->endpoint()}, "m1", kStableTtl);
  Add({etcd_->endpoint()}, "m2", kStableTtl);
  Candidate* first = AgreedLeader();
  ASSERT_NE(first, nullptr);
  const uint64_t first_term = first->election->term();
  const int steps_before = first->stepped_down.load();

  timeline_.Add("stop");
  first->election->Stop();
  EXPECT_FALSE(first->election->IsLeader());
  EXPECT_EQ(first->stepped_down.load(), steps_before + 1);  // on_change(false) before Stop returned
  Retire(*first);
  Candidate* second = AgreedLeader();
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second, first);
  EXPECT_GT(second->election->term(), first_term);
  // The order: the first stepped down, then the second led.
  auto after = timeline_.Between("stop", "");
  auto stepped = std::find(after.begin(), after.end(), first->id + " steps down " + std::to_string(first_term));
  auto led = std::find(after.begin(), after.end(), second->id + " leads " + std::to_string(second->election->term()));
  ASSERT_NE(stepped, after.end());
  ASSERT_NE(led, after.end());
  EXPECT_LT(stepped - after.begin(), led - after.begin());
}

TEST_F(LeaderElectionTest, OptionsAreChecked) {
  auto code = [](ElectionOptions options) { return LeaderElection::Start(options, nullptr).status().code(); };
  ElectionOptions good;
  good.etcd_endpoints = {"127.0.0.1:1"};
  good.candidate_id = "m1";
  ElectionOptions o = good;
  o.candidate_id = "";
  EXPECT_EQ(code(o), Code::kInvalidArgument);
  o = good;
  o.election_key = "/nanokv/c/leader/";
  EXPECT_EQ(code(o), Code::kInvalidArgument);
  o = good;
  o.lease_ttl = 500ms;
  EXPECT_EQ(code(o), Code::kInvalidArgument);
  o = good;
  o.etcd_endpoints = {};
  EXPECT_EQ(code(o), Code::kInvalidArgument);
  // etcd not up yet is no error: the election waits for it.
  auto waiting = LeaderElection::Start(good, nullptr);
  ASSERT_OK(waiting.status());
  EXPECT_FALSE((*waiting)->IsLeader());
  EXPECT_FALSE((*waiting)->Leader().has_value());
  (*waiting)->Stop();
}

// etcd hangs: the leader steps down within its lease, nobody leads while etcd
// is stopped, and after SIGCONT one leads again with a higher term.
TEST_F(LeaderElectionTest, AHungEtcdDeposesTheLeaderAndNobodyLeadsUntilItAnswers) {
  ASSERT_TRUE(StartEtcd());
  StartSampler();
  Add({etcd_->endpoint()}, "m1");
  Add({etcd_->endpoint()}, "m2");
  Candidate* leader = AgreedLeader();
  ASSERT_NE(leader, nullptr);
  const uint64_t old_term = leader->election->term();
  const int steps_before = leader->stepped_down.load();
  Candidate* standby = candidates_[0].get() == leader ? candidates_[1].get() : candidates_[0].get();

  timeline_.Add("pause");
  etcd_->Pause();
  // Both notice: the leader steps down, the standby stops vouching for it.
  ASSERT_TRUE(WaitFor([&] { return leader->stepped_down.load() == steps_before + 1; }, kPatience));
  ASSERT_TRUE(WaitFor([&] { return !standby->election->Leader().has_value(); }, kPatience));
  EXPECT_FALSE(leader->election->IsLeader());
  EXPECT_FALSE(standby->election->IsLeader());
  timeline_.Add("resume");
  etcd_->Resume();

  Candidate* next = AgreedLeader();
  ASSERT_NE(next, nullptr);
  EXPECT_GT(next->election->term(), old_term);
  std::vector<std::string> paused = timeline_.Between("pause", "resume");
  ASSERT_EQ(paused.size(), 1u) << "only the step-down while etcd was stopped";
  EXPECT_EQ(paused[0], leader->id + " steps down " + std::to_string(old_term));
}

// Three etcd members: the election goes on when one is killed, terms still
// rise across a change of leader, and the member rejoins.
TEST_F(LeaderElectionTest, SurvivesTheLossAndReturnOfOneEtcdMember) {
  auto cluster = EtcdCluster::Start(3);
  ASSERT_OK(cluster.status());
  cluster_ = std::move(cluster).value();
  StartSampler();
  Add(cluster_->endpoints(), "m1", kStableTtl);
  Add(cluster_->endpoints(), "m2", kStableTtl);
  Candidate* leader = AgreedLeader();
  ASSERT_NE(leader, nullptr);
  const uint64_t first_term = leader->election->term();

  cluster_->member(0).Kill();
  // A leader that lost its lease meanwhile comes back with a higher term.
  Candidate* after_kill = AgreedLeader();
  ASSERT_NE(after_kill, nullptr);
  EXPECT_GE(after_kill->election->term(), first_term);
  const uint64_t kill_term = after_kill->election->term();

  Retire(*after_kill);
  Candidate* successor = AgreedLeader();
  ASSERT_NE(successor, nullptr);
  EXPECT_GT(successor->election->term(), kill_term);

  ASSERT_OK(cluster_->member(0).Restart());
  Add(cluster_->endpoints(), "m3", kStableTtl);
  Candidate* last = AgreedLeader();
  ASSERT_NE(last, nullptr);
  EXPECT_GE(last->election->term(), successor->election->term());
}

// The leader's process is SIGKILLed: no resignation, its lease lapses at
// etcd and a standby process takes over with a higher term, only after the
// kill. Prints how long the standby took.
TEST(LeaderElectionProcessTest, AKilledLeaderIsReplaced) {
  auto etcd = EtcdServer::Start();
  ASSERT_OK(etcd.status());
  testing::TempDir dir;
  auto start = [&](const std::string& id) {
    std::vector<std::string> argv = {NANOKV_ELECTION_CANDIDATE};
    for (auto& arg : testing::ElectionCandidateArgs({(*etcd)->endpoint()}, "/nanokv/test/killed", id, kTtl)) {
      argv.push_back(arg);
    }
    return testing::Process::Start(argv, {}, dir.path() + "/" + id + ".log");
  };
  auto led = [](testing::Process& p) -> std::optional<testing::CandidateEvent> {
    for (auto& event : testing::ParseCandidateEvents(p.Log())) {
      if (event.kind == "leader") return event;
    }
    return std::nullopt;
  };
  testing::Process first = start("m1");
  ASSERT_TRUE(WaitFor([&] { return led(first).has_value(); }, kPatience)) << first.Log();
  testing::Process second = start("m2");
  ASSERT_TRUE(WaitFor([&] { return second.Log().find("stands as candidate") != std::string::npos; }, kPatience))
      << second.Log();

  const long long killed_at = testing::SteadyNowNanos();
  first.Signal(SIGKILL);
  ASSERT_TRUE(first.Wait(kPatience).has_value());
  ASSERT_TRUE(WaitFor([&] { return led(second).has_value(); }, kPatience)) << second.Log();
  auto took_over = *led(second);
  EXPECT_GT(took_over.at_ns, killed_at);
  EXPECT_GT(took_over.term, led(first)->term);
  std::printf("failover after SIGKILL: %.0f ms (lease_ttl %lld ms)\n", (took_over.at_ns - killed_at) / 1e6,
              static_cast<long long>(kTtl.count()));

  second.Signal(SIGTERM);  // resigns: prints its step-down, then stopped
  ASSERT_EQ(second.Wait(kPatience), 0);
  auto events = testing::ParseCandidateEvents(second.Log());
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[events.size() - 2].kind, "follower");
  EXPECT_EQ(events.back().kind, "stopped");
}

}  // namespace
}  // namespace nanokv::master
