// kvd --check-limits (issue 16 item 5): for the config and flags given, the
// fds, memory and devices kvd needs at full use against this machine's
// limits; exit 0 when they suffice, 3 (with the LimitNOFILE= to set) when
// not, under a lowered RLIMIT_NOFILE too. It makes nothing. The start-up log
// says the same in one line.
#include <string>
#include <vector>

#include "tests/integration/kvd_fixture.h"
#include "tests/unit/kvctl/mini_json.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdCheckLimitsTest : public KvdFixture {
 protected:
  struct Checked {
    int code = -1;
    std::string out;  // stdout and stderr together (Process's log)
  };

  // kvd --check-limits with the fixture's 8 pages, 16 connections, under
  // `nofile` ("soft:hard") when given.
  Checked Check(std::vector<std::string> args, const std::string& nofile = "") {
    static int counter = 0;
    std::vector<std::string> argv;
    if (!nofile.empty()) argv = {"/usr/bin/prlimit", "--nofile=" + nofile, "--"};
    for (const std::string& arg : std::vector<std::string>{
             Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--check-limits", "--backend", "host", "--ipc-name",
             ipc_, "--capacity", std::to_string(8 * kPage), "--host-device-memory", std::to_string(32 * kPage),
             "--max-connections", "16", "--log-level", "warn"}) {
      argv.push_back(arg);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    Process kvd = Process::Start(argv, {{"NANOKV_RUN_DIR", dir_.path()}},
                                 dir_.path() + "/check" + std::to_string(counter++) + ".log");
    auto code = kvd.Wait(20s);
    EXPECT_TRUE(code.has_value()) << "kvd --check-limits kept running";
    EXPECT_EQ(ipc::ReadSegment(ipc_).status().code(), Code::kNotFound) << "it made a segment";
    EXPECT_FALSE(ipc::Channel::Connect(SocketPath()).ok()) << "it serves";
    return {code.value_or(-1), kvd.Log()};
  }

  // The fds the report says kvd needs ("fds: N = ...").
  static uint64_t FdsNeeded(const std::string& report) {
    size_t at = report.find("  fds: ");
    return at == std::string::npos ? 0 : std::stoull(report.substr(at + 7));
  }
};

TEST_F(KvdCheckLimitsTest, ASmallKvdFitsAndSaysWhatItNeeds) {
  Checked checked = Check({});
  EXPECT_EQ(checked.code, 0) << checked.out;
  EXPECT_NE(checked.out.find("device 0 (host, 64.0 MiB): 8 pages, 16.0 MiB"), std::string::npos) << checked.out;
  // A host page is a memfd: one fd at rest; its export lives only while sent.
  EXPECT_NE(checked.out.find(" = 8 pages x 1 at rest + "), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find(" for pages created ahead + 16 connections x 3 + 314 headroom + "), std::string::npos)
      << checked.out;
  EXPECT_GT(FdsNeeded(checked.out), 8u * 1 + 16 * 3 + 314);
  EXPECT_NE(checked.out.find("open-file limit (RLIMIT_NOFILE): soft "), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("fs.nr_open "), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("memory: kvd's RSS about "), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("/dev/shm: 69.9 KiB (the state segment)"), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("this machine's limits suffice"), std::string::npos) << checked.out;
  EXPECT_EQ(checked.out.find("LimitNOFILE="), std::string::npos) << checked.out;
}

TEST_F(KvdCheckLimitsTest, ALoweredOpenFileLimitDoesNotSufficeAndNamesTheLineToSet) {
  Checked checked = Check({}, "200:200");
  EXPECT_EQ(checked.code, 3) << checked.out;
  EXPECT_NE(checked.out.find("soft 200, hard 200"), std::string::npos) << checked.out;
  EXPECT_NE(checked.out.find("DOES NOT SUFFICE"), std::string::npos) << checked.out;
  const uint64_t needed = FdsNeeded(checked.out);
  const uint64_t to_set = (needed + 1023) / 1024 * 1024;
  EXPECT_NE(checked.out.find("\n      LimitNOFILE=" + std::to_string(to_set) + "\n"), std::string::npos)
      << checked.out;
  EXPECT_NE(checked.out.find("this machine's limits do not suffice (exit 3)"), std::string::npos) << checked.out;

  Checked json = Check({"--json"}, "200:200");
  EXPECT_EQ(json.code, 3) << json.out;
  auto doc = JsonParser::Parse(json.out.substr(0, json.out.find('\n')));
  ASSERT_TRUE(doc.has_value()) << json.out;
  EXPECT_FALSE((*doc)["ok"].boolean) << json.out;
  EXPECT_EQ((*doc)["fds"]["needed"].u64(), needed) << json.out;
  EXPECT_EQ((*doc)["fds"]["hard_limit"].u64(), 200u) << json.out;
  EXPECT_EQ((*doc)["fds"]["limit_nofile"].u64(), to_set) << json.out;
  EXPECT_TRUE((*doc)["memory"]["ok"].boolean) << json.out;
  EXPECT_EQ((*doc)["devices"][0]["capacity_pages"].u64(), 8u) << json.out;
}

TEST_F(KvdCheckLimitsTest, ADeviceNotPresentFailsNamingTheFlag) {
  Checked checked = Check({"--devices", "3"});
  EXPECT_EQ(checked.code, 1) << checked.out;
  EXPECT_NE(checked.out.find("--devices: device 3 is not present"), std::string::npos) << checked.out;
}

TEST_F(KvdCheckLimitsTest, TheStartUpLogSaysTheSameInOneLine) {
  // The line comes after kvd's socket listens (the socket is made first),
  // in several writes (spdlog's colour runs), and both kvds write the same
  // log: wait for the end of the line of each.
  auto logged = [&](const std::string& text, size_t from) {
    return WaitFor([&] { return kvd_.Log().find(text, from) != std::string::npos; }, 10s);
  };
  StartKvd(8, {"--max-connections", "16"});
  // Its verdict, either one (not asserted: /dev/shm and available memory are
  // the machine's, shared with the tests running beside this one).
  ASSERT_TRUE(logged("limits at full use: ", 0)) << kvd_.Log();
  ASSERT_TRUE(logged("suffice", kvd_.Log().find("limits at full use: "))) << kvd_.Log();
  StopKvd();
  const size_t second = kvd_.Log().size();

  kvd_prefix_ = {"/usr/bin/prlimit", "--nofile=200:200", "--"};
  StartKvd(8, {"--max-connections", "16"});
  ASSERT_TRUE(logged("they do not suffice: set LimitNOFILE=1024 in kvd's systemd unit;", second)) << kvd_.Log();
  EXPECT_NE(kvd_.Log().find("against a hard limit of 200", second), std::string::npos) << kvd_.Log();
}

}  // namespace
}  // namespace nanokv::testing
