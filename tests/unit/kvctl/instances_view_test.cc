// `kvctl instances` on made-up segments: a row per instance in kvd's order,
// each state as the table and the JSON show it, how an instance ended (exit
// code or signal), a gone kvd's rows, several kvds.
#include <signal.h>

#include <gtest/gtest.h>

#include "kvctl/views.h"
#include "tests/unit/kvctl/fake_segment.h"
#include "tests/unit/kvctl/mini_json.h"

namespace nanokv::kvctl {
namespace {

using ipc::InstanceState;
using testing::AddInstances;
using testing::FakeKvd;
using testing::JsonParser;
using testing::kFakeNow;

ViewOptions Options(bool json = false) {
  ViewOptions options;
  options.json = json;
  options.now_unix_ns = kFakeNow;
  return options;
}

// One instance in every state, and every way of having ended.
Kvd EveryState(KvdState state = KvdState::kLive) {
  Kvd kvd = FakeKvd("node-a", {}, state);
  AddInstances(kvd, {
                        {.name = "prefill", .state = InstanceState::kStarting, .age_seconds = 2},
                        {.name = "decode-0", .pid = 21980, .age_seconds = 75},
                        {.name = "decode-1", .pid = 21981, .exit_code = 3, .restarts = 1, .age_seconds = 4},
                        {.name = "flaky", .state = InstanceState::kRestarting, .exit_code = 3, .restarts = 2,
                         .age_seconds = 0},
                        {.name = "batch", .state = InstanceState::kExited, .age_seconds = 600},
                        {.name = "oom", .state = InstanceState::kExited, .exit_code = -SIGKILL, .age_seconds = 30},
                        {.name = "crasher", .state = InstanceState::kFailed, .exit_code = 3, .restarts = 5,
                         .age_seconds = 7200},
                        {.name = "segv", .state = InstanceState::kFailed, .exit_code = -SIGSEGV, .restarts = 2,
                         .age_seconds = 3},
                    });
  return kvd;
}

TEST(InstancesView, ARowPerInstanceInKvdsOrderWithHowItEnded) {
  EXPECT_EQ(InstancesView({EveryState()}, Options()),
            "NAME        PID  STATE             RESTARTS  SINCE\n"
            "prefill       -  starting                 0  2s ago\n"
            "decode-0  21980  running                  0  75s ago\n"
            "decode-1  21981  running                  1  4s ago\n"
            "flaky         -  restarting               2  now\n"
            "batch         -  exited (0)               0  10m ago\n"
            "oom           -  killed (SIGKILL)         0  30s ago\n"
            "crasher       -  failed (3)               5  2h ago\n"
            "segv          -  failed (SIGSEGV)         2  3s ago\n");
}

TEST(InstancesView, NoInstancesIsJustTheHeader) {
  std::vector<Kvd> kvds = {FakeKvd("node-a", {{.name = "vllm"}})};
  EXPECT_EQ(InstancesView(kvds, Options()), "NAME  PID  STATE  RESTARTS  SINCE\n");
  auto doc = JsonParser::Parse(InstancesView(kvds, Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["ipc"].str(), "node-a");
  EXPECT_EQ((*doc)["state"].str(), "live");
  EXPECT_EQ((*doc)["pid"].i64(), 4242);
  ASSERT_TRUE((*doc).has("instances"));
  EXPECT_EQ((*doc)["instances"].type, testing::Json::Type::kArray);
  EXPECT_TRUE((*doc)["instances"].items.empty());
}

TEST(InstancesView, JsonHasEveryFieldOfEachState) {
  auto doc = JsonParser::Parse(InstancesView({EveryState()}, Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["ipc"].str(), "node-a");
  EXPECT_EQ((*doc)["updated_unix_ns"].u64(), kFakeNow - 200'000'000ull);
  const auto& rows = (*doc)["instances"];
  ASSERT_EQ(rows.items.size(), 8u);
  struct Want {
    const char* name;
    int64_t pid;
    const char* state;
    const char* exit_code;  // nullptr: null
    const char* signal;     // nullptr: null
    uint64_t restarts;
    uint64_t age_seconds;
  } want[] = {
      {"prefill", 0, "starting", nullptr, nullptr, 0, 2},
      {"decode-0", 21980, "running", nullptr, nullptr, 0, 75},
      {"decode-1", 21981, "running", "3", nullptr, 1, 4},  // its last life's end
      {"flaky", 0, "restarting", "3", nullptr, 2, 0},
      {"batch", 0, "exited", "0", nullptr, 0, 600},
      {"oom", 0, "exited", "-9", "SIGKILL", 0, 30},
      {"crasher", 0, "failed", "3", nullptr, 5, 7200},
      {"segv", 0, "failed", "-11", "SIGSEGV", 2, 3},
  };
  for (size_t i = 0; i < std::size(want); ++i) {
    const auto& row = rows[i];
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(row["name"].str(), want[i].name);
    EXPECT_EQ(row["pid"].i64(), want[i].pid);
    EXPECT_EQ(row["state"].str(), want[i].state);
    ASSERT_TRUE(row.has("exit_code") && row.has("signal"));
    if (want[i].exit_code == nullptr) {
      EXPECT_EQ(row["exit_code"].type, testing::Json::Type::kNull);
    } else {
      EXPECT_EQ(row["exit_code"].type, testing::Json::Type::kNumber);
      EXPECT_EQ(row["exit_code"].str(), want[i].exit_code);
    }
    if (want[i].signal == nullptr) {
      EXPECT_EQ(row["signal"].type, testing::Json::Type::kNull);
    } else {
      EXPECT_EQ(row["signal"].str(), want[i].signal);
    }
    EXPECT_EQ(row["restarts"].u64(), want[i].restarts);
    EXPECT_EQ(row["since_unix_ns"].u64(), kFakeNow - want[i].age_seconds * 1'000'000'000ull);
  }
}

// kvctl does not claim what it cannot know: a gone kvd's instances that had
// not ended are "stale"; those that had ended keep how they ended.
TEST(InstancesView, AGoneKvdsUnendedInstancesAreStale) {
  Kvd kvd = EveryState(KvdState::kStale);
  std::string table = InstancesView({kvd}, Options());
  EXPECT_NE(table.find("decode-0  21980  stale "), std::string::npos) << table;
  EXPECT_NE(table.find("flaky         -  stale "), std::string::npos) << table;
  EXPECT_NE(table.find("prefill       -  stale "), std::string::npos) << table;
  EXPECT_NE(table.find("crasher       -  failed (3) "), std::string::npos) << table;
  EXPECT_NE(table.find("oom           -  killed (SIGKILL) "), std::string::npos) << table;
  EXPECT_EQ(table.find("running"), std::string::npos) << table;
  auto doc = JsonParser::Parse(InstancesView({kvd}, Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["state"].str(), "stale");
  EXPECT_EQ((*doc)["instances"][1]["state"].str(), "stale");
  EXPECT_EQ((*doc)["instances"][6]["state"].str(), "failed");
}

TEST(InstancesView, SeveralKvdsHaveAnIpcColumnAndAnObjectEach) {
  Kvd b = FakeKvd("node-b", {});
  AddInstances(b, {{.name = "solo", .pid = 77, .restarts = 4, .age_seconds = 1}});
  Kvd unreadable;
  unreadable.ipc_name = "node-c";
  unreadable.error = Status::Unavailable("segment busy");
  std::vector<Kvd> kvds = {EveryState(), b, unreadable};
  ViewOptions options = Options();
  options.with_ipc = true;
  std::string table = InstancesView(kvds, options);
  EXPECT_TRUE(table.starts_with("IPC     NAME        PID  STATE")) << table;
  EXPECT_NE(table.find("node-a  segv"), std::string::npos) << table;
  EXPECT_NE(table.find("node-b  solo         77  running                  4  1s ago"), std::string::npos) << table;
  EXPECT_EQ(table.find("node-c"), std::string::npos) << "an unreadable kvd has no rows\n" << table;
  options.json = true;
  auto doc = JsonParser::Parse(InstancesView(kvds, options));
  ASSERT_TRUE(doc);
  const auto& objects = (*doc)["kvds"];
  ASSERT_EQ(objects.items.size(), 3u);
  EXPECT_EQ(objects[0]["instances"].items.size(), 8u);
  EXPECT_EQ(objects[1]["instances"][0]["name"].str(), "solo");
  EXPECT_EQ(objects[1]["instances"][0]["exit_code"].str(), "0") << "restarted: its last life ended";
  EXPECT_EQ(objects[2]["state"].str(), "unreadable");
  EXPECT_NE(objects[2]["error"].str().find("segment busy"), std::string::npos);
  EXPECT_TRUE(objects[2]["instances"].items.empty());
}

TEST(InstancesView, ColourOnlyWhenAskedAndNamesAreSanitized) {
  Kvd kvd = EveryState();
  ipc::CopyString(kvd.snapshot->segment.instances[0].name, "bad\033[2Jname");
  ViewOptions options = Options();
  std::string plain = InstancesView({kvd}, options);
  EXPECT_EQ(plain.find('\033'), std::string::npos) << plain;
  EXPECT_NE(plain.find("bad?[2Jname"), std::string::npos) << plain;
  options.colour = true;
  std::string coloured = InstancesView({kvd}, options);
  EXPECT_NE(coloured.find("\033[32mrunning"), std::string::npos) << "running is green";
  EXPECT_NE(coloured.find("\033[31mfailed (3)"), std::string::npos) << "failed is red";
  EXPECT_NE(coloured.find("\033[33mrestarting"), std::string::npos) << "restarting is yellow";
}

TEST(Figures, InstanceStatesAndSignalNames) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGABRT), "SIGABRT");
  EXPECT_EQ(SignalName(SIGRTMIN + 1), "signal " + std::to_string(SIGRTMIN + 1));
  ipc::InstanceRow row{};
  row.state = static_cast<uint32_t>(InstanceState::kExited);
  row.exit_code = -SIGTERM;
  EXPECT_EQ(InstanceStateText(row, true), "killed (SIGTERM)");
  row.exit_code = 255;
  EXPECT_EQ(InstanceStateText(row, true), "exited (255)");
  EXPECT_EQ(InstanceStateText(row, false), "exited (255)") << "an ended state stays true";
  row.state = 99;
  EXPECT_EQ(InstanceStateName(row, true), "unknown(99)");
  EXPECT_EQ(InstanceStateName(row, false), "stale");
  row.state = static_cast<uint32_t>(InstanceState::kRunning);
  EXPECT_FALSE(InstanceHasEnded(row));
  row.restarts = 1;
  EXPECT_TRUE(InstanceHasEnded(row));
}

}  // namespace
}  // namespace nanokv::kvctl
