// Plans through the cluster master over loopback: a master in this process
// (MasterServer), a real kvd process as its node, ClusterClients on 1-16
// threads. For each thread count: an empty gRPC call (Ping: the floor of any
// call, measured in the same run), plans one per call (unbatched), and plans
// in batches of --batch keys per call. Every plan is made by the kvd's object
// store at the master's order, as in production; plans are revoked between
// runs (not timed). Then the index's memory per object at 1M and 10M objects
// (master/index/, filled directly). One JSON object on stdout.
//
//   master_plan_bench [--kvd PATH] [--seconds S] [--batch N] [--threads 1,2,4,8,16]
//                     [--index 1000000,10000000]
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "master/index/master_index.h"
#include "master/service/master_server.h"
#include "nanokv/cluster_client.h"

namespace nanokv::bench {
namespace {

struct Args {
  std::string kvd;
  double seconds = 2.0;
  size_t batch = 256;
  std::vector<int> threads = {1, 2, 4, 8, 16};
  std::vector<size_t> index_sizes = {1'000'000, 10'000'000};
};

std::vector<long long> Numbers(const std::string& text) {
  std::vector<long long> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

uint64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

enum class Mode { kPing, kOne, kBatch };

struct Run {
  double calls_per_s = 0;
  double plans_per_s = 0;
  std::vector<double> latency_us;  // per call
  double seconds = 0;
  bool store_filled = false;  // the run ended early: the node's store was full
};

// A plan refused because the node's store is full ends the run (not the
// bench): true, and the run is told to stop.
bool StoreFull(const Status& status, std::atomic<bool>* stop, std::atomic<bool>* full) {
  if (status.code() != Code::kResourceExhausted) return false;
  full->store(true);
  stop->store(true);
  return true;
}

// `threads` clients calling for `seconds`; plans are revoked after (untimed).
Run Measure(std::vector<std::unique_ptr<ClusterClient>>& clients, int threads, Mode mode, const Args& args,
            int round) {
  std::atomic<bool> go{false}, stop{false}, full{false};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(threads));
  std::vector<std::vector<ClusterPlan>> plans(static_cast<size_t>(threads));
  std::vector<uint64_t> made(static_cast<size_t>(threads), 0), calls(static_cast<size_t>(threads), 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ClusterClient& client = *clients[static_cast<size_t>(t)];
      size_t next = 0;
      while (!go.load()) std::this_thread::yield();
      while (!stop.load()) {
        const std::string prefix = "r" + std::to_string(round) + "t" + std::to_string(t) + ":";
        double start = NowMicros();
        if (mode == Mode::kPing) {
          if (!client.Ping().ok()) std::abort();
        } else if (mode == Mode::kOne) {
          auto plan = client.OpenForWrite(prefix + std::to_string(next++), 4096);
          if (!plan.ok() && StoreFull(plan.status(), &stop, &full)) break;
          if (!plan.ok()) {
            std::fprintf(stderr, "open: %s\n", plan.status().ToString().c_str());
            std::abort();
          }
          plans[static_cast<size_t>(t)].push_back(std::move(*plan));
          ++made[static_cast<size_t>(t)];
        } else {
          std::vector<WriteRequest> batch;
          for (size_t i = 0; i < args.batch; ++i) batch.push_back({prefix + std::to_string(next++), 4096, {}});
          for (auto& plan : client.BatchOpenForWrite(batch)) {
            if (!plan.ok() && StoreFull(plan.status(), &stop, &full)) continue;
            if (!plan.ok()) {
              std::fprintf(stderr, "batch open: %s\n", plan.status().ToString().c_str());
              std::abort();
            }
            plans[static_cast<size_t>(t)].push_back(std::move(*plan));
            ++made[static_cast<size_t>(t)];
          }
        }
        latencies[static_cast<size_t>(t)].push_back(NowMicros() - start);
        ++calls[static_cast<size_t>(t)];
      }
    });
  }
  double start = NowMicros();
  go.store(true);
  // Until the time is up, or the store is full (a fast machine fills it
  // within a run): the rate is over the time the plans took.
  while (!stop.load() && NowMicros() - start < args.seconds * 1e6) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop.store(true);
  double elapsed_s = (NowMicros() - start) / 1e6;
  for (auto& w : workers) w.join();
  Run run;
  uint64_t total_calls = 0, total_plans = 0;
  for (int t = 0; t < threads; ++t) {
    total_calls += calls[static_cast<size_t>(t)];
    total_plans += made[static_cast<size_t>(t)];
    run.latency_us.insert(run.latency_us.end(), latencies[static_cast<size_t>(t)].begin(),
                          latencies[static_cast<size_t>(t)].end());
    // Back to an empty store for the next run.
    auto& mine = plans[static_cast<size_t>(t)];
    for (size_t i = 0; i < mine.size(); i += 1024) {
      std::vector<ClusterPlan> part(mine.begin() + static_cast<long>(i),
                                    mine.begin() + static_cast<long>(std::min(mine.size(), i + 1024)));
      clients[0]->BatchRevoke(part);
    }
  }
  run.calls_per_s = static_cast<double>(total_calls) / elapsed_s;
  run.plans_per_s = static_cast<double>(total_plans) / elapsed_s;
  run.seconds = elapsed_s;
  run.store_filled = full.load();
  return run;
}

JsonObject Describe(const Run& run) {
  JsonObject o;
  o.Add("calls_per_s", run.calls_per_s);
  if (run.plans_per_s > 0) o.Add("plans_per_s", run.plans_per_s);
  o.Add("seconds", run.seconds);
  if (run.store_filled) o.Add("store_filled", true);
  o.AddPercentiles("call_us", run.latency_us);
  return o;
}

// The index alone, filled with `n` objects of one copy each: its own count
// of its memory, and the process's resident growth, per object.
JsonObject IndexMemory(size_t n) {
  uint64_t rss_before = RssBytes();
  uint64_t key_bytes = 0;
  auto index = std::make_unique<master::MasterIndex>();
  double start = NowMicros();
  for (size_t i = 0; i < n; ++i) {
    std::string key = "sess:" + std::to_string(i / 40) + ":kv:L" + std::to_string(i % 40);
    key_bytes += key.size();
    index->AddCopy(key, 1 << 20, master::CopyRef{static_cast<uint16_t>(i % 64), static_cast<uint8_t>(i % 8), 0,
                                                  static_cast<uint32_t>(i + 1)});
  }
  double insert_s = (NowMicros() - start) / 1e6;
  uint64_t counted = index->MemoryBytes();
  uint64_t rss = RssBytes() - rss_before;
  JsonObject o;
  o.Add("objects", static_cast<long long>(n))
      .Add("key_bytes_per_object", static_cast<double>(key_bytes) / static_cast<double>(n))
      .Add("index_bytes_per_object", static_cast<double>(counted) / static_cast<double>(n))
      .Add("index_bytes_per_object_key_bytes_aside",
           static_cast<double>(counted - key_bytes) / static_cast<double>(n))
      .Add("rss_bytes_per_object", static_cast<double>(rss) / static_cast<double>(n))
      .Add("inserts_per_s", static_cast<double>(n) / insert_s);
  return o;
}

int Main(int argc, char** argv) {
  LogToStderr("master_plan_bench");
  spdlog::set_level(spdlog::level::warn);
  Args args;
  args.kvd = DefaultKvd(argv[0]);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--kvd") args.kvd = value;
    else if (flag == "--seconds") args.seconds = std::stod(value);
    else if (flag == "--batch") args.batch = static_cast<size_t>(std::stoul(value));
    else if (flag == "--threads") {
      args.threads.clear();
      for (long long t : Numbers(value)) args.threads.push_back(static_cast<int>(t));
    } else if (flag == "--index") {
      args.index_sizes.clear();
      for (long long n : Numbers(value)) args.index_sizes.push_back(static_cast<size_t>(n));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  master::MasterConfig config;
  config.listen = "127.0.0.1:0";
  config.rebuild_window = std::chrono::milliseconds(0);
  config.id = "bench";
  auto server = master::MasterServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "master: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string address = (*server)->address();
  // One node: a kvd whose object store has room for every plan of a run.
  const std::string yaml = "backend: host\ncapacity: 4GiB\nhost_device_memory: 6GiB\nreserve_pages: 8\n"
                           "log_level: error\nobject_store:\n  size: 3GiB\n  max_objects: 4000000\n"
                           "  write_timeout: 10m\nmaster:\n  addresses: [\"" + address +
                           "\"]\n  node_id: bench-node\n  retry_interval: 50ms\n";
  BenchKvd kvd(args.kvd, "master_plan_bench", yaml, {});
  int max_threads = 1;
  for (int t : args.threads) max_threads = std::max(max_threads, t);
  std::vector<std::unique_ptr<ClusterClient>> clients;
  for (int t = 0; t < max_threads; ++t) {
    ClusterClientOptions options;
    options.masters = {address};
    options.node_id = "bench-client";
    auto client = ClusterClient::Connect(options);
    if (!client.ok()) return 1;
    clients.push_back(std::move(client).value());
  }
  auto alive = BenchKvd::Retry([&]() -> Result<bool> {
    auto status = clients[0]->Cluster();
    if (!status.ok()) return status.status();
    for (const auto& n : status->nodes) {
      if (n.state == "alive") return true;
    }
    return Status::Unavailable("no node yet");
  });
  if (!alive.ok()) {
    std::fprintf(stderr, "the kvd never registered: %s\n", alive.status().ToString().c_str());
    return 1;
  }
  JsonObject out;
  out.Add("bench", "master_plan_bench").Add("node", "one kvd process, host backend, over loopback gRPC");
  out.Add("cpus", static_cast<long long>(std::thread::hardware_concurrency()))
      .Add("seconds_per_run", args.seconds)
      .Add("batch", static_cast<long long>(args.batch));
  int round = 0;
  for (int threads : args.threads) {
    JsonObject row;
    row.Add("floor_empty_call", Describe(Measure(clients, threads, Mode::kPing, args, round++)));
    row.Add("unbatched", Describe(Measure(clients, threads, Mode::kOne, args, round++)));
    row.Add("batched", Describe(Measure(clients, threads, Mode::kBatch, args, round++)));
    out.Add("threads_" + std::to_string(threads), row);
  }
  JsonObject index;
  for (size_t n : args.index_sizes) index.Add(std::to_string(n), IndexMemory(n));
  out.Add("index_memory", index);
  clients.clear();
  (*server)->Stop();
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv::bench

int main(int argc, char** argv) { return nanokv::bench::Main(argc, argv); }
