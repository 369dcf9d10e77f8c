// A private kvd with an object store for the object benchmarks: started on
// its own socket and run directory, stopped (SIGTERM, wait) and cleaned up
// when the BenchKvd goes away.
#ifndef NANOKV_BENCH_BENCH_KVD_H_
#define NANOKV_BENCH_BENCH_KVD_H_

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nanokv/object_store.h"

extern char** environ;

namespace nanokv::bench {

// kvd next to the benchmark binary, else ../daemon/kvd (the build tree).
inline std::string DefaultKvd(const char* argv0) {
  std::filesystem::path self = std::filesystem::absolute(argv0).parent_path();
  for (auto candidate : {self / "kvd", self / ".." / "daemon" / "kvd"}) {
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return "kvd";
}

class BenchKvd {
 public:
  // Exits the process with a message when kvd cannot be started.
  BenchKvd(const std::string& kvd_path, const std::string& backend, const std::string& name,
           uint64_t capacity_bytes, const std::string& store_size, std::vector<std::string> extra = {}) {
    char dir_template[] = "/tmp/nanokv-bench-XXXXXX";
    run_dir_ = mkdtemp(dir_template);
    setenv("NANOKV_RUN_DIR", run_dir_.c_str(), 1);
    ipc_ = name + "_" + std::to_string(getpid());
    std::string config = run_dir_ + "/kvd.yaml";
    std::ofstream(config) << "object_store:\n  size: " << store_size << "\n";
    std::vector<std::string> args = {kvd_path, "--config", config, "--backend", backend,
                                     "--ipc-name", ipc_, "--capacity", std::to_string(capacity_bytes),
                                     "--host-device-memory", std::to_string(capacity_bytes + (64u << 20)),
                                     "--log-level", "warn"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
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

  // Retries while kvd starts (up to 10 s).
  Result<std::unique_ptr<ObjectStore>> OpenStore(ObjectStoreOptions options) const {
    options.ipc_name = ipc_;
    Result<std::unique_ptr<ObjectStore>> opened = Status::Unavailable("not tried");
    for (int i = 0; i < 500 && !opened.ok(); ++i) {
      opened = ObjectStore::Open(options);
      if (!opened.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return opened;
  }

 private:
  pid_t pid_ = -1;
  std::string run_dir_;
  std::string ipc_;
};

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_BENCH_KVD_H_
