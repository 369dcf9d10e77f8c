#include "daemon/controller/instance_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace nanokv::kvd {
namespace {

bool Has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

bool HasName(const std::vector<std::string>& env, const std::string& name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
}

TEST(InstanceEnvironment, KvdsOwnThenTheInstancesThenNanokvs) {
  InstanceConfig config;
  config.name = "engine-a";
  config.env = {{"FOO", "bar"}, {"HOME", "/override"}};
  config.limit = SizeOrShare{0, 0.25};
  config.group = "team";
  config.device = 1;
  std::string a = "HOME=/root", b = "PATH=/bin", c = "NANOKV_LIMIT=9G", d = "NANOKV_GROUP=old",
              e = "NANOKV_TENANT=someone";
  char* base[] = {a.data(), b.data(), c.data(), d.data(), e.data(), nullptr};
  auto env = InstanceEnvironment(config, InstanceSite{"node-x", "/run/x"}, base);
  EXPECT_TRUE(Has(env, "PATH=/bin"));
  EXPECT_TRUE(Has(env, "HOME=/override"));
  EXPECT_TRUE(Has(env, "FOO=bar"));
  EXPECT_TRUE(Has(env, "ENABLE_NANOKV=1"));
  EXPECT_TRUE(Has(env, "NANOKV_IPC_NAME=node-x"));
  EXPECT_TRUE(Has(env, "NANOKV_RUN_DIR=/run/x"));
  EXPECT_TRUE(Has(env, "NANOKV_TENANT=engine-a"));
  EXPECT_TRUE(Has(env, "NANOKV_LIMIT=25%"));
  EXPECT_TRUE(Has(env, "NANOKV_GROUP=team"));
  EXPECT_TRUE(Has(env, "NANOKV_DEVICE=1"));
  EXPECT_FALSE(Has(env, "HOME=/root"));
}

TEST(InstanceEnvironment, KvdsInheritedNanokvVariablesDoNotLeak) {
  InstanceConfig config;
  config.name = "plain";
  std::string c = "NANOKV_LIMIT=9G", d = "NANOKV_GROUP=old", e = "NANOKV_DEVICE=3";
  char* base[] = {c.data(), d.data(), e.data(), nullptr};
  auto env = InstanceEnvironment(config, InstanceSite{"n", "/r"}, base);
  EXPECT_FALSE(HasName(env, "NANOKV_LIMIT"));
  EXPECT_FALSE(HasName(env, "NANOKV_GROUP"));
  EXPECT_FALSE(HasName(env, "NANOKV_DEVICE"));
}

TEST(InstanceLogPath, DefaultsToTheRunDirectory) {
  InstanceConfig config;
  config.name = "a";
  EXPECT_EQ(InstanceLogPath(config, InstanceSite{"node", "/run/nanokv"}), "/run/nanokv/node.a.log");
  config.log = "/var/log/a.log";
  EXPECT_EQ(InstanceLogPath(config, InstanceSite{"node", "/run/nanokv"}), "/var/log/a.log");
}

class SpawnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/nanokv-spawn-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs `script` under /bin/sh as an instance and returns its exit status.
  int Run(const std::string& script, std::string* log) {
    InstanceConfig config;
    config.name = "probe";
    config.command = "/bin/sh";
    config.args = {"-c", script};
    config.workdir = dir_;
    std::string log_path = dir_ + "/probe.log";
    AppendLogLine(log_path, "header");
    auto spawned = SpawnInstance(config, InstanceSite{"ipc-x", dir_}, log_path);
    EXPECT_TRUE(spawned.ok()) << spawned.status().ToString();
    if (!spawned.ok()) return -1;
    pollfd p{spawned->pidfd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 10000), 1) << "the pidfd never said the process ended";
    int status = 0;
    EXPECT_EQ(waitpid(spawned->pid, &status, 0), spawned->pid);
    close(spawned->pidfd);
    std::ifstream in(log_path);
    std::stringstream text;
    text << in.rdbuf();
    *log = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string dir_;
};

TEST_F(SpawnTest, OutputAppendsToTheLogInTheWorkdirWithTheEnvironment) {
  std::string log;
  EXPECT_EQ(Run("echo out; echo err >&2; pwd; echo $NANOKV_TENANT $NANOKV_IPC_NAME; exit 7", &log), 7);
  EXPECT_EQ(log, "header\nout\nerr\n" + dir_ + "\nprobe ipc-x\n");
}

TEST_F(SpawnTest, NoFdOfKvdsLeaksIn) {
  int null_fd = open("/dev/null", O_RDONLY);
  // No O_CLOEXEC: exec alone would pass it on. High, so ls's own fd is not it.
  int leaked = fcntl(null_fd, F_DUPFD, 100);
  close(null_fd);
  ASSERT_GE(leaked, 100);
  std::string log;
  EXPECT_EQ(Run("ls /proc/self/fd", &log), 0);
  close(leaked);
  // 0, 1, 2, and the fd ls opens to read the directory.
  std::stringstream lines(log.substr(log.find('\n') + 1));
  std::string fd;
  int count = 0;
  while (std::getline(lines, fd)) {
    EXPECT_NE(fd, std::to_string(leaked)) << log;
    ++count;
  }
  EXPECT_LE(count, 4) << log;
}

TEST_F(SpawnTest, SignalsAreDefaultAndTheGroupIsItsOwn) {
  // kvd ignores SIGPIPE and blocks SIGTERM on its threads: neither may reach an engine.
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  struct sigaction before{};
  sigaction(SIGPIPE, &ignore, &before);
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &old);
  std::string log;
  int code = Run("grep -E '^(SigIgn|SigBlk)' /proc/self/status; "
                 "[ \"$(ps -o pgid= -p $$ | tr -d ' ')\" = \"$$\" ] && echo own-group; kill -TERM $$",
                 &log);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  sigaction(SIGPIPE, &before, nullptr);
  EXPECT_EQ(code, 128 + SIGTERM) << log;
  EXPECT_NE(log.find("SigBlk:\t0000000000000000"), std::string::npos) << log;
  // No ordinary signal (1-31) or real-time one an application uses (34+)
  // ignored. glibc's posix_spawn leaves its own two (32, 33) ignored.
  size_t at = log.find("SigIgn:\t");
  ASSERT_NE(at, std::string::npos) << log;
  uint64_t ignored = std::stoull(log.substr(at + 8, 16), nullptr, 16);
  EXPECT_EQ(ignored & ~(uint64_t{3} << 31), 0u) << log;
  if (std::system("command -v ps >/dev/null 2>&1") == 0) {
    EXPECT_NE(log.find("own-group"), std::string::npos) << log;
  }
}

TEST_F(SpawnTest, AMissingCommandIsAnErrorNamingIt) {
  InstanceConfig config;
  config.name = "gone";
  config.command = dir_ + "/no-such-binary";
  auto spawned = SpawnInstance(config, InstanceSite{"x", dir_}, dir_ + "/gone.log");
  ASSERT_FALSE(spawned.ok());
  EXPECT_NE(spawned.status().ToString().find("no-such-binary"), std::string::npos)
      << spawned.status().ToString();
}

}  // namespace
}  // namespace nanokv::kvd
