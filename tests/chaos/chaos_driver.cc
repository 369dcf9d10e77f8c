// nanokv_chaos: the chaos run (docs/RELIABILITY.md). Starts a real kvd (small
// pool, temp NANOKV_RUN_DIR, --check-invariants) and N chaos engines
// (chaos_engine.cc) in G tenant groups, then, round after round: kills random
// engines with SIGKILL at random moments (after a random delay, in the middle
// of a grant, a share or a reclaim answer, right after an evict or a lowered
// limit made kvd ask for pages back) and restarts them, while evicting and
// changing limits of the others as kvctl does (kvd's operator requests). At
// the end of each round every engine holds still at a barrier and the driver
// checks kvd's segment against what the engines hold (chaos_checks.h); at the
// end every engine leaves and every page must be back.
//
// Every device kvd serves is used (host: --devices; a GPU: every GPU it
// sees), each engine keeping a tensor on each; `devices` in the JSON says so.
// Prints one JSON object; exits 0 when nothing was lost, doubled or
// corrupted and kvd never crashed, 1 otherwise, 2 on bad usage.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "ipc/segment/segment_reader.h"
#include "kvctl/json_writer.h"
#include "kvctl/operator_channel.h"
#include "nanokv/client.h"
#include "tests/chaos/chaos_checks.h"
#include "tests/chaos/chaos_files.h"
#include "tests/integration/process_util.h"

namespace nanokv::chaos {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::Process;

constexpr size_t kPage = 2u << 20;
constexpr char kProbe[] = "chaos-probe";

struct Options {
  uint64_t seed = 1;
  uint32_t kills = 100;
  int engines = 6;
  int groups = 3;
  int devices = 2;         // host backend: simulated devices
  size_t pages = 48;       // per device
  size_t slots = 16;       // per engine and device
  uint32_t max_batch = 16;
  int kills_per_round = 4;
  std::string backend = "host";
  std::string kvd = NANOKV_KVD_BINARY;
  std::string engine = NANOKV_CHAOS_ENGINE_BINARY;
  bool json = false;
  bool check_invariants = true;
  bool verbose = false;
  std::string keep_dir;    // keep logs and state here (default: a temp dir, removed)
};

enum class KillMode { kRandom, kMidGrant, kAfterReclaim, kMidReclaim, kMidShare, kCount };
const char* ModeName(KillMode m) {
  static const char* kNames[] = {"random_delay", "mid_grant", "after_reclaim_request",
                                 "mid_reclaim", "mid_share"};
  return kNames[static_cast<int>(m)];
}

struct EngineSlot {
  std::string name;
  int index = 0;
  int group = 0;
  Process process;
  uint32_t* phase = nullptr;  // the engine's phase word (chaos_files.h)
  int lives = 0;
  std::map<int, Report> reports;  // pid -> its last barrier report (counters)
};

struct Totals {
  uint64_t kills = 0, rounds = 0, restarts = 0, evicts = 0, limits = 0;
  uint64_t lost_pages = 0, double_grants = 0, pattern_failures = 0, leaks = 0;
  uint64_t accounting_errors = 0, dead_tenants = 0, engine_errors = 0, engine_exits = 0;
  uint64_t kvd_crashes = 0, invariant_breaks = 0, hangs = 0;
  uint64_t by_phase[kPhaseCount] = {};
  uint64_t by_mode[static_cast<int>(KillMode::kCount)] = {};
  DeviceUses devices;
  std::vector<std::string> notes;

  bool clean() const {
    return lost_pages == 0 && double_grants == 0 && pattern_failures == 0 && leaks == 0 &&
           accounting_errors == 0 && dead_tenants == 0 && engine_errors == 0 &&
           engine_exits == 0 && kvd_crashes == 0 && invariant_breaks == 0 && hangs == 0;
  }
  void Note(std::string line) {
    std::fprintf(stderr, "chaos: %s\n", line.c_str());
    if (notes.size() < 50) notes.push_back(std::move(line));
  }
};

class Driver {
 public:
  Driver(const Options& o, std::string dir)
      : o_(o), dir_(std::move(dir)), ipc_("chaos_" + std::to_string(getpid())), rng_(o.seed) {}
  int Run();

 private:
  uint32_t Rand(uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_); }
  void SleepUs(uint32_t us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }
  Phase PhaseOf(const EngineSlot& e) const {
    return static_cast<Phase>(std::atomic_ref<uint32_t>(*e.phase).load());
  }

  bool StartKvd();
  bool KvdAlive();
  void StartEngine(EngineSlot& e);
  // Kills one engine (and starts it again); returns the pid it killed.
  int KillOne();
  // Asks `victim` (or a random engine) for pages back, as kvctl evict or
  // kvctl limit would. True when kvd accepted the request.
  bool RequestReclaim(const EngineSlot& victim);
  bool WaitPhase(const EngineSlot& e, Phase phase, milliseconds timeout);
  bool Barrier(uint64_t epoch, const std::vector<int>& killed);
  // Waits for a segment published after every request made so far: the
  // probe sets its own limit to `fence` bytes, and kvd handles requests in
  // order, so a segment showing that limit shows everything before it.
  std::optional<ipc::Snapshot> Fence(uint64_t fence);
  void Finish();
  void CollectEngineFailures();
  void Print(double seconds);

  const Options& o_;
  std::string dir_;
  std::string ipc_;
  std::mt19937_64 rng_;
  Process kvd_;
  std::unique_ptr<Client> probe_;
  std::optional<kvctl::OperatorChannel> op_;
  std::vector<EngineSlot> engines_;
  Totals t_;
  uint64_t epoch_ = 0;
};

bool Driver::StartKvd() {
  std::vector<std::string> argv = {o_.kvd, "--backend", o_.backend, "--ipc-name", ipc_,
                                   "--capacity", std::to_string(o_.pages * kPage),
                                   "--reserve-pages", "4", "--log-level", "info"};
  if (o_.backend == "host") {
    argv.insert(argv.end(), {"--host-devices", std::to_string(o_.devices), "--host-device-memory",
                             std::to_string(2 * o_.pages * kPage)});
  }
  if (o_.check_invariants) argv.push_back("--check-invariants");
  kvd_ = Process::Start(argv, {{"NANOKV_RUN_DIR", dir_}}, dir_ + "/kvd.log");
  bool up = testing::WaitFor(
      [&] { return ipc::ReadSegment(ipc_).ok() && access((dir_ + "/" + ipc_ + ".sock").c_str(), F_OK) == 0; },
      std::chrono::seconds(30));
  if (!up) {
    t_.Note("kvd did not come up: " + kvd_.Log());
    return false;
  }
  ClientOptions probe;
  probe.ipc_name = ipc_;
  probe.tenant = kProbe;
  probe.group = "probe";
  probe.limit_bytes = kPage;
  auto client = Client::Attach(probe);
  if (!client.ok()) {
    t_.Note("probe attach: " + client.status().ToString());
    return false;
  }
  probe_ = std::move(client).value();
  if (auto s = ipc::ReadSegment(ipc_); s.ok()) CountDevices(s->segment, &t_.devices);
  return true;
}

bool Driver::KvdAlive() {
  if (kvd_.Running()) return true;
  if (t_.kvd_crashes == 0) {
    ++t_.kvd_crashes;
    auto code = kvd_.Wait(milliseconds(0));
    t_.Note("kvd died (exit " + std::to_string(code.value_or(-1)) + "); its log ends:\n" +
            kvd_.Log().substr(kvd_.Log().size() > 3000 ? kvd_.Log().size() - 3000 : 0));
  }
  return false;
}

void Driver::StartEngine(EngineSlot& e) {
  std::atomic_ref<uint32_t>(*e.phase).store(0);
  std::vector<std::string> argv = {o_.engine, "--ipc", ipc_, "--name", e.name,
                                   "--index", std::to_string(e.index),
                                   "--engines", std::to_string(o_.engines),
                                   "--groups", std::to_string(o_.groups), "--dir", dir_,
                                   "--slots", std::to_string(o_.slots),
                                   "--max-batch", std::to_string(o_.max_batch),
                                   "--seed", std::to_string(o_.seed * 1000 + uint64_t(e.index) * 37 + uint64_t(e.lives))};
  if (o_.backend == "host") argv.push_back("--check-fresh");
  e.process = Process::Start(argv, {{"NANOKV_RUN_DIR", dir_}, {"NANOKV_LOG_LEVEL", "warn"}},
                             dir_ + "/" + e.name + ".log");
  ++e.lives;
}

bool Driver::RequestReclaim(const EngineSlot& victim) {
  if (!op_) {
    auto channel = kvctl::OperatorChannel::Connect(ipc_);
    if (!channel.ok()) {
      t_.Note("operator connect: " + channel.status().ToString());
      ++t_.engine_errors;
      return false;
    }
    op_.emplace(std::move(channel).value());
  }
  wire::Message request;
  bool evict = Rand(0, 2) != 0;
  if (evict) {
    // 0 asks for all it holds; else a few pages.
    request.mutable_evict()->set_tenant(victim.name);
    request.mutable_evict()->set_bytes(Rand(0, 2) == 0 ? 0 : uint64_t{Rand(1, 6)} * kPage);
  } else {
    request.mutable_set_limit()->set_tenant(victim.name);
    request.mutable_set_limit()->set_limit_bytes(uint64_t{Rand(0, static_cast<uint32_t>(o_.slots))} * kPage);
  }
  auto reply = op_->Call(request, milliseconds(10'000));
  if (!reply.ok()) {
    // kNotFound: the victim is between lives (not attached yet).
    if (reply.status().code() == Code::kNotFound) return false;
    t_.Note(std::string(evict ? "evict" : "limit") + " of " + victim.name + ": " +
            reply.status().ToString());
    ++t_.engine_errors;
    op_.reset();
    return false;
  }
  ++(evict ? t_.evicts : t_.limits);
  return true;
}

bool Driver::WaitPhase(const EngineSlot& e, Phase phase, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (PhaseOf(e) == phase) return true;
    SleepUs(20);
  }
  return false;
}

int Driver::KillOne() {
  EngineSlot& e = engines_[Rand(0, static_cast<uint32_t>(engines_.size() - 1))];
  auto mode = static_cast<KillMode>(Rand(0, static_cast<uint32_t>(KillMode::kCount) - 1));
  // Read before the mode's wait, so the kill's moment is not moved.
  if (auto s = ipc::ReadSegment(ipc_); s.ok()) CountKill(s->segment, e.process.pid(), &t_.devices);
  switch (mode) {
    case KillMode::kRandom:
      SleepUs(Rand(0, 30'000));
      break;
    case KillMode::kMidGrant:
      if (WaitPhase(e, Phase::kGrant, milliseconds(300))) SleepUs(Rand(0, 150));
      break;
    case KillMode::kMidShare:
      if (WaitPhase(e, Phase::kShare, milliseconds(300))) SleepUs(Rand(0, 150));
      break;
    case KillMode::kAfterReclaim:
      RequestReclaim(e);
      SleepUs(Rand(0, 1000));
      break;
    case KillMode::kMidReclaim:
      if (RequestReclaim(e) && WaitPhase(e, Phase::kReclaim, milliseconds(300))) SleepUs(Rand(0, 150));
      break;
    case KillMode::kCount:
      break;
  }
  Phase at = PhaseOf(e);
  int pid = e.process.pid();
  e.process.Signal(SIGKILL);
  auto code = e.process.Wait(milliseconds(10'000));
  if (code != 128 + SIGKILL) {
    ++t_.engine_exits;
    t_.Note(e.name + " ended with " + std::to_string(code.value_or(-1)) +
            " before the kill; its log:\n" + e.process.Log());
  }
  ++t_.kills;
  ++t_.by_phase[static_cast<int>(at)];
  ++t_.by_mode[static_cast<int>(mode)];
  if (o_.verbose) std::fprintf(stderr, "chaos: kill %llu: %s (%s, phase %s)\n",
                               static_cast<unsigned long long>(t_.kills), e.name.c_str(),
                               ModeName(mode), PhaseName(at));
  if (Rand(0, 1) == 0) SleepUs(Rand(0, 5000));  // sometimes let kvd notice first
  StartEngine(e);
  ++t_.restarts;
  return pid;
}

std::optional<ipc::Snapshot> Driver::Fence(uint64_t fence) {
  auto limit = probe_->SetLimit(fence);
  if (!limit.ok()) {
    t_.Note("probe set_limit: " + limit.status().ToString());
    ++t_.engine_errors;
    return std::nullopt;
  }
  std::optional<ipc::Snapshot> out;
  testing::WaitFor(
      [&] {
        auto s = ipc::ReadSegment(ipc_);
        if (!s.ok()) return false;
        for (uint32_t i = 0; i < s->segment.header.tenant_count; ++i) {
          const ipc::TenantRow& row = s->segment.tenants[i];
          if (ipc::ReadString(row.name) == kProbe && row.limit_bytes == *limit) {
            out = *s;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(10));
  if (!out) {
    ++t_.hangs;
    t_.Note("no segment showed the probe's fence within 10 s");
  }
  return out;
}

bool Driver::Barrier(uint64_t epoch, const std::vector<int>& killed) {
  if (!WriteBarrier(dir_, {epoch, Command::kHold}).ok()) return false;
  // Every killed engine's tenant is gone from kvd (its pages came back).
  bool gone = testing::WaitFor(
      [&] {
        auto s = ipc::ReadSegment(ipc_);
        if (!s.ok()) return false;
        for (uint32_t i = 0; i < s->segment.header.tenant_count; ++i) {
          if (std::find(killed.begin(), killed.end(), s->segment.tenants[i].pid) != killed.end()) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(10));
  if (!gone) t_.Note("round " + std::to_string(epoch) + ": a killed engine is still attached after 10 s");
  // Every live engine reports for this barrier.
  std::vector<EngineView> views;
  for (EngineSlot& e : engines_) {
    std::optional<Report> report;
    bool reported = testing::WaitFor(
        [&] {
          if (!e.process.Running()) return true;
          auto r = ReadReport(StatePath(dir_, e.name));
          if (r.ok() && r->pid == e.process.pid() && r->epoch == epoch) report = *r;
          return report.has_value();
        },
        std::chrono::seconds(30));
    if (!e.process.Running()) {
      ++t_.engine_exits;
      t_.Note(e.name + " exited by itself: " + e.process.Log());
      StartEngine(e);
      ++t_.restarts;
      continue;  // checked at the next barrier
    }
    if (!reported) {
      ++t_.hangs;
      t_.Note(e.name + " (pid " + std::to_string(e.process.pid()) + ") did not reach barrier " +
              std::to_string(epoch) + " in 30 s");
      continue;
    }
    e.reports[report->pid] = *report;
    CountHeld(*report, &t_.devices);
    views.push_back({e.name, e.group, *report});
  }
  if (!KvdAlive()) return false;
  auto snapshot = Fence(epoch + 1);  // bytes: any value the limit keeps exactly
  if (!snapshot) return false;
  Findings f = CheckBarrier(snapshot->segment, views, kProbe);
  t_.lost_pages += f.lost_pages;
  t_.double_grants += f.double_grants;
  t_.pattern_failures += f.pattern_failures;
  t_.accounting_errors += f.accounting_errors;
  t_.dead_tenants += f.dead_tenants;
  for (const std::string& note : f.notes) t_.Note("round " + std::to_string(epoch) + ": " + note);
  ++t_.rounds;
  return WriteBarrier(dir_, {epoch, Command::kGo}).ok();
}

void Driver::CollectEngineFailures() {
  for (const EngineSlot& e : engines_) {
    for (const std::string& line : ReadLines(FailuresPath(dir_, e.name))) {
      if (line.find(": pattern: ") != std::string::npos) {
        ++t_.pattern_failures;
      } else if (line.find(": leak: ") != std::string::npos) {
        ++t_.leaks;
      } else {
        ++t_.engine_errors;
      }
      t_.Note(line);
    }
  }
}

void Driver::Finish() {
  // Every engine gives everything back and leaves.
  (void)WriteBarrier(dir_, {epoch_ + 1, Command::kExit});
  for (EngineSlot& e : engines_) {
    auto code = e.process.Wait(milliseconds(30'000));
    if (code != 0) {
      ++t_.engine_exits;
      t_.Note(e.name + " did not exit cleanly (" + std::to_string(code.value_or(-1)) + "): " +
              e.process.Log());
    }
  }
  if (KvdAlive()) {
    if (auto snapshot = Fence(epoch_ + 2)) {
      Findings f = CheckDrained(snapshot->segment, kProbe);
      t_.lost_pages += f.lost_pages;
      t_.accounting_errors += f.accounting_errors;
      t_.dead_tenants += f.dead_tenants;
      for (const std::string& note : f.notes) t_.Note("at the end: " + note);
    }
  }
  probe_.reset();
  op_.reset();
  if (KvdAlive()) {
    kvd_.Signal(SIGTERM);
    auto code = kvd_.Wait(milliseconds(20'000));
    if (code != 0) {
      ++t_.kvd_crashes;
      t_.Note("kvd did not stop cleanly on SIGTERM (" + std::to_string(code.value_or(-1)) + ")");
    }
  }
  std::string log = kvd_.Log();
  for (size_t at = log.find("invariant broken"); at != std::string::npos;
       at = log.find("invariant broken", at + 1)) {
    ++t_.invariant_breaks;
    t_.Note(log.substr(at, log.find('\n', at) - at));
  }
  CollectEngineFailures();
}

void Driver::Print(double seconds) {
  uint64_t steps = 0, refused = 0, forgotten = 0;
  for (const EngineSlot& e : engines_) {
    for (const auto& [pid, r] : e.reports) {
      steps += r.steps;
      refused += r.refused;
      forgotten += r.forgotten;
    }
  }
  kvctl::JsonWriter j;
  j.BeginObject()
      .Field("ok", t_.clean())
      .Field("seed", o_.seed)
      .Field("backend", o_.backend)
      .Field("engines", static_cast<int64_t>(o_.engines))
      .Field("groups", static_cast<int64_t>(o_.groups))
      .Field("pages_per_device", static_cast<uint64_t>(o_.pages))
      .Field("kills", t_.kills)
      .Field("rounds", t_.rounds)
      .Field("restarts", t_.restarts)
      .Field("evicts", t_.evicts)
      .Field("limit_changes", t_.limits)
      .Field("engine_steps", steps)
      .Field("requests_refused", refused)
      .Field("handles_released", forgotten)
      .Field("lost_pages", t_.lost_pages)
      .Field("double_grants", t_.double_grants)
      .Field("pattern_failures", t_.pattern_failures)
      .Field("cross_group_leaks", t_.leaks)
      .Field("accounting_errors", t_.accounting_errors)
      .Field("dead_tenants", t_.dead_tenants)
      .Field("engine_errors", t_.engine_errors)
      .Field("engine_exits", t_.engine_exits)
      .Field("hangs", t_.hangs)
      .Field("kvd_crashes", t_.kvd_crashes)
      .Field("invariant_breaks", t_.invariant_breaks);
  j.Key("duration").Double(seconds, 1);
  j.Key("kills_by_phase").BeginObject();
  for (int p = 0; p < kPhaseCount; ++p) j.Field(PhaseName(static_cast<Phase>(p)), t_.by_phase[p]);
  j.EndObject();
  j.Key("kills_by_mode").BeginObject();
  for (int m = 0; m < static_cast<int>(KillMode::kCount); ++m) {
    j.Field(ModeName(static_cast<KillMode>(m)), t_.by_mode[m]);
  }
  j.EndObject();
  j.Key("devices").BeginArray();
  for (const auto& [device, use] : t_.devices) {
    j.BeginObject().Field("device", static_cast<int64_t>(device)).Field("granted_page_rounds", use.granted_page_rounds)
        .Field("shared_page_rounds", use.shared_page_rounds).Field("kills_holding_pages", use.kills_holding).EndObject();
  }
  j.EndArray();
  j.Key("notes").BeginArray();
  for (const std::string& note : t_.notes) j.String(note);
  j.EndArray();
  j.EndObject();
  std::printf("%s\n", j.str().c_str());
  if (!o_.json) {
    std::fprintf(stderr, "chaos: %llu kills in %llu rounds, %.1f s: %s\n",
                 static_cast<unsigned long long>(t_.kills), static_cast<unsigned long long>(t_.rounds),
                 seconds, t_.clean() ? "nothing lost, doubled or corrupted" : "FAILED");
  }
}

int Driver::Run() {
  auto start = Clock::now();
  setenv("NANOKV_RUN_DIR", dir_.c_str(), 1);  // the probe and operator find kvd's socket here
  (void)WriteBarrier(dir_, {0, Command::kGo});
  if (StartKvd()) {
    for (int i = 0; i < o_.engines; ++i) {
      EngineSlot& e = engines_.emplace_back();
      e.index = i;
      e.group = i % o_.groups;
      e.name = "e" + std::to_string(i);
      int fd = open(PhasePath(dir_, e.name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0 || ftruncate(fd, 4096) != 0) return 2;
      void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (p == MAP_FAILED) return 2;
      e.phase = static_cast<uint32_t*>(p);
    }
    for (EngineSlot& e : engines_) StartEngine(e);
    while (t_.kills < o_.kills && KvdAlive() && t_.hangs == 0) {
      std::vector<int> killed;
      uint32_t n = std::min<uint32_t>(o_.kills - static_cast<uint32_t>(t_.kills),
                                      Rand(1, static_cast<uint32_t>(o_.kills_per_round)));
      SleepUs(Rand(0, 20'000));  // let the restarted engines get going
      for (uint32_t k = 0; k < n && KvdAlive(); ++k) {
        // Reclaims for engines that stay alive, so they answer them too.
        while (Rand(0, 1) == 0) RequestReclaim(engines_[Rand(0, static_cast<uint32_t>(engines_.size() - 1))]);
        killed.push_back(KillOne());
      }
      if (!Barrier(++epoch_, killed)) break;
    }
  }
  Finish();
  Print(std::chrono::duration<double>(Clock::now() - start).count());
  return t_.clean() ? 0 : 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"nanokv_chaos: kill engines at random under a real kvd and check that no page is "
               "lost, granted twice or corrupted (docs/RELIABILITY.md)"};
  Options o;
  app.add_option("--seed", o.seed, "random seed (the run is random, not replayable exactly: "
                                   "the seed fixes choices, not timing)");
  app.add_option("--kills", o.kills, "SIGKILLs in all")->check(CLI::Range(1u, 1'000'000u));
  app.add_option("--engines", o.engines, "engine processes")->check(CLI::Range(1, 64));
  app.add_option("--groups", o.groups, "tenant groups (engine i is in group i % groups)")->check(CLI::Range(1, 64));
  app.add_option("--devices", o.devices, "host backend: simulated devices (a GPU backend: every GPU)")->check(CLI::Range(1, 16));
  app.add_option("--pages", o.pages, "pool pages per device (2 MiB each)")->check(CLI::Range(4, 4096));
  app.add_option("--slots", o.slots, "most pages an engine holds per device")->check(CLI::Range(1, 1024));
  app.add_option("--max-batch", o.max_batch, "most pages per grant")->check(CLI::Range(1, 4096));
  app.add_option("--kills-per-round", o.kills_per_round, "most kills between two barriers")->check(CLI::Range(1, 1000));
  auto* backend_opt = app.add_option("--backend", o.backend, "kvd's backend (default: $NANOKV_TEST_BACKEND, else host)")->check(CLI::IsMember({"host", "cuda", "hip"}));
  app.add_option("--kvd", o.kvd, "the kvd binary");
  app.add_option("--engine", o.engine, "the chaos engine binary");
  app.add_option("--keep-dir", o.keep_dir, "write kvd's and the engines' logs here and keep them");
  app.add_flag("!--no-check-invariants", o.check_invariants, "do not pass --check-invariants to kvd");
  app.add_flag("--json", o.json, "print only the JSON (no summary line on stderr)");
  app.add_flag("-v,--verbose", o.verbose, "log every kill on stderr");
  CLI11_PARSE(app, argc, argv);
  if (o.groups > o.engines) {
    std::fprintf(stderr, "nanokv_chaos: --groups %d > --engines %d\n", o.groups, o.engines);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  spdlog::set_level(spdlog::level::warn);  // the probe's client: stdout is the JSON's
  if (!*backend_opt) {
    // As the integration tests: the GPU machine's run sets NANOKV_TEST_BACKEND=cuda.
    const char* env = std::getenv("NANOKV_TEST_BACKEND");
    if (env != nullptr && *env != '\0') o.backend = env;
  }
  testing::TempDir temp;
  std::string dir = temp.path();
  if (!o.keep_dir.empty()) {
    if (mkdir(o.keep_dir.c_str(), 0755) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "nanokv_chaos: cannot make %s\n", o.keep_dir.c_str());
      return 2;
    }
    dir = o.keep_dir;
  }
  Driver driver(o, dir);
  return driver.Run();
}

}  // namespace
}  // namespace nanokv::chaos

int main(int argc, char** argv) { return nanokv::chaos::Main(argc, argv); }
