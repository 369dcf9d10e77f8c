// ops/: logging to stderr and a file as text or JSON lines, systemd's
// readiness datagram, the version line.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "ops/logging.h"
#include "ops/sd_notify.h"
#include "ops/version.h"
#include "tests/integration/process_util.h"

namespace nanokv::ops {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `body` with fd 2 going to `path`.
template <typename Body>
void WithStderrTo(const std::string& path, Body body) {
  fflush(stderr);
  int saved = dup(2);
  int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  dup2(file, 2);
  close(file);
  body();
  spdlog::default_logger()->flush();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
}

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(nlohmann::json::parse(line));  // throws, failing the test, on a bad line
  }
  return lines;
}

class LoggingTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(SetUpLogging({}).ok()); }
  testing::TempDir dir_;
};

TEST_F(LoggingTest, JsonLinesGoToStderrAndTheFile) {
  const std::string file = dir_.path() + "/kvd.log", err = dir_.path() + "/stderr";
  LogOptions options;
  options.program = "kvd";
  options.format = LogFormat::kJson;
  options.file = file;
  WithStderrTo(err, [&] {
    ASSERT_TRUE(SetUpLogging(options).ok());
    spdlog::info("tenant '{}' attached", "a\"b\nc\xff");
    spdlog::debug("not at info");
    spdlog::warn("second");
  });
  for (const std::string& path : {file, err}) {
    std::vector<nlohmann::json> lines = JsonLines(ReadFile(path));
    ASSERT_EQ(lines.size(), 2u) << path;
    EXPECT_EQ(lines[0]["level"], "info");
    EXPECT_EQ(lines[0]["logger"], "kvd");
    EXPECT_EQ(lines[0]["pid"], getpid());
    EXPECT_EQ(lines[0]["msg"], "tenant 'a\"b\nc\xef\xbf\xbd' attached");  // the stray byte as U+FFFD
    EXPECT_EQ(lines[1]["level"], "warning");
    const std::string ts = lines[0]["ts"];
    EXPECT_EQ(ts.size(), std::string("2026-11-24T10:00:00.123456Z").size()) << ts;
    EXPECT_EQ(ts.back(), 'Z');
  }
}

TEST_F(LoggingTest, TextLinesAppendToTheFile) {
  const std::string file = dir_.path() + "/kvd.log";
  { std::ofstream(file) << "an older line\n"; }
  LogOptions options;
  options.file = file;
  WithStderrTo(dir_.path() + "/stderr", [&] {
    ASSERT_TRUE(SetUpLogging(options).ok());
    spdlog::info("kvd: ready");
  });
  const std::string text = ReadFile(file);
  EXPECT_EQ(text.rfind("an older line\n", 0), 0u) << text;
  EXPECT_NE(text.find("[kvd] [info] kvd: ready\n"), std::string::npos) << text;
  EXPECT_NE(ReadFile(dir_.path() + "/stderr").find("kvd: ready"), std::string::npos);
}

TEST_F(LoggingTest, BadFileAndLevelAreErrors) {
  LogOptions options;
  { std::ofstream(dir_.path() + "/a-file") << "x"; }
  options.file = dir_.path() + "/a-file/kvd.log";  // a folder that cannot be made
  Status bad = SetUpLogging(options);
  EXPECT_EQ(bad.code(), Code::kIOError);
  EXPECT_NE(bad.ToString().find(options.file), std::string::npos) << bad.ToString();
  options.file.clear();
  options.level = "loud";
  EXPECT_EQ(SetUpLogging(options).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseLogFormat("json").value(), LogFormat::kJson);
  EXPECT_EQ(ParseLogFormat("xml").status().code(), Code::kInvalidArgument);
}

TEST(SdNotifyTest, SendsTheStateToNotifySocket) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/notify";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ASSERT_TRUE(SdNotify("READY=1\nSTATUS=serving").ok());
  char got[256] = {};
  ssize_t n = recv(fd, got, sizeof(got) - 1, 0);
  EXPECT_EQ(std::string(got, n > 0 ? n : 0), "READY=1\nSTATUS=serving");
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_EQ(SdNotify("READY=1").code(), Code::kInvalidArgument);
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(SdNotify("READY=1").ok());  // not under systemd: nothing to do
  close(fd);
}

TEST(VersionTest, NamesVersionCommitAndBackends) {
  const BuildInfo& b = Build();
  EXPECT_EQ(b.version, NANOKV_EXPECTED_VERSION);
  EXPECT_FALSE(b.commit.empty());
  ASSERT_FALSE(b.backends.empty());
  EXPECT_EQ(b.backends[0], "host");
  const std::string line = VersionLine("kvd");
  EXPECT_EQ(line.rfind("kvd " + b.version + " (commit " + b.commit + "; backends: host", 0), 0u) << line;
}

}  // namespace
}  // namespace nanokv::ops
