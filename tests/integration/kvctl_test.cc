// kvctl, the binary, against a real kvd with real engine processes: its
// tables and JSON say what the segment says; `instances` follows the engines
// kvd runs from its YAML as they run, fail and are killed; `limit` and `evict`
// change what engines hold; `cleanup` removes what a kvd killed with SIGKILL
// left; `top` driven in tmux shows the tenants and their figures, and q quits it.
//
// /dev/shm is shared by everything on the machine (other tests' kvds too), so
// these tests find their own kvd by name and never assume it is the only one,
// and clean up only what they name.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/naming.h"
#include "ipc/uds/channel.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/unit/kvctl/mini_json.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

struct Ran {
  int code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool Exists(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0;
}

const ipc::TenantRow* FindRow(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
    if (ipc::ReadString(s.segment.tenants[i].name) == name) return &s.segment.tenants[i];
  }
  return nullptr;
}

const ipc::InstanceRow* FindInstance(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.instance_count; ++i) {
    if (ipc::ReadString(s.segment.instances[i].name) == name) return &s.segment.instances[i];
  }
  return nullptr;
}

// The line of a table that starts with `name` and a blank, or "".
std::string TableRow(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(name + " ")) return line;
  }
  return "";
}

const Json* FindByKey(const Json& array, const std::string& key, const std::string& value) {
  for (const Json& item : array.items) {
    if (item[key].str() == value) return &item;
  }
  return nullptr;
}

class KvctlTest : public KvdFixture {
 protected:
  static std::string KvctlBinary() { return Binary("NANOKV_KVCTL_BINARY", NANOKV_KVCTL_BINARY); }

  // Runs a shell command line with the test's run directory and no IPC name
  // or colour settings from outside; stdout and stderr apart.
  Ran Shell(const std::string& command, std::map<std::string, std::string> env = {}) {
    static int counter = 0;
    const std::string base = dir_.path() + "/run" + std::to_string(counter++);
    env.emplace("NANOKV_RUN_DIR", dir_.path());
    env.emplace("NANOKV_IPC_NAME", "");  // "" unsets
    env.emplace("KVCACHED_IPC_NAME", "");
    env.emplace("NO_COLOR", "");
    Process p = Process::Start({"/bin/sh", "-c", command + " >" + Quote(base + ".out") + " 2>" + Quote(base + ".err")},
                               env, base + ".log");
    Ran run;
    auto code = p.Wait(60s);
    run.code = code.value_or(-1);
    run.out = ReadFile(base + ".out");
    run.err = ReadFile(base + ".err");
    return run;
  }

  Ran Kvctl(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    std::string command = "exec " + Quote(KvctlBinary());
    for (const std::string& arg : args) command += " " + Quote(arg);
    return Shell(command, std::move(env));
  }

  static Json ParseJson(const Ran& run) {
    auto doc = JsonParser::Parse(run.out);
    EXPECT_TRUE(doc.has_value()) << "not JSON: " << run.out << run.err;
    return doc.value_or(Json{});
  }

  // An engine that takes `pages` pages of device 0 and holds them (answering
  // reclaim notices) for a minute.
  Process HoldingEngine(const std::string& name, int pages, std::map<std::string, std::string> env = {}) {
    return StartEngine(name, {"--pages", std::to_string(pages), "--step", std::to_string(pages), "--rounds",
                              "1", "--hold-ms", "60000"},
                       std::move(env));
  }

  uint64_t TenantUsed(const std::string& name) {
    const ipc::Snapshot snap = Read();  // FindRow points into it: keep it alive
    const ipc::TenantRow* row = FindRow(snap, name);
    return row != nullptr ? row->used_bytes : 0;
  }

  // A second kvd of this test, beside the fixture's, in the same run directory.
  Process StartSecondKvd(const std::string& ipc) {
    Process kvd = Process::Start({Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(), "--ipc-name",
                                  ipc, "--capacity", std::to_string(8 * kPage), "--host-device-memory",
                                  std::to_string(32 * kPage), "--reserve-pages", "2"},
                                 {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/" + ipc + ".log");
    EXPECT_TRUE(WaitFor([&] { return ipc::ReadSegment(ipc).ok() && Exists(dir_.path() + "/" + ipc + ".sock"); },
                        20s))
        << kvd.Log();
    return kvd;
  }
};

TEST_F(KvctlTest, ListAndTenantsShowWhatTheSegmentSays) {
  StartKvd(32);
  Process alpha = HoldingEngine("alpha", 8);
  Process beta = HoldingEngine("beta", 6, {{"NANOKV_GROUP", "g2"}, {"NANOKV_LIMIT", "16M"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 14; }, 20s)) << alpha.Log() << beta.Log();

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
  EXPECT_NE(alpha_row.find("default"), std::string::npos) << alpha_row;
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
    EXPECT_EQ((*tenant)["group"].str(), name == "alpha" ? "default" : "g2");
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
  EXPECT_TRUE(WaitFor([&] { return GrantedPages() == 0; }, 10s)) << "every engine's pages came back";

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

TEST_F(KvctlTest, LimitChangesWhatAnEngineHolds) {
  StartKvd(32);
  Process engine = HoldingEngine("held", 8);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 8; }, 20s)) << engine.Log();

  Ran limit = Kvctl({"--json", "limit", ipc_, "held", "4M", "--wait"});
  ASSERT_EQ(limit.code, 0) << limit.out << limit.err << engine.Log();
  Json doc = ParseJson(limit);
  EXPECT_EQ(doc["old_limit_bytes"].u64(), 32 * kPage);
  EXPECT_EQ(doc["limit_bytes"].u64(), 2 * kPage);
  EXPECT_EQ(doc["used_bytes"].u64(), 8 * kPage);
  EXPECT_TRUE(doc["reclaiming"].boolean);
  EXPECT_TRUE(doc["complete"].boolean);
  EXPECT_EQ(doc["used_after_bytes"].u64(), 2 * kPage);
  const ipc::Snapshot snap = Read();  // FindRow points into it: keep it alive
  const ipc::TenantRow* row = FindRow(snap, "held");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->limit_bytes, 2 * kPage);
  EXPECT_EQ(row->used_bytes, 2 * kPage);
  EXPECT_TRUE(engine.Running()) << "the engine gave pages back and lives on";

  // A share is of the kvd's capacity; the IPC name may come from the environment.
  Ran share = Kvctl({"limit", "held", "50%"}, {{"NANOKV_IPC_NAME", ipc_}});
  ASSERT_EQ(share.code, 0) << share.err;
  EXPECT_NE(share.out.find("4.00 MiB -> 32.0 MiB"), std::string::npos) << share.out;
  // kvd answers before it publishes (at the end of its loop turn).
  auto limit_is = [&](uint64_t bytes) {
    return WaitFor([&] { return FindRow(Read(), "held")->limit_bytes == bytes; }, 5s);
  };
  EXPECT_TRUE(limit_is(16 * kPage));
  Ran clamped = Kvctl({"limit", ipc_, "held", "1.5GiB"});
  ASSERT_EQ(clamped.code, 0) << clamped.err;
  EXPECT_NE(clamped.out.find("clamped"), std::string::npos) << clamped.out;
  EXPECT_TRUE(limit_is(32 * kPage));
}

TEST_F(KvctlTest, EvictTakesPagesBackAndReportsWhatCameBack) {
  StartKvd(32);
  Process engine = HoldingEngine("victim", 8);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 8; }, 20s)) << engine.Log();
  const uint64_t limit_before = FindRow(Read(), "victim")->limit_bytes;

  Ran evict = Kvctl({"--json", "evict", ipc_, "victim", "--bytes", "5M"});
  ASSERT_EQ(evict.code, 0) << evict.out << evict.err << engine.Log();
  Json doc = ParseJson(evict);
  EXPECT_EQ(doc["pages_requested"].u64(), 3u) << "5 MiB is 3 pages of 2 MiB, rounded up";
  EXPECT_EQ(doc["used_before_bytes"].u64(), 8 * kPage);
  EXPECT_EQ(doc["used_after_bytes"].u64(), 5 * kPage);
  EXPECT_EQ(doc["returned_bytes"].u64(), 3 * kPage);
  EXPECT_TRUE(doc["complete"].boolean);
  EXPECT_EQ(TenantUsed("victim"), 5 * kPage);
  EXPECT_EQ(FindRow(Read(), "victim")->limit_bytes, limit_before) << "evict leaves the limit alone";

  Ran all = Kvctl({"evict", ipc_, "victim"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("asked tenant 'victim' for 5 pages (10.0 MiB)"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("10.0 MiB came back"), std::string::npos) << all.out;
  EXPECT_EQ(TenantUsed("victim"), 0u);
  EXPECT_TRUE(engine.Running());
  Ran nothing = Kvctl({"evict", ipc_, "victim"});
  EXPECT_EQ(nothing.code, 0) << nothing.err;
  EXPECT_NE(nothing.out.find("holds nothing"), std::string::npos) << nothing.out;
}

TEST_F(KvctlTest, EvictSaysSoWhenATenantDoesNotGiveBack) {
  StartKvd(32);
  // The fixture's kvd is up once its socket file exists, but kvd binds before
  // it listens: wait until a connect is answered before attaching in-process.
  ASSERT_TRUE(WaitFor([&] { return ipc::Channel::Connect(SocketPath()).ok(); }, 10s));
  auto deaf = AttachClient("deaf");  // registers no reclaim callback: gives nothing back
  ASSERT_TRUE(deaf);
  ASSERT_TRUE(deaf->Grant(0, 4).ok());
  ASSERT_TRUE(WaitFor([&] { return TenantUsed("deaf") == 4 * kPage; }, 5s));
  Ran evict = Kvctl({"evict", ipc_, "deaf", "--timeout", "0.5"});
  EXPECT_EQ(evict.code, 6) << evict.out << evict.err;
  EXPECT_NE(evict.out.find("timed out"), std::string::npos) << evict.out;
  EXPECT_NE(evict.out.find("0 B of 8.00 MiB came back"), std::string::npos) << evict.out;
}

TEST_F(KvctlTest, ErrorsHaveTheirDocumentedExitCodes) {
  StartKvd(32);
  Process engine = HoldingEngine("alpha", 2);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, 20s)) << engine.Log();

  Ran help = Kvctl({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Exit codes:"), std::string::npos) << help.out;
  EXPECT_EQ(Kvctl({"frobnicate"}).code, 2);
  EXPECT_EQ(Kvctl({}).code, 2) << "a command is required";
  EXPECT_EQ(Kvctl({"limit", ipc_, "alpha", "12 parsecs"}).code, 2);
  EXPECT_EQ(Kvctl({"evict", ipc_, "alpha", "--bytes", "-1"}).code, 2);
  EXPECT_EQ(Kvctl({"tenants", ipc_, "--sort", "size"}).code, 2);
  EXPECT_EQ(Kvctl({"tenants", "bad/name"}).code, 2);
  EXPECT_EQ(Kvctl({"instances", "bad/name"}).code, 2);
  Ran none = Kvctl({"instances", ipc_});
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "NAME  PID  STATE  RESTARTS  SINCE\n") << "a kvd that runs no instance";
  EXPECT_EQ(ParseJson(Kvctl({"instances", ipc_, "--json"}))["instances"].items.size(), 0u);

  Ran no_kvd = Kvctl({"tenants", "no_such_kvd_" + ipc_});
  EXPECT_EQ(no_kvd.code, 3) << no_kvd.err;
  EXPECT_NE(no_kvd.err.find("no kvd named"), std::string::npos) << no_kvd.err;
  EXPECT_EQ(Kvctl({"instances", "no_such_kvd_" + ipc_}).code, 3);
  Ran no_tenant = Kvctl({"evict", ipc_, "nobody"});
  EXPECT_EQ(no_tenant.code, 3) << no_tenant.err;
  EXPECT_NE(no_tenant.err.find("its tenants: alpha"), std::string::npos) << no_tenant.err;
  EXPECT_EQ(Kvctl({"limit", ipc_, "nobody", "1G"}).code, 3);

  // Two kvds run and none is named: which one is meant is unclear.
  Process second = StartSecondKvd(ipc_ + "_b");
  Ran unclear = Kvctl({"tenants"});
  EXPECT_EQ(unclear.code, 2) << unclear.err;
  EXPECT_NE(unclear.err.find("several kvds"), std::string::npos) << unclear.err;
  EXPECT_NE(unclear.err.find(ipc_ + "_b"), std::string::npos) << unclear.err;
  EXPECT_EQ(Kvctl({"evict", "alpha"}).code, 2);
  Ran unclear_instances = Kvctl({"instances"});
  EXPECT_EQ(unclear_instances.code, 2) << unclear_instances.err;
  EXPECT_NE(unclear_instances.err.find("several kvds"), std::string::npos) << unclear_instances.err;
  second.Signal(SIGTERM);
  EXPECT_EQ(second.Wait(20s), 0) << second.Log();
}

TEST_F(KvctlTest, CleanupRemovesWhatAKilledKvdLeftAndNothingElse) {
  StartKvd(32);  // stays alive: cleanup must leave it alone
  const std::string victim = ipc_ + "_k";
  Process second = StartSecondKvd(victim);
  const std::string segment = "/dev/shm/nanokv_" + victim;
  const std::string socket = dir_.path() + "/" + victim + ".sock";
  ASSERT_TRUE(Exists(segment) && Exists(socket));
  second.Signal(SIGKILL);
  ASSERT_EQ(second.Wait(10s), 128 + SIGKILL);
  ASSERT_TRUE(Exists(segment) && Exists(socket)) << "kill -9 leaves both behind";

  // Views still read the last figures, marked stale; commands refuse.
  Json doc = ParseJson(Kvctl({"--json", "list"}));
  const Json* dead = FindByKey(doc["kvds"], "ipc", victim);
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ((*dead)["state"].str(), "stale");
  EXPECT_EQ((*FindByKey(doc["kvds"], "ipc", ipc_))["state"].str(), "live");
  Ran stale_view = Kvctl({"tenants", victim});
  EXPECT_EQ(stale_view.code, 0) << stale_view.err;
  EXPECT_NE(stale_view.err.find("not running"), std::string::npos) << stale_view.err;
  EXPECT_EQ(Kvctl({"evict", victim, "anyone"}).code, 4);
  EXPECT_EQ(Kvctl({"limit", victim, "anyone", "1G"}).code, 4);

  Ran dry = Kvctl({"cleanup", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove segment " + segment), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("would remove socket " + socket), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find(ipc_ + ".sock"), std::string::npos) << "the live kvd's socket stays\n" << dry.out;
  EXPECT_TRUE(Exists(segment) && Exists(socket));

  // Only what this test named (other tests' stale segments are theirs).
  Ran cleanup = Kvctl({"--json", "cleanup", victim});
  ASSERT_EQ(cleanup.code, 0) << cleanup.err;
  doc = ParseJson(cleanup);
  ASSERT_EQ(doc["removed"].items.size(), 2u) << cleanup.out;
  EXPECT_EQ(doc["removed"][0]["path"].str(), segment);
  EXPECT_EQ(doc["removed"][1]["path"].str(), socket);
  EXPECT_NE(doc["removed"][0]["reason"].str().find(std::to_string(second.pid())), std::string::npos);
  EXPECT_FALSE(Exists(segment));
  EXPECT_FALSE(Exists(socket));
  EXPECT_EQ(Kvctl({"tenants", victim}).code, 3);
  Ran again = Kvctl({"cleanup", victim});
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.out, "nothing to clean up\n");

  // A live kvd named is left alone, and says why.
  Ran live = Kvctl({"cleanup", ipc_});
  EXPECT_EQ(live.code, 1) << live.out;
  EXPECT_NE(live.out.find("is live: left alone"), std::string::npos) << live.out;
  EXPECT_TRUE(Exists("/dev/shm/nanokv_" + ipc_));
  EXPECT_TRUE(Exists(SocketPath()));
  EXPECT_TRUE(kvd_.Running());
}

// A user kvd lets attach but who is neither root nor kvd's user may look,
// but not limit or evict (exit 5); kvd says no, not just the socket's mode.
TEST_F(KvctlTest, OnlyRootOrKvdsUserMayChangeTenants) {
  if (geteuid() != 0 || std::system("command -v setpriv >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs root and setpriv to run kvctl as another user";
  }
  const std::string config = dir_.path() + "/kvd.yaml";
  std::ofstream(config) << "allowed_uids: [65534]\nsocket_mode: \"0666\"\nsegment_mode: \"0644\"\n";
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);  // so that uid 65534 reaches the socket
  StartKvd(32, {"--config", config});
  Process engine = HoldingEngine("alpha", 2);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, 20s)) << engine.Log();
  auto as_nobody = [&](const std::vector<std::string>& args) {
    std::string command = "exec setpriv --reuid=65534 --regid=65534 --clear-groups " + Quote(KvctlBinary());
    for (const std::string& arg : args) command += " " + Quote(arg);
    return Shell(command);
  };
  Ran view = as_nobody({"tenants", ipc_});
  EXPECT_EQ(view.code, 0) << view.err;
  EXPECT_NE(view.out.find("alpha"), std::string::npos) << view.out;
  Ran evict = as_nobody({"evict", ipc_, "alpha"});
  EXPECT_EQ(evict.code, 5) << evict.out << evict.err;
  EXPECT_NE(evict.err.find("only kvd's user or root may evict"), std::string::npos) << evict.err;
  EXPECT_EQ(as_nobody({"limit", ipc_, "alpha", "2M"}).code, 5);
  EXPECT_EQ(GrantedPages(), 2u) << "nothing was taken";
}

// tmux on its own socket in the test's directory: no other tmux touched, no socket left.
class Tmux {
 public:
  explicit Tmux(const std::string& dir) : socket_(Quote(dir + "/tmux.sock")) {}
  ~Tmux() { (void)std::system(("tmux -S " + socket_ + " kill-server >/dev/null 2>&1").c_str()); }
  std::string Command(const std::string& args) const { return "tmux -S " + socket_ + " " + args; }

 private:
  std::string socket_;
};

TEST_F(KvctlTest, TopInTmuxShowsTenantsAndQuitsOnQ) {
  if (std::system("command -v tmux >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  }
  StartKvd(32);
  Process alpha = HoldingEngine("alpha", 8);
  Process beta = HoldingEngine("beta", 6, {{"NANOKV_GROUP", "g2"}, {"NANOKV_LIMIT", "16M"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 14; }, 20s)) << alpha.Log() << beta.Log();

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
