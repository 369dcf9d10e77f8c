// How kvd refuses to start (issue 21, item 5): usage errors exit 2 (CLI11's
// own codes never leak), a config that does not load exits 2 naming the file,
// line and key or the flag, and the checks made once devices are open (a
// device not present, a page size off the granularity, a store larger than
// the capacity, a host tier larger than the machine) name where the key was
// given too, exit 1. Each leaves
// nothing behind.
#include <fstream>

#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdStartErrorsTest : public KvdFixture {
 protected:
  struct Refused {
    int code = -1;
    std::string log;
  };

  // kvd with `args` after the fixture's usual ones; it must exit by itself.
  Refused Start(std::vector<std::string> args) {
    static int counter = 0;
    std::vector<std::string> argv = {Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(),
                                     "--ipc-name", ipc_, "--capacity", std::to_string(8 * kPage),
                                     "--host-device-memory", std::to_string(32 * kPage)};
    argv.insert(argv.end(), args.begin(), args.end());
    Process kvd = Process::Start(argv, {{"NANOKV_RUN_DIR", dir_.path()}},
                                 dir_.path() + "/kvd" + std::to_string(counter++) + ".log");
    auto code = kvd.Wait(20s);
    EXPECT_TRUE(code.has_value()) << "kvd kept running";
    EXPECT_EQ(ipc::ReadSegment(ipc_).status().code(), Code::kNotFound) << "a segment was left\n" << kvd.Log();
    return {code.value_or(-1), kvd.Log()};
  }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(KvdStartErrorsTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--frobnicate"},                  // CLI11: 109
           {"--reserve-pages"},               // a value missing: 114
           {"--config", "/no/such/file.yaml"},  // 105
           {"stray-positional"},
           {"--json"},                          // --check-limits's alone
       }) {
    Refused refused = Start(args);
    EXPECT_EQ(refused.code, 2) << args[0] << "\n" << refused.log;
  }
  Refused flag = Start({"--page-size", "3MiB"});
  EXPECT_EQ(flag.code, 2) << flag.log;
  EXPECT_NE(flag.log.find("--page-size: '3MiB' is not a power of two"), std::string::npos) << flag.log;
  Refused fraction = Start({"--default-limit", "1.5"});  // the fixture gives --capacity
  EXPECT_EQ(fraction.code, 2) << fraction.log;
  EXPECT_NE(fraction.log.find("--default-limit: '1.5' is a fraction above 1"), std::string::npos) << fraction.log;
}

TEST_F(KvdStartErrorsTest, ConfigsThatDoNotLoadExitTwoNamingTheLine) {
  const std::string empty = Write("empty.yaml", "");
  Refused refused = Start({"--config", empty});
  EXPECT_EQ(refused.code, 2) << refused.log;
  EXPECT_NE(refused.log.find(empty + ":1: the file is empty"), std::string::npos) << refused.log;
  const std::string twice = Write("twice.yaml", "log_level: info\nreserve_pages: 2\nlog_level: debug\n");
  refused = Start({"--config", twice});
  EXPECT_EQ(refused.code, 2) << refused.log;
  EXPECT_NE(refused.log.find(twice + ":3: log_level: given twice (first at line 1)"), std::string::npos)
      << refused.log;
}

TEST_F(KvdStartErrorsTest, DeviceChecksNameWhereTheKeyWasGiven) {
  const std::string devices = Write("devices.yaml", "log_level: info\ndevices: [3]\n");
  Refused refused = Start({"--config", devices});
  EXPECT_EQ(refused.code, 1) << refused.log;
  EXPECT_NE(refused.log.find(devices + ":2: devices: device 3 is not present"), std::string::npos) << refused.log;
  refused = Start({"--devices", "3"});
  EXPECT_NE(refused.log.find("--devices: device 3 is not present"), std::string::npos) << refused.log;

  if (Backend() == "host") {  // the host backend's granularity is 2 MiB, as CUDA's on Hopper
    const std::string page = Write("page.yaml", "\npage_size: 1MiB\n");
    refused = Start({"--config", page});
    EXPECT_EQ(refused.code, 1) << refused.log;
    EXPECT_NE(refused.log.find(page + ":2: page_size: 1048576 bytes is not a multiple of device 0's granularity"),
              std::string::npos)
        << refused.log;
  }

  const std::string store = Write("store.yaml", "object_store:\n  policy: fifo\n  size: 64MiB\n");
  refused = Start({"--config", store});
  EXPECT_EQ(refused.code, 1) << refused.log;
  EXPECT_NE(refused.log.find(store + ":3: object_store.size: "), std::string::npos) << refused.log;

  // A host tier the machine cannot hold is refused at start, not when
  // objects first land in it.
  const std::string tier = Write("tier.yaml", "object_store:\n  size: 8MiB\n  host_tier: 1048576TiB\n");
  refused = Start({"--config", tier});
  EXPECT_EQ(refused.code, 1) << refused.log;
  EXPECT_NE(refused.log.find(tier + ":3: object_store.host_tier: "), std::string::npos) << refused.log;
  EXPECT_NE(refused.log.find("more than this machine's memory"), std::string::npos) << refused.log;
}

}  // namespace
}  // namespace nanokv::testing
