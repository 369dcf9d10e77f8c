// kvctl, the binary, against a real kvd with real engine processes: its
// tables and JSON say what the segment says; `instances` follows the engines
// kvd runs from its YAML as they run, fail and are killed; `top` driven in
// tmux shows the tenants and their figures, and q quits it. The commands
// (limit, evict, cleanup, errors) are in kvctl_commands_test.cc.
#include <signal.h>

#include "tests/integration/kvctl_fixture.h"

namespace nanokv::testing {
namespace {

TEST_F(KvctlTest, ListAndTenantsShowWhatTheSegmentSays) {
  StartKvd(32, {"--devices", "0"});  // one pool: the figures below are one device's (two GPUs serve both)
  Process alpha = HoldingEngine("alpha", 8);
  Process beta = HoldingEngine("beta", 6, {{"NANOKV_GROUP", "g2"}, {"NANOKV_LIMIT", "16M"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 14; }, 20s)) << alpha.Log() << beta.Log();
  ExpectLedger(PageLedger{}, {"alpha", "beta"}, {{0, 14}});  // theirs, nobody else's

  Ran list = Kvctl({"list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_TRUE(list.out.starts_with("IPC ")) << list.out;
  std::string row;
  std::istringstream lines(list.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(ipc_ + " ")) row = line;
  }
  ASSERT_FALSE(row.empty()) << list.out;
  EXPECT_NE(row.find(std::to_string(kvd_.pid())), std::string::npos) << row;
  EXPECT_NE(row.find("64.0 MiB"), std::string::npos) << "capacity: " << row;
  EXPECT_NE(row.find("28.0 MiB"), std::string::npos) << "used: " << row;
  EXPECT_NE(row.find("43.8%"), std::string::npos) << row;
  EXPECT_NE(row.find("live"), std::string::npos) << row;
  EXPECT_EQ(list.out.find('\033'), std::string::npos) << "no colour off a terminal";

  Json doc = ParseJson(Kvctl({"--json", "list"}));
  const Json* kvd = FindByKey(doc["kvds"], "ipc", ipc_);
  ASSERT_NE(kvd, nullptr);
  EXPECT_EQ((*kvd)["state"].str(), "live");
  EXPECT_EQ((*kvd)["pid"].i64(), kvd_.pid());
  EXPECT_EQ((*kvd)["backend"].str(), Backend());
  EXPECT_EQ((*kvd)["capacity_bytes"].u64(), 32 * kPage);
  EXPECT_EQ((*kvd)["used_bytes"].u64(), 14 * kPage);
  EXPECT_EQ((*kvd)["tenants"].u64(), 2u);
  EXPECT_EQ((*kvd)["devices"][0]["granted_pages"].u64(), 14u);
  EXPECT_GT((*kvd)["updated_unix_ns"].u64(), 0u);

  Ran tenants = Kvctl({"tenants", ipc_});
  ASSERT_EQ(tenants.code, 0) << tenants.err;
  EXPECT_TRUE(tenants.out.starts_with("TENANT ")) << tenants.out;
  std::string alpha_row = tenants.out.substr(tenants.out.find("\nalpha"));
  alpha_row = alpha_row.substr(1, alpha_row.find('\n', 1));
  EXPECT_NE(alpha_row.find(std::to_string(alpha.pid())), std::string::npos) << alpha_row;
  EXPECT_NE(alpha_row.find("uid:" + std::to_string(geteuid())), std::string::npos) << alpha_row;
  EXPECT_NE(alpha_row.find("16.0 MiB"), std::string::npos) << alpha_row;
  EXPECT_NE(alpha_row.find("attached"), std::string::npos) << alpha_row;
  std::string beta_row = tenants.out.substr(tenants.out.find("\nbeta"));
  beta_row = beta_row.substr(1, beta_row.find('\n', 1));
  EXPECT_NE(beta_row.find("g2"), std::string::npos) << beta_row;
  EXPECT_NE(beta_row.find("12.0 MiB"), std::string::npos) << beta_row;
  EXPECT_NE(beta_row.find("75.0%"), std::string::npos) << "12 of its 16 MiB: " << beta_row;

  // The same, as JSON, figure by figure against the segment.
  doc = ParseJson(Kvctl({"tenants", ipc_, "--json"}));
  EXPECT_EQ(doc["ipc"].str(), ipc_);
  ASSERT_EQ(doc["tenants"].items.size(), 2u);
  ipc::Snapshot snapshot = Read();
  for (const std::string name : {"alpha", "beta"}) {
    const Json* tenant = FindByKey(doc["tenants"], "name", name);
    const ipc::TenantRow* segment_row = FindRow(snapshot, name);
    ASSERT_NE(tenant, nullptr) << name;
    ASSERT_NE(segment_row, nullptr) << name;
    EXPECT_EQ((*tenant)["pid"].i64(), (name == "alpha" ? alpha : beta).pid());
    EXPECT_EQ((*tenant)["used_bytes"].u64(), segment_row->used_bytes);
    EXPECT_EQ((*tenant)["limit_bytes"].u64(), segment_row->limit_bytes);
    EXPECT_EQ((*tenant)["group"].str(), name == "alpha" ? "uid:" + std::to_string(geteuid()) : "g2");
    EXPECT_EQ((*tenant)["state"].str(), "attached");
    EXPECT_EQ((*tenant)["devices"][0]["used_pages"].u64(), name == "alpha" ? 8u : 6u);
  }
  EXPECT_EQ((*FindByKey(doc["tenants"], "name", "beta"))["limit_bytes"].u64(), 8 * kPage);

  // The IPC name from the environment; devices; colour only when asked.
  Ran by_env = Kvctl({"tenants"}, {{"NANOKV_IPC_NAME", ipc_}});
  EXPECT_EQ(by_env.code, 0) << by_env.err;
  EXPECT_NE(by_env.out.find("alpha"), std::string::npos);
  Ran devices = Kvctl({"--json", "devices", ipc_});
  doc = ParseJson(devices);
  EXPECT_EQ(doc["kvds"][0]["devices"][0]["capacity_bytes"].u64(), 32 * kPage);
  Ran coloured = Kvctl({"--color", "always", "tenants", ipc_});
  EXPECT_NE(coloured.out.find("\033["), std::string::npos);
  Ran no_color = Kvctl({"tenants", ipc_}, {{"NO_COLOR", "1"}});
  EXPECT_EQ(no_color.out.find('\033'), std::string::npos);
}

// Two engines kvd runs from its YAML: `steady` holds its pages until the test
// kills it (restart: never); `crasher` waits for a file, then exits with code
// 3 holding its pages, and on-failure restarts it once before it is failed.
TEST_F(KvctlTest, InstancesShowWhatKvdsControllerPublished) {
  const std::string engine = Binary("NANOKV_ENGINE_BINARY", NANOKV_ENGINE_BINARY);
  const std::string gate = dir_.path() + "/crash-now";
  const std::string config = dir_.path() + "/kvd.yaml";
  std::ofstream(config) << "instances:\n"
                           "  - name: steady\n"
                           "    command: " << engine << "\n"
                           "    args: [--pages, '2', --step, '2', --rounds, '1', --hold-ms, '600000']\n"
                           "    restart: never\n"
                           "  - name: crasher\n"
                           "    command: /bin/sh\n"
                           "    args: [-c, 'while [ ! -e \"$0\" ]; do sleep 0.02; done;"
                           " exec \"$1\" --pages 2 --step 2 --rounds 1 --exit-holding 3', "
                        << gate << ", " << engine << "]\n"
                           "    restart: on-failure\n"
                           "    max_restarts: 1\n"
                           "    backoff: 200ms\n";
  StartKvd(32, {"--config", config});
  auto state_is = [&](const std::string& name, ipc::InstanceState state) {
    auto s = ipc::ReadSegment(ipc_);
    const ipc::InstanceRow* row = s.ok() ? FindInstance(*s, name) : nullptr;
    return row != nullptr && row->state == static_cast<uint32_t>(state);
  };
  ASSERT_TRUE(WaitFor([&] {
    return state_is("steady", ipc::InstanceState::kRunning) && state_is("crasher", ipc::InstanceState::kRunning) &&
           GrantedPages() == 2;
  }, 20s)) << kvd_.Log();
  ipc::Snapshot snapshot = Read();
  const pid_t steady_pid = FindInstance(snapshot, "steady")->pid;
  const pid_t crasher_pid = FindInstance(snapshot, "crasher")->pid;
  ASSERT_GT(steady_pid, 0);
  ASSERT_GT(crasher_pid, 0);

  // Both running.
  Ran table = Kvctl({"instances", ipc_});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_TRUE(table.out.starts_with("NAME ")) << table.out;
  EXPECT_LT(table.out.find("\nsteady "), table.out.find("\ncrasher ")) << "the YAML's order\n" << table.out;
  std::string steady = TableRow(table.out, "steady"), crasher = TableRow(table.out, "crasher");
  EXPECT_NE(steady.find(" " + std::to_string(steady_pid) + "  running "), std::string::npos) << table.out;
  EXPECT_NE(crasher.find(" " + std::to_string(crasher_pid) + "  running "), std::string::npos) << table.out;
  EXPECT_NE(steady.find(" 0  "), std::string::npos) << "no restart yet: " << steady;
  Json doc = ParseJson(Kvctl({"instances", ipc_, "--json"}));
  EXPECT_EQ(doc["ipc"].str(), ipc_);
  EXPECT_EQ(doc["state"].str(), "live");
  ASSERT_EQ(doc["instances"].items.size(), 2u) << doc["instances"].items.size();
  for (const auto& [name, pid] : {std::pair<std::string, pid_t>{"steady", steady_pid}, {"crasher", crasher_pid}}) {
    const Json* row = FindByKey(doc["instances"], "name", name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ((*row)["pid"].i64(), pid) << name;
    EXPECT_EQ((*row)["state"].str(), "running") << name;
    EXPECT_EQ((*row)["exit_code"].type, Json::Type::kNull) << name;
    EXPECT_EQ((*row)["restarts"].u64(), 0u) << name;
    EXPECT_GT((*row)["since_unix_ns"].u64(), 0u) << name;
  }
  // The IPC name from the environment, as for tenants.
  Ran by_env = Kvctl({"instances"}, {{"NANOKV_IPC_NAME", ipc_}});
  EXPECT_EQ(by_env.code, 0) << by_env.err;
  EXPECT_NE(by_env.out.find("crasher"), std::string::npos) << by_env.out;

  // crasher exits with 3, is restarted once, exits with 3 again: failed.
  // steady, killed with SIGKILL, is not restarted: exited by a signal.
  std::ofstream(gate) << "now\n";
  ASSERT_TRUE(WaitFor([&] { return state_is("crasher", ipc::InstanceState::kFailed); }, 20s)) << kvd_.Log();
  ASSERT_EQ(kill(steady_pid, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return state_is("steady", ipc::InstanceState::kExited); }, 20s)) << kvd_.Log();
  table = Kvctl({"instances", ipc_});
  ASSERT_EQ(table.code, 0) << table.err;
  steady = TableRow(table.out, "steady");
  crasher = TableRow(table.out, "crasher");
  EXPECT_NE(steady.find("  -  killed (SIGKILL)         0  "), std::string::npos) << table.out;
  EXPECT_NE(crasher.find("  -  failed (3)               1  "), std::string::npos) << table.out;
  doc = ParseJson(Kvctl({"--json", "instances", ipc_}));
  const Json* steady_json = FindByKey(doc["instances"], "name", "steady");
  const Json* crasher_json = FindByKey(doc["instances"], "name", "crasher");
  ASSERT_TRUE(steady_json != nullptr && crasher_json != nullptr) << doc["instances"].items.size();
  EXPECT_EQ((*steady_json)["state"].str(), "exited");
  EXPECT_EQ((*steady_json)["exit_code"].i64(), -SIGKILL);
  EXPECT_EQ((*steady_json)["signal"].str(), "SIGKILL");
  EXPECT_EQ((*steady_json)["restarts"].u64(), 0u);
  EXPECT_EQ((*steady_json)["pid"].i64(), 0);
  EXPECT_EQ((*crasher_json)["state"].str(), "failed");
  EXPECT_EQ((*crasher_json)["exit_code"].i64(), 3);
  EXPECT_EQ((*crasher_json)["signal"].type, Json::Type::kNull);
  EXPECT_EQ((*crasher_json)["restarts"].u64(), 1u);
  EXPECT_EQ((*crasher_json)["pid"].i64(), 0);
  ExpectLedger(PageLedger{});  // every engine's pages came back

  // watch shows them after the tenants; top --once between devices and tenants.
  Ran watch = Kvctl({"watch", ipc_, "-n", "0.2", "--count", "1"});
  ASSERT_EQ(watch.code, 0) << watch.err;
  EXPECT_LT(watch.out.find("TENANT "), watch.out.find("\nNAME ")) << watch.out;
  EXPECT_NE(TableRow(watch.out, "crasher").find("failed (3)"), std::string::npos) << watch.out;
  doc = ParseJson(Kvctl({"watch", ipc_, "--count", "1", "--json"}));
  ASSERT_EQ(doc["instances"].items.size(), 1u);
  EXPECT_EQ(doc["instances"][0]["ipc"].str(), ipc_);
  steady_json = FindByKey(doc["instances"][0]["instances"], "name", "steady");
  ASSERT_NE(steady_json, nullptr);
  EXPECT_EQ((*steady_json)["signal"].str(), "SIGKILL");
  Ran top = Kvctl({"top", ipc_, "--once"});
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_NE(top.out.find("INSTANCES (2)  1 exited, 1 failed"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("killed (SIGKILL)"), std::string::npos) << top.out;
}

TEST_F(KvctlTest, WatchAndTopOnceRefreshTheSameFigures) {
  StartKvd(32);
  Process alpha = HoldingEngine("alpha", 4);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 4; }, 20s)) << alpha.Log();
  ExpectLedger(PageLedger{}, {"alpha"}, {{0, 4}});
  Ran watch = Kvctl({"watch", ipc_, "-n", "0.2", "--count", "2", "--json"});
  ASSERT_EQ(watch.code, 0) << watch.err;
  std::istringstream lines(watch.out);
  int frames = 0;
  for (std::string line; std::getline(lines, line); ++frames) {
    auto doc = JsonParser::Parse(line);
    ASSERT_TRUE(doc) << line;
    EXPECT_GT((*doc)["time_unix_ns"].u64(), 0u);
    EXPECT_EQ((*doc)["kvds"][0]["ipc"].str(), ipc_);
    EXPECT_EQ((*doc)["tenants"][0]["tenants"][0]["used_bytes"].u64(), 4 * kPage);
  }
  EXPECT_EQ(frames, 2);
  Ran table = Kvctl({"watch", ipc_, "-n", "0.2", "--count", "2"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("Every 0.2s: kvctl watch " + ipc_), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("alpha"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("NAME "), std::string::npos) << "no instances, no instance table\n" << table.out;

  Ran top = Kvctl({"top", ipc_, "--once"});
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_NE(top.out.find("kvd '" + ipc_ + "'"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("8.00 MiB / 64.0 MiB"), std::string::npos) << top.out;
  // kvtop is kvctl top; top wants a terminal unless --once.
  Ran not_a_terminal = Kvctl({"top", ipc_});
  EXPECT_EQ(not_a_terminal.code, 2) << not_a_terminal.err;
  EXPECT_NE(not_a_terminal.err.find("terminal"), std::string::npos) << not_a_terminal.err;
}

TEST_F(KvctlTest, TopInTmuxShowsTenantsAndQuitsOnQ) {
  if (std::system("command -v tmux >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  }
  StartKvd(32, {"--devices", "0"});  // one pool: the figures below are one device's (two GPUs serve both)
  Process alpha = HoldingEngine("alpha", 8);
  Process beta = HoldingEngine("beta", 6, {{"NANOKV_GROUP", "g2"}, {"NANOKV_LIMIT", "16M"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 14; }, 20s)) << alpha.Log() << beta.Log();
  ExpectLedger(PageLedger{}, {"alpha", "beta"}, {{0, 14}});  // theirs, nobody else's

  Tmux tmux(dir_.path());
  const std::string exit_file = dir_.path() + "/top.exit";
  const std::string top = "env NANOKV_RUN_DIR=" + Quote(dir_.path()) + " " + Quote(KvctlBinary()) + " top " +
                          ipc_ + " -n 0.2; echo exit=$? > " + Quote(exit_file);
  std::map<std::string, std::string> term = {{"TERM", "xterm-256color"}};
  Ran started = Shell(tmux.Command("new-session -d -x 160 -y 40 " + Quote(top)), term);
  ASSERT_EQ(started.code, 0) << started.err;
  std::string screen;
  auto capture = [&] {
    screen = Shell(tmux.Command("capture-pane -p"), term).out;
    return screen;
  };
  ASSERT_TRUE(WaitFor([&] {
    capture();
    return screen.find("alpha") != std::string::npos && screen.find("beta") != std::string::npos;
  }, 20s)) << screen;
  EXPECT_NE(screen.find("kvd '" + ipc_ + "'"), std::string::npos) << screen;
  EXPECT_NE(screen.find("live"), std::string::npos) << screen;
  EXPECT_NE(screen.find("28.0 MiB / 64.0 MiB"), std::string::npos) << "the device bar\n" << screen;
  EXPECT_NE(screen.find("16.0 MiB / 64.0 MiB"), std::string::npos) << "alpha's bar\n" << screen;
  EXPECT_NE(screen.find("12.0 MiB / 16.0 MiB"), std::string::npos) << "beta's bar\n" << screen;
  EXPECT_NE(screen.find("75.0%"), std::string::npos) << screen;
  EXPECT_NE(screen.find("sorted by used"), std::string::npos) << screen;
  EXPECT_LT(screen.find("alpha"), screen.find("beta")) << "16 MiB before 12 MiB\n" << screen;

  // s: the next sort order (share: beta's 75% before alpha's 25%).
  ASSERT_EQ(Shell(tmux.Command("send-keys s"), term).code, 0);
  ASSERT_TRUE(WaitFor([&] { return capture().find("sorted by share") != std::string::npos; }, 10s)) << screen;
  EXPECT_LT(screen.find("beta"), screen.find("alpha")) << screen;

  // The figures follow kvd: an evict shows on the next refresh.
  ASSERT_EQ(Kvctl({"evict", ipc_, "alpha", "--bytes", "8M"}).code, 0);
  ASSERT_TRUE(WaitFor([&] { return capture().find("8.00 MiB / 64.0 MiB") != std::string::npos; }, 10s)) << screen;

  ASSERT_EQ(Shell(tmux.Command("send-keys q"), term).code, 0);
  ASSERT_TRUE(WaitFor([&] { return ReadFile(exit_file).find("exit=") != std::string::npos; }, 10s))
      << "top did not quit on q\n" << capture();
  EXPECT_EQ(ReadFile(exit_file), "exit=0\n");
}

}  // namespace
}  // namespace nanokv::testing
