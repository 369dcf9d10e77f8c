// The controller against a real kvd: instances started from the YAML, the
// restart policy (on-failure, never, always, the cap), the pages of a crashed
// engine coming back each time through kvd's own death handling, instance
// rows in the segment, SIGTERM then SIGKILL on kvd's stop with nothing left
// running, and a bad config that starts nothing.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ipc/segment/segment_reader.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;
using ipc::InstanceState;

const ipc::InstanceRow* FindInstance(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.instance_count; ++i) {
    if (ipc::ReadString(s.segment.instances[i].name) == name) return &s.segment.instances[i];
  }
  return nullptr;
}

const ipc::TenantRow* FindTenant(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
    const ipc::TenantRow& row = s.segment.tenants[i];
    if (ipc::ReadString(row.name) == name && row.state == uint32_t(ipc::TenantState::kAttached)) {
      return &row;
    }
  }
  return nullptr;
}

InstanceState StateOf(const ipc::InstanceRow& row) { return static_cast<InstanceState>(row.state); }

bool Ended(const ipc::InstanceRow* row) {
  return row != nullptr &&
         (StateOf(*row) == InstanceState::kExited || StateOf(*row) == InstanceState::kFailed);
}

// True while the process group `pgid` has a live member. Zombies do not count:
// an orphan's zombie waits for pid 1, which in a container may never reap it.
bool GroupAlive(pid_t pgid) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t paren = text.rfind(')');  // the command may hold spaces and parentheses
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') return true;
  }
  return false;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The states instance `name` went through, in order ("running -> failed"),
// from kvd's debug log. Read after kvd stopped, the last one is final: an
// instance with a restart pending at the stop ends "restarting -> exited".
std::vector<std::string> Transitions(const std::string& kvd_log, const std::string& name) {
  const std::string marker = "kvd: instance '" + name + "': ";
  std::vector<std::string> out;
  for (size_t at = kvd_log.find(marker); at != std::string::npos; at = kvd_log.find(marker, at + 1)) {
    size_t begin = at + marker.size();
    std::string change = kvd_log.substr(begin, kvd_log.find('\n', begin) - begin);
    if (change.find(" -> ") != std::string::npos) out.push_back(change);
  }
  return out;
}

class ControllerTest : public KvdFixture {
 protected:
  static std::string Engine() { return Binary("NANOKV_ENGINE_BINARY", NANOKV_ENGINE_BINARY); }

  std::string WriteConfig(const std::string& text, const std::string& file = "kvd.yaml") {
    std::string path = dir_.path() + "/" + file;
    std::ofstream(path) << text;
    return path;
  }

  void StartWithInstances(const std::string& instances, size_t pages = 32) {
    StartKvd(pages, {"--config", WriteConfig("instances:\n" + instances)});
  }

  // The instance's log file (the default: <run_dir>/<ipc>.<name>.log).
  std::string InstanceLog(const std::string& name) {
    return ReadFile(dir_.path() + "/" + ipc_ + "." + name + ".log");
  }

  // Waits until `name`'s row satisfies `done`; the last row seen.
  ipc::InstanceRow WaitRow(const std::string& name, const std::function<bool(const ipc::InstanceRow&)>& done,
                           std::chrono::milliseconds timeout = 30s) {
    ipc::InstanceRow last{};
    bool ok = WaitFor([&] {
      auto s = ipc::ReadSegment(ipc_);
      if (!s.ok()) return false;
      const ipc::InstanceRow* row = FindInstance(*s, name);
      if (row == nullptr) return false;
      last = *row;
      return done(*row);
    }, timeout);
    EXPECT_TRUE(ok) << "instance '" << name << "' never reached the state waited for (state "
                    << last.state << ", restarts " << last.restarts << ")\n" << InstanceLog(name);
    return last;
  }
};

// An engine that exits with code 3 while it holds 4 pages: on-failure restarts
// it, max_restarts 2 caps it at three lives, and after each death kvd's count
// of granted pages goes back to 0 before the next life takes its pages.
TEST_F(ControllerTest, CrashingInstanceRestartsAndItsPagesComeBackEachTime) {
  StartWithInstances("  - name: crasher\n"
                     "    command: " + Engine() + "\n"
                     "    args: [--pages, '4', --step, '4', --rounds, '1', --hold-ms, '400',"
                     " --exit-holding, '3']\n"
                     "    restart: on-failure\n"
                     "    max_restarts: 2\n"
                     "    backoff: 200ms\n");
  std::set<pid_t> pids;
  std::set<uint32_t> lives_holding;  // restarts value of each life seen holding its 4 pages
  std::set<uint32_t> lives_returned;  // ... and seen with every page back after its death
  ipc::InstanceRow last{};
  bool done = WaitFor([&] {
    auto s = ipc::ReadSegment(ipc_);
    if (!s.ok()) return false;
    ExpectCountsExact(*s);
    const ipc::InstanceRow* row = FindInstance(*s, "crasher");
    if (row == nullptr) return false;
    last = *row;
    // The ledger: while a life holds its pages, crasher is the one tenant
    // listed and its 4 pages are every page granted; once it is dead, kvd
    // lists nobody and counts no page granted.
    const bool holding = PageLedger{}.Diff(*s, {"crasher"}, {{0, 4}}).empty();
    const bool nothing_held = PageLedger{}.Diff(*s).empty();
    if (StateOf(*row) == InstanceState::kRunning) {
      pids.insert(row->pid);
      const ipc::TenantRow* tenant = FindTenant(*s, "crasher");
      if (holding && tenant != nullptr && tenant->pid == row->pid) lives_holding.insert(row->restarts);
    } else if (nothing_held) {
      // Dead: kRestarting counts the restart to come, kFailed does not.
      uint32_t life = StateOf(*row) == InstanceState::kRestarting ? row->restarts - 1 : row->restarts;
      if (StateOf(*row) != InstanceState::kStarting) lives_returned.insert(life);
    }
    return StateOf(*row) == InstanceState::kFailed && lives_returned.count(row->restarts) == 1;
  }, 30s);
  ASSERT_TRUE(done) << "state " << last.state << " restarts " << last.restarts << "\n"
                    << InstanceLog("crasher");

  EXPECT_EQ(last.restarts, 2u);
  EXPECT_EQ(last.exit_code, 3);
  EXPECT_EQ(last.pid, 0);
  EXPECT_EQ(pids.size(), 3u) << "three lives, three processes";
  EXPECT_EQ(lives_holding, (std::set<uint32_t>{0, 1, 2})) << "each life held its pages";
  EXPECT_EQ(lives_returned, (std::set<uint32_t>{0, 1, 2})) << "each death gave every page back";

  std::string log = InstanceLog("crasher");
  EXPECT_EQ(Count(log, "=== nanokv: "), 6u) << log;  // a start line and an end line per life
  EXPECT_EQ(Count(log, "exiting with code 3 while holding 4 pages"), 3u) << log;
  EXPECT_NE(log.find("given up after 2 restarts in a row"), std::string::npos) << log;

  const ipc::Snapshot snap = Read();  // FindInstance points into it: keep it alive
  const ipc::InstanceRow* row = FindInstance(snap, "crasher");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(StateOf(*row), InstanceState::kFailed);
  EXPECT_EQ(row->restarts, 2u);
  ExpectLedger(PageLedger{});

  // Failed stays failed, to kvd's end: after the stop, kvd's own record of
  // crasher's states still ends at failed (a restart pending at the stop
  // would end "restarting -> exited"), and the log holds no fourth life.
  StopKvd();
  std::vector<std::string> changes = Transitions(kvd_.Log(), "crasher");
  ASSERT_FALSE(changes.empty()) << kvd_.Log();
  EXPECT_EQ(changes.back(), "running -> failed") << kvd_.Log();
  EXPECT_EQ(Count(InstanceLog("crasher"), "=== nanokv: "), 6u) << InstanceLog("crasher");
}

// never does not restart; on-failure does not restart a clean exit; always
// restarts even a clean exit, up to its cap; a death by signal is a failure
// with exit code -signal.
TEST_F(ControllerTest, RestartPolicies) {
  StartWithInstances("  - {name: never, command: /bin/sh, args: [-c, 'exit 3'], restart: never, backoff: 50ms}\n"
                     "  - {name: clean, command: /bin/sh, args: [-c, 'exit 0'], restart: on-failure, backoff: 50ms}\n"
                     "  - {name: always, command: /bin/sh, args: [-c, 'exit 0'], restart: always,"
                     " max_restarts: 2, backoff: 50ms}\n"
                     "  - {name: killed, command: /bin/sh, args: [-c, 'kill -KILL $$'], max_restarts: 1,"
                     " backoff: 50ms}\n");
  for (const char* name : {"never", "clean", "always", "killed"}) {
    WaitRow(name, [](auto& r) { return Ended(&r); });
  }
  ipc::Snapshot s = Read();
  EXPECT_EQ(s.segment.header.instance_count, 4u);
  // No restart comes later: after kvd's stop each instance's last state
  // change is still the one that ended it (a restart pending at the stop
  // would end "restarting -> exited"), and its log holds no later start.
  StopKvd();
  const std::string kvd_log = kvd_.Log();
  auto expect = [&](const std::string& name, InstanceState state, int exit_code, uint32_t restarts,
                    size_t starts) {
    const ipc::InstanceRow* row = FindInstance(s, name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(StateOf(*row), state) << name;
    EXPECT_EQ(row->exit_code, exit_code) << name;
    EXPECT_EQ(row->restarts, restarts) << name;
    EXPECT_EQ(row->pid, 0) << name;
    EXPECT_GT(row->since_unix_ns, 0u) << name;
    EXPECT_EQ(Count(InstanceLog(name), ": starting '"), starts) << name << ":\n" << InstanceLog(name);
    std::vector<std::string> changes = Transitions(kvd_log, name);
    ASSERT_FALSE(changes.empty()) << name << ":\n" << kvd_log;
    EXPECT_EQ(changes.back(), state == InstanceState::kFailed ? "running -> failed" : "running -> exited")
        << name << ":\n" << kvd_log;
  };
  expect("never", InstanceState::kExited, 3, 0, 1);
  expect("clean", InstanceState::kExited, 0, 0, 1);
  expect("always", InstanceState::kFailed, 0, 2, 3);
  expect("killed", InstanceState::kFailed, -SIGKILL, 1, 2);
}

// On SIGTERM kvd stops its instances first: SIGTERM to each process group,
// SIGKILL after the grace to one that ignores it (and to its children), an
// instance still waiting its start delay never starts, and nothing is left
// running. The engine got its limit and group from the YAML. Told by the
// order of what each instance's log says, not by how long the stop took.
TEST_F(ControllerTest, KvdStopTermsThenKillsAndLeavesNothingRunning) {
  StartWithInstances("  - name: engine\n"
                     "    command: " + Engine() + "\n"
                     "    args: [--pages, '4', --step, '4', --rounds, '1', --hold-ms, '600000']\n"
                     "    limit: 16MiB\n"
                     "    group: team-x\n"
                     "    grace: 10s\n"
                     "  - name: stubborn\n"
                     "    command: /bin/sh\n"
                     "    args: [-c, \"trap 'echo stubborn: ignoring SIGTERM' TERM; echo stubborn: trap set;"
                     " while :; do sleep 0.05; done\"]\n"
                     "    grace: 3s\n"
                     "  - name: late\n"
                     "    command: /bin/sh\n"
                     "    args: [-c, 'sleep 60']\n"
                     "    start_delay: 1m\n");
  ipc::InstanceRow late = WaitRow("late", [](auto&) { return true; });
  EXPECT_EQ(StateOf(late), InstanceState::kStarting);
  EXPECT_EQ(late.pid, 0);
  ipc::InstanceRow engine = WaitRow("engine", [](auto& r) { return StateOf(r) == InstanceState::kRunning; });
  ipc::InstanceRow stubborn = WaitRow("stubborn", [](auto& r) { return StateOf(r) == InstanceState::kRunning; });
  ASSERT_GT(engine.pid, 0);
  ASSERT_GT(stubborn.pid, 0);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 4; }, 20s)) << InstanceLog("engine");
  ExpectLedger(PageLedger{}, {"engine"}, {{0, 4}});  // the engine's 4 pages, nobody else's
  // Running is not enough: a SIGTERM before its trap is set would end it.
  auto trap_set = [&] { return InstanceLog("stubborn").find("\nstubborn: trap set") != std::string::npos; };
  ASSERT_TRUE(WaitFor(trap_set, 20s)) << InstanceLog("stubborn");
  ipc::Snapshot s = Read();
  const ipc::TenantRow* tenant = FindTenant(s, "engine");
  ASSERT_NE(tenant, nullptr);
  EXPECT_EQ(tenant->pid, engine.pid);
  EXPECT_EQ(ipc::ReadString(tenant->group), "team-x");
  EXPECT_EQ(tenant->limit_bytes, 16u << 20);
  EXPECT_TRUE(GroupAlive(engine.pid));
  EXPECT_TRUE(GroupAlive(stubborn.pid));

  StopKvd();
  EXPECT_FALSE(GroupAlive(engine.pid)) << "the engine is still running";
  EXPECT_FALSE(GroupAlive(stubborn.pid)) << "stubborn or one of its children is still running";

  // The engine ends on SIGTERM: nobody waits its grace.
  std::string engine_log = InstanceLog("engine");
  EXPECT_NE(engine_log.find("kvd is stopping: SIGTERM"), std::string::npos) << engine_log;
  EXPECT_NE(engine_log.find("was killed by signal 15"), std::string::npos) << engine_log;
  EXPECT_EQ(engine_log.find("after SIGTERM: SIGKILL"), std::string::npos) << engine_log;
  // stubborn outlives SIGTERM (it says so itself) until kvd's SIGKILL: kvd
  // waited its grace instead of killing at once.
  std::string stubborn_log = InstanceLog("stubborn");
  size_t term = stubborn_log.find("kvd is stopping: SIGTERM");
  size_t ignored = stubborn_log.find("\nstubborn: ignoring SIGTERM");  // its output, not its command line
  size_t kill = stubborn_log.find("after SIGTERM: SIGKILL");
  size_t killed = stubborn_log.find("was killed by signal 9");
  ASSERT_NE(term, std::string::npos) << stubborn_log;
  ASSERT_NE(ignored, std::string::npos) << stubborn_log;
  ASSERT_NE(kill, std::string::npos) << stubborn_log;
  ASSERT_NE(killed, std::string::npos) << stubborn_log;
  EXPECT_LT(term, ignored) << stubborn_log;
  EXPECT_LT(ignored, kill) << stubborn_log;
  EXPECT_LT(kill, killed) << stubborn_log;
  EXPECT_EQ(InstanceLog("late"), "") << "an instance waiting its start delay never starts";
  std::string kvd_log = kvd_.Log();
  size_t controller_done = kvd_log.find("controller: every instance stopped");
  size_t server_done = kvd_log.find("stopped cleanly");
  ASSERT_NE(controller_done, std::string::npos) << kvd_log;
  EXPECT_LT(controller_done, server_done) << "the instances stop before the server";
}

// A config with one good instance and one bad: kvd exits non-zero naming the
// file, line and key, and the good instance never ran.
TEST_F(ControllerTest, BadConfigStartsNothing) {
  const std::string marker = dir_.path() + "/good-ran";
  const std::string good = "  - name: good\n    command: /bin/sh\n    args: [-c, 'touch " + marker + "']\n";
  struct Case {
    std::string instances;
    std::string expect;  // after "<file>:"
  } cases[] = {
      {good + "  - name: bad\n    command: /bin/sh\n    colour: blue\n", "8: instances[1].colour: unknown key"},
      {good + "  - name: bad\n    command: /bin/sh\n    max_restarts: [1]\n",
       "8: instances[1].max_restarts: expected a single value"},
      {good + "  - name: bad\n    args: [x]\n", "6: instances[1].command: missing"},
      {good + "  - name: good\n    command: /bin/sh\n", "6: instances[1].name: 'good' is already the name of instances[0]"},
      {good + "  - name: bad\n    command: no-such-engine-4711\n", "7: instances[1].command: 'no-such-engine-4711' is not found on PATH"},
  };
  int n = 0;
  for (const auto& c : cases) {
    std::string file = "bad" + std::to_string(n++) + ".yaml";
    std::string path = WriteConfig("log_level: debug\ninstances:\n" + c.instances, file);
    Process kvd = Process::Start({Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(),
                                  "--ipc-name", ipc_, "--config", path},
                                 {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/" + file + ".log");
    auto code = kvd.Wait(20s);
    ASSERT_TRUE(code.has_value()) << "kvd kept running on " << file;
    EXPECT_NE(*code, 0);
    EXPECT_NE(kvd.Log().find(path + ":" + c.expect), std::string::npos)
        << "expected '" << path << ":" << c.expect << "' in:\n" << kvd.Log();
    EXPECT_FALSE(ipc::ReadSegment(ipc_).ok()) << "a segment was created";
    EXPECT_NE(access(SocketPath().c_str(), F_OK), 0) << "a socket was bound";
  }
  // kvd writes an instance's start line before it spawns it, and every kvd
  // here has exited: no start line means the good instance never ran.
  const std::string good_log = dir_.path() + "/" + ipc_ + ".good.log";
  EXPECT_NE(access(good_log.c_str(), F_OK), 0) << "the good instance was started:\n" << ReadFile(good_log);
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the good instance ran";
}

}  // namespace
}  // namespace nanokv::testing
