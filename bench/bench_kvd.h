// A private kvd for the benchmarks that talk to one: started on its own
// socket and run directory, stopped (SIGTERM, wait) and cleaned up when the
// BenchKvd goes away.
#ifndef NANOKV_BENCH_BENCH_KVD_H_
#define NANOKV_BENCH_BENCH_KVD_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nanokv/status.h"

extern char** environ;

namespace nanokv::bench {

// kvd next to the benchmark binary, else ../entry/kvd (the build tree).
inline std::string DefaultKvd(const char* argv0) {
  std::filesystem::path self = std::filesystem::absolute(argv0).parent_path();
  for (auto candidate : {self / "kvd", self / ".." / "entry" / "kvd"}) {
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return "kvd";
}

class BenchKvd {
 public:
  // Runs `kvd_path --ipc-name <name>_<pid> [--config <yaml written to the
  // run dir>] args...`; exits the process with a message when it cannot.
  BenchKvd(const std::string& kvd_path, const std::string& name, const std::string& config_yaml,
           std::vector<std::string> args) {
    char dir_template[] = "/tmp/nanokv-bench-XXXXXX";
    run_dir_ = mkdtemp(dir_template);
    setenv("NANOKV_RUN_DIR", run_dir_.c_str(), 1);
    ipc_ = name + "_" + std::to_string(getpid());
    std::vector<std::string> argv = {kvd_path, "--ipc-name", ipc_};
    if (!config_yaml.empty()) {
      std::string config = run_dir_ + "/kvd.yaml";
      std::ofstream(config) << config_yaml;
      argv.insert(argv.end(), {"--config", config});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> argp;
    for (auto& a : argv) argp.push_back(a.data());
    argp.push_back(nullptr);
    if (posix_spawn(&pid_, kvd_path.c_str(), nullptr, nullptr, argp.data(), environ) != 0) {
      std::fprintf(stderr, "%s: cannot start kvd at %s\n", name.c_str(), kvd_path.c_str());
      std::exit(1);
    }
  }
  ~BenchKvd() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(run_dir_);
  }
  BenchKvd(const BenchKvd&) = delete;
  BenchKvd& operator=(const BenchKvd&) = delete;

  const std::string& ipc_name() const { return ipc_; }
  pid_t pid() const { return pid_; }
  // kvd's CPU time so far (user + system, /proc/<pid>/stat), in seconds;
  // -1 when unreadable. What busy polling costs is this over wall time.
  double CpuSeconds() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return -1;
    const size_t close_paren = line.rfind(')');  // the name may hold spaces
    if (close_paren == std::string::npos) return -1;
    std::istringstream fields(line.substr(close_paren + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  // Calls `connect` (a Result) until it succeeds while kvd starts, up to 10 s.
  template <typename Connect>
  static auto Retry(Connect connect) {
    auto result = connect();
    for (int i = 0; i < 500 && !result.ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      result = connect();
    }
    return result;
  }

 private:
  pid_t pid_ = -1;
  std::string run_dir_;
  std::string ipc_;
};

// `kvd --role master` as its own process, as in production (a master in
// the benchmark's process shares its gRPC threads with the clients there),
// on a free loopback port, its log in a file of its run directory.
class BenchMaster {
 public:
  BenchMaster(const std::string& kvd_path, std::vector<std::string> args) {
    char dir_template[] = "/tmp/nanokv-bench-master-XXXXXX";
    run_dir_ = mkdtemp(dir_template);
    log_ = run_dir_ + "/master.log";
    std::vector<std::string> argv = {kvd_path, "--role", "master", "--id", "bench", "--listen", "127.0.0.1:0",
                                     "--rebuild-window", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> argp;
    for (auto& a : argv) argp.push_back(a.data());
    argp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int spawned = posix_spawn(&pid_, kvd_path.c_str(), &actions, nullptr, argp.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      std::fprintf(stderr, "cannot start the master at %s\n", kvd_path.c_str());
      std::exit(1);
    }
    // "serving on 127.0.0.1:PORT" in its log once it listens.
    for (int i = 0; i < 1000 && address_.empty(); ++i) {
      std::ifstream in(log_);
      std::stringstream text;
      text << in.rdbuf();
      const std::string log = text.str();
      const size_t at = log.find("serving on ");
      if (at != std::string::npos) {
        const size_t from = at + std::string("serving on ").size();
        address_ = log.substr(from, log.find(' ', from) - from);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (address_.empty()) {
      std::fprintf(stderr, "the master never said where it serves (log %s)\n", log_.c_str());
      std::exit(1);
    }
  }
  ~BenchMaster() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(run_dir_);
  }
  BenchMaster(const BenchMaster&) = delete;
  BenchMaster& operator=(const BenchMaster&) = delete;

  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  std::string run_dir_;
  std::string log_;
  std::string address_;
};

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_BENCH_KVD_H_
