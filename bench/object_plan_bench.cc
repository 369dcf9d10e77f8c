// The object store's plan round trip through kvd's local socket, against the
// floor measured in the same run on the same socket.
//
//   plan:   OpenForWrite + Commit of a fresh key (two request round trips:
//           kvd allocates a header slot and payload, writes the header,
//           answers the plan; then flips READY). The Remove after each is not
//           timed (it keeps the store from filling).
//   floor:  one round trip that does no store work: GetLocation of a key
//           that does not exist (decode, one hash lookup, an Error reply).
//           The plan costs at least two of these.
//
// It starts its own kvd (--kvd, default next to this binary, else
// ../daemon/kvd) with an object store on a private socket, and prints one
// JSON object.
//
//   object_plan_bench [--backend auto|cuda|host] [--ops 20000] [--bytes 1048576]
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "nanokv/object_store.h"

extern char** environ;

namespace nanokv {
namespace {

using bench::NowMicros;

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "object_plan_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

std::string DefaultKvd(const char* argv0) {
  std::filesystem::path self = std::filesystem::absolute(argv0).parent_path();
  for (auto candidate : {self / "kvd", self / ".." / "daemon" / "kvd"}) {
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return "kvd";
}

struct Kvd {
  pid_t pid = -1;
  ~Kvd() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

int Main(int argc, char** argv) {
  bench::LogToStderr("object_plan_bench");
  std::string backend_name = "auto", kvd_path = DefaultKvd(argv[0]);
  size_t ops = 20000, bytes = 1 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--backend") backend_name = argv[i + 1];
    else if (flag == "--kvd") kvd_path = argv[i + 1];
    else if (flag == "--ops") ops = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: object_plan_bench [--backend NAME] [--kvd PATH] [--ops N] [--bytes B]\n");
      return 2;
    }
  }
  if (ops == 0 || bytes == 0 || bytes > (32u << 20)) {
    std::fprintf(stderr, "object_plan_bench: --ops > 0, --bytes in [1, 32 MiB]\n");
    return 2;
  }
  char dir_template[] = "/tmp/nanokv-bench-XXXXXX";
  std::string run_dir = mkdtemp(dir_template);
  setenv("NANOKV_RUN_DIR", run_dir.c_str(), 1);
  std::string ipc = "object_plan_bench_" + std::to_string(getpid());
  std::string config = run_dir + "/kvd.yaml";
  std::ofstream(config) << "object_store:\n  size: 64MiB\n";
  std::vector<std::string> args = {kvd_path, "--config", config, "--backend", backend_name,
                                   "--ipc-name", ipc, "--capacity", std::to_string(96u << 20),
                                   "--host-device-memory", std::to_string(256u << 20),
                                   "--log-level", "warn"};
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  Kvd kvd;
  if (posix_spawn(&kvd.pid, kvd_path.c_str(), nullptr, nullptr, argp.data(), environ) != 0) {
    std::fprintf(stderr, "object_plan_bench: cannot start kvd at %s\n", kvd_path.c_str());
    return 1;
  }
  ObjectStoreOptions options;
  options.ipc_name = ipc;
  options.backend = backend_name;
  Result<std::unique_ptr<ObjectStore>> opened = Status::Unavailable("not tried");
  for (int i = 0; i < 500 && !opened.ok(); ++i) {
    opened = ObjectStore::Open(options);
    if (!opened.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!opened.ok()) Die("open the object store", opened.status());
  ObjectStore& store = **opened;

  std::vector<double> plan, floor;
  plan.reserve(ops);
  floor.reserve(ops);
  size_t warmup = ops / 10 + 1;
  for (size_t i = 0; i < ops + warmup; ++i) {
    std::string key = "bench:" + std::to_string(i);
    // Interleaved, so both see the same machine state.
    double t0 = NowMicros();
    auto missing = store.GetLocation("bench:missing");
    double t1 = NowMicros();
    if (missing.status().code() != Code::kNotFound) Die("floor request", missing.status());
    auto p = store.OpenForWrite(key, bytes, 0);
    if (!p.ok()) Die("OpenForWrite", p.status());
    Status committed = store.Commit(key, p->epoch);
    double t2 = NowMicros();
    if (!committed.ok()) Die("Commit", committed);
    Status removed = store.Remove(key);
    if (!removed.ok()) Die("Remove", removed);
    if (i >= warmup) {
      floor.push_back(t1 - t0);
      plan.push_back(t2 - t1);
    }
  }
  double plan_p50 = bench::Quantile(plan, 0.5), floor_p50 = bench::Quantile(floor, 0.5);
  bench::JsonObject out;
  out.Add("bench", "object_plan")
      .Add("backend", backend_name)
      .Add("object_bytes", static_cast<long long>(bytes))
      .AddPercentiles("plan_open_commit_us", plan)
      .AddPercentiles("floor_round_trip_us", floor)
      .Add("plan_over_two_floors", plan_p50 / (2 * floor_p50))
      .Add("goal_p50_us", 20.0)
      .Add("goal_met", plan_p50 <= 20.0);
  std::printf("%s\n", out.str().c_str());
  std::filesystem::remove_all(run_dir);
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
