// kvctl's edges (issue 21, item 6): a kvd without an object store is "not
// enabled" (exit 7), not "not running"; under --json every error is a JSON
// document on stdout; usage lines read as a person writes them; top fits
// 80x24; kvd's own tenant refuses an operator's limit and evict; a limit of
// 0 means the default limit, as at attach; `list` takes the kvds to show by
// name, as kvcached's `kvctl list [IPC...]` does.

#include "tests/integration/kvctl_fixture.h"

namespace nanokv::testing {
namespace {

// The JSON error kvctl printed on stdout: its exit code is the process's.
void ExpectJsonError(const Ran& run, int code, const std::string& words) {
  EXPECT_EQ(run.code, code) << run.out << run.err;
  auto doc = JsonParser::Parse(run.out);
  ASSERT_TRUE(doc.has_value()) << "not JSON on stdout: '" << run.out << "'\n" << run.err;
  EXPECT_EQ((*doc)["code"].u64(), static_cast<uint64_t>(code)) << run.out;
  EXPECT_NE((*doc)["error"].str().find(words), std::string::npos) << run.out;
  EXPECT_FALSE((*doc)["status"].str().empty()) << run.out;
}

TEST_F(KvctlTest, ObjectsOnAKvdWithoutAStoreIsNotEnabled) {
  StartKvd(32);
  Ran objects = Kvctl({"objects", ipc_});
  EXPECT_EQ(objects.code, 7) << objects.out << objects.err;
  EXPECT_NE(objects.err.find("object_store.size is 0"), std::string::npos) << objects.err;
  ExpectJsonError(Kvctl({"--json", "objects", ipc_}), 7, "runs no object store");
  EXPECT_EQ(Kvctl({"evict", "--objects", ipc_}).code, 7);
  Ran help = Kvctl({"--help"});
  EXPECT_NE(help.out.find("7  not enabled"), std::string::npos) << help.out;
}

TEST_F(KvctlTest, JsonErrorsAreJsonOnStdout) {
  StartKvd(32);
  ExpectJsonError(Kvctl({"--json", "tenants", "no_such_kvd_" + ipc_}), 3, "no kvd named");
  ExpectJsonError(Kvctl({"limit", ipc_, "nobody", "1G", "--json"}), 3, "no tenant named 'nobody'");
  ExpectJsonError(Kvctl({"--json", "limit", ipc_, "alpha", "12 parsecs"}), 2, "12 parsecs");
  ExpectJsonError(Kvctl({"--json", "frobnicate"}), 2, "");
  ExpectJsonError(Kvctl({"--json", "limit"}), 2, "IPC-TENANT-SIZE");
  ExpectJsonError(Kvctl({"--json"}), 2, "subcommand is required");
  // Without --json errors stay on stderr, stdout empty.
  Ran plain = Kvctl({"tenants", "no_such_kvd_" + ipc_});
  EXPECT_EQ(plain.code, 3);
  EXPECT_EQ(plain.out, "");
}

TEST_F(KvctlTest, UsageLinesReadAsAPersonWritesThem) {
  const std::map<std::string, std::string> expected = {
      {"limit", "Usage: kvctl limit [OPTIONS] [IPC] TENANT SIZE|PCT%"},
      {"evict", "Usage: kvctl evict [OPTIONS] [IPC] TENANT | --objects [IPC] | --cluster KEY..."},
      {"objects", "Usage: kvctl objects [OPTIONS] [IPC] | --cluster"},
      {"tenants", "Usage: kvctl tenants [OPTIONS] [IPC | --all]"},
      {"cleanup", "Usage: kvctl cleanup [OPTIONS] [IPC...]"},
      {"list", "Usage: kvctl list [OPTIONS] [IPC...]"},
  };
  for (const auto& [command, line] : expected) {
    Ran help = Kvctl({command, "--help"});
    EXPECT_EQ(help.code, 0) << help.err;
    EXPECT_NE(help.out.find(line + "\n"), std::string::npos) << help.out;
    EXPECT_EQ(help.out.find("(2x)"), std::string::npos) << help.out;
    EXPECT_EQ(help.out.find("args"), std::string::npos) << help.out;
  }
}

TEST_F(KvctlTest, ListShowsTheKvdsNamedInTheirOrder) {
  StartKvd(32);
  const std::string second = ipc_ + "_b";
  Process other = StartSecondKvd(second);
  Ran one = Kvctl({"list", ipc_});
  ASSERT_EQ(one.code, 0) << one.out << one.err;
  EXPECT_TRUE(one.out.starts_with("IPC ")) << one.out;
  EXPECT_NE(TableRow(one.out, ipc_).find("live"), std::string::npos) << one.out;
  EXPECT_EQ(TableRow(one.out, second), "") << "only the kvd named\n" << one.out;
  Json both = ParseJson(Kvctl({"--json", "list", second, ipc_, second}));
  ASSERT_EQ(both["kvds"].items.size(), 2u) << "each kvd once";
  EXPECT_EQ(both["kvds"].items[0]["ipc"].str(), second) << "in the order named";
  EXPECT_EQ(both["kvds"].items[1]["ipc"].str(), ipc_);
  Ran missing = Kvctl({"list", ipc_, "no_such_kvd_" + ipc_});
  EXPECT_EQ(missing.code, 3) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("no kvd named 'no_such_kvd_" + ipc_ + "'"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.out, "") << "no table when a name is no kvd's";
  EXPECT_EQ(Kvctl({"list", "not/a/name"}).code, 2);
  other.Signal(SIGTERM);
  EXPECT_EQ(other.Wait(20s), 0) << other.Log();
}

TEST_F(KvctlTest, KvdsOwnTenantRefusesLimitAndEvict) {
  StartKvd(32, {"--config", WriteConfig("object_store:\n  size: 8MiB\n")});
  ASSERT_NE(FindRow(Read(), "kvd.objects"), nullptr) << "the store's tenant is in the segment";
  const uint64_t limit = FindRow(Read(), "kvd.objects")->limit_bytes;
  Ran set = Kvctl({"limit", ipc_, "kvd.objects", "1M"});
  EXPECT_EQ(set.code, 5) << set.out << set.err;
  EXPECT_NE(set.err.find("is kvd's own"), std::string::npos) << set.err;
  Ran evict = Kvctl({"evict", ipc_, "kvd.objects"});
  EXPECT_EQ(evict.code, 5) << evict.out << evict.err;
  EXPECT_NE(evict.err.find("kvctl evict --objects"), std::string::npos) << evict.err;
  EXPECT_EQ(FindRow(Read(), "kvd.objects")->limit_bytes, limit) << "left as it was";
  Ran view = Kvctl({"tenants", ipc_});
  EXPECT_EQ(view.out.find("reclaiming"), std::string::npos) << view.out;
}

TEST_F(KvctlTest, ALimitOfZeroIsTheDefaultLimit) {
  StartKvd(32, {"--default-limit", "8M"});
  Process engine = HoldingEngine("alpha", 2, {{"NANOKV_LIMIT", "16M"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, 20s)) << engine.Log();
  EXPECT_EQ(FindRow(Read(), "alpha")->limit_bytes, 8 * kPage);
  Ran zero = Kvctl({"--json", "limit", ipc_, "alpha", "0"});
  ASSERT_EQ(zero.code, 0) << zero.err;
  EXPECT_EQ(ParseJson(zero)["limit_bytes"].u64(), 4 * kPage) << "0: default_limit, 8 MiB";
  Ran text = Kvctl({"limit", ipc_, "alpha", "0"});
  EXPECT_NE(text.out.find("(0: the kvd's default limit)"), std::string::npos) << text.out;
  EXPECT_TRUE(engine.Running());
}

TEST_F(KvctlTest, TopFitsEightyByTwentyFour) {
  if (std::system("command -v tmux >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "tmux is not installed (scripts/install-deps.sh installs it)";
  }
  StartKvd(32);
  Process alpha = HoldingEngine("alpha", 8);
  Process beta = HoldingEngine("beta-with-a-long-name", 6, {{"NANOKV_GROUP", "group-two"}, {"NANOKV_LIMIT", "16M"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 14; }, 20s)) << alpha.Log() << beta.Log();

  Tmux tmux(dir_.path());
  const std::string top = "env NANOKV_RUN_DIR=" + Quote(dir_.path()) + " " + Quote(KvctlBinary()) + " top " +
                          ipc_ + " -n 0.2";
  std::map<std::string, std::string> term = {{"TERM", "xterm-256color"}};
  ASSERT_EQ(Shell(tmux.Command("new-session -d -x 80 -y 24 " + Quote(top)), term).code, 0);
  std::string screen;
  ASSERT_TRUE(WaitFor([&] {
    screen = Shell(tmux.Command("capture-pane -p"), term).out;
    return screen.find("alpha") != std::string::npos && screen.find("beta-with-a~") != std::string::npos;
  }, 20s)) << screen;
  std::istringstream lines(screen);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) EXPECT_LE(line.size(), 80u) << line;
  EXPECT_LE(count, 24);
  for (const char* head : {"USED", "LIMIT", "USE%", "STATE", "ACTIVE"}) {
    EXPECT_NE(screen.find(head), std::string::npos) << head << "\n" << screen;
  }
  EXPECT_NE(TableRow(screen, "alpha").find("attached"), std::string::npos) << screen;
  const std::string row = TableRow(screen, "alpha");
  EXPECT_TRUE(row.ends_with("now") || row.ends_with("ago")) << "ACTIVE shows\n" << screen;
  EXPECT_NE(screen.find("75.0%"), std::string::npos) << "beta's USE%\n" << screen;
  EXPECT_NE(screen.find("28.0 MiB / 64.0 MiB"), std::string::npos) << "the device bar\n" << screen;
  ASSERT_EQ(Shell(tmux.Command("send-keys q"), term).code, 0);
}

}  // namespace
}  // namespace nanokv::testing
