// The page pool's hot path: one Allocate + Free pair, in ns, on 1, 2, 4 and 8
// threads (all granting to one tenant group, so a pair pops and pushes that
// group's free list), against its floor measured in the same run: a bare
// std::vector pop + push pair under the pool's SpinLock, under std::mutex (the lock the
// pool does not use: kept here so the choice stays measured) and with no
// lock at all. Each figure is the median of --runs runs of --pairs pairs
// (split across the threads). Prints one JSON object; asserts nothing.
//
//   page_pool_bench [--backend host|cuda|hip|auto] [--pairs N] [--runs R]
//
// With T threads, ns_per_pair is what one thread sees: wall time * T / pairs.
// Goal (the pool issue): <= 50 ns per pair on one thread.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench/bench_util.h"
#include "daemon/node/page_pool.h"
#include "daemon/node/page_types.h"
#include "gpu/backend.h"

namespace nanokv {
namespace {

constexpr double kGoalNsPerPair = 50;
constexpr int kThreadCounts[] = {1, 2, 4, 8};
constexpr size_t kPoolPages = 64;  // each thread holds at most one page at a time
constexpr size_t kReservePages = 16;
// Every pair grants to one group, so after the first round a pair is a pop
// and a push on that group's free list, as a kvd group reusing its pages.
constexpr kvd::GroupId kGroup = 0;

// Keeps the compiler from deleting a pop/push pair that has no visible effect.
template <typename T>
inline void DoNotOptimize(T& value) {
  asm volatile("" : "+r,m"(value) : : "memory");
}

struct Options {
  std::string backend = "host";
  long long pairs = 10'000'000;
  int runs = 5;
};

bool ParseArgs(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (arg == "--backend") {
      options->backend = value;
    } else if (arg == "--pairs") {
      options->pairs = std::atoll(value);
    } else if (arg == "--runs") {
      options->runs = std::atoi(value);
    } else {
      return false;
    }
  }
  return options->pairs > 0 && options->runs > 0;
}

// Runs body(pairs_per_thread) on `threads` threads started together and
// returns the wall time in ns per pair as one thread sees it.
double TimedRun(int threads, long long pairs, const std::function<void(long long)>& body) {
  const long long per_thread = pairs / threads;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(per_thread);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  const double wall_ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return wall_ns * threads / static_cast<double>(per_thread * threads);
}

struct Figure {
  double median = 0, min = 0, max = 0;
};

Figure Measure(int threads, const Options& options, const std::function<void(long long)>& body) {
  TimedRun(threads, options.pairs / 10, body);  // warm-up: caches, pages, thread stacks
  std::vector<double> samples;
  for (int r = 0; r < options.runs; ++r) samples.push_back(TimedRun(threads, options.pairs, body));
  std::sort(samples.begin(), samples.end());
  return {bench::Quantile(samples, 0.5), samples.front(), samples.back()};
}

// ns_per_pair (median, min, max) as one thread sees it, and the throughput
// of all threads together, which is what more threads than cores can show.
bench::JsonObject FigureJson(const Figure& f, int threads) {
  bench::JsonObject out;
  out.Add("ns_per_pair", f.median)
      .Add("min", f.min)
      .Add("max", f.max)
      .Add("mpairs_per_s", 1e3 * threads / f.median);
  return out;
}

// The floor: the same pop + push on a shared stack under `Lock`.
template <typename Lock>
Figure LockedVectorFloor(int threads, const Options& options) {
  struct alignas(64) Shared {
    Lock lock;
    std::vector<kvd::PageId> stack;
  } shared;
  for (kvd::PageId id = 0; id < kPoolPages; ++id) shared.stack.push_back(id);
  return Measure(threads, options, [&shared](long long pairs) {
    for (long long i = 0; i < pairs; ++i) {
      kvd::PageId id;
      {
        std::lock_guard<Lock> guard(shared.lock);
        id = shared.stack.back();
        shared.stack.pop_back();
      }
      DoNotOptimize(id);
      {
        std::lock_guard<Lock> guard(shared.lock);
        shared.stack.push_back(id);
      }
    }
  });
}

// The floor without a lock: each thread its own stack (nothing is shared).
Figure UnlockedVectorFloor(int threads, const Options& options) {
  return Measure(threads, options, [](long long pairs) {
    std::vector<kvd::PageId> stack;
    for (kvd::PageId id = 0; id < kPoolPages; ++id) stack.push_back(id);
    for (long long i = 0; i < pairs; ++i) {
      kvd::PageId id = stack.back();
      stack.pop_back();
      DoNotOptimize(id);
      stack.push_back(id);
    }
  });
}

int Main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: page_pool_bench [--backend host|cuda|hip|auto] [--pairs N] [--runs R]\n");
    return 2;
  }
  bench::LogToStderr("page_pool_bench");
  auto backend = gpu::OpenBackend(options.backend);
  if (!backend.ok()) {
    std::fprintf(stderr, "page_pool_bench: backend %s: %s\n", options.backend.c_str(),
                 backend.status().ToString().c_str());
    return 1;
  }
  auto info = (*backend)->GetDeviceInfo(0);
  if (!info.ok()) {
    std::fprintf(stderr, "page_pool_bench: device 0: %s\n", info.status().ToString().c_str());
    return 1;
  }
  kvd::PagePoolConfig config;
  config.page_bytes = info->granularity;
  config.capacity_bytes = kPoolPages * info->granularity;
  config.reserve_pages = kReservePages;
  auto pool = kvd::PagePool::Create(**backend, config);
  if (!pool.ok()) {
    std::fprintf(stderr, "page_pool_bench: %s\n", pool.status().ToString().c_str());
    return 1;
  }
  kvd::PagePool& p = **pool;

  std::atomic<long long> errors{0};
  auto pool_pairs = [&p, &errors](long long pairs) {
    long long local_errors = 0;
    for (long long i = 0; i < pairs; ++i) {
      Result<kvd::PageId> id = p.Allocate(kGroup);
      if (!id.ok()) [[unlikely]] {
        ++local_errors;
        continue;
      }
      Status freed = p.Free(*id);
      if (!freed.ok()) [[unlikely]] ++local_errors;
    }
    errors.fetch_add(local_errors);
  };

  bench::JsonObject pool_json, spin_json, mutex_json, nolock_json, ratio_json;
  double pool_1t = 0, spin_1t = 0, mutex_1t = 0, nolock_1t = 0;
  for (int threads : kThreadCounts) {
    const std::string key = std::to_string(threads);
    Figure pool_figure = Measure(threads, options, pool_pairs);
    Figure spin = LockedVectorFloor<kvd::SpinLock>(threads, options);
    Figure mutex = LockedVectorFloor<std::mutex>(threads, options);
    Figure nolock = UnlockedVectorFloor(threads, options);
    pool_json.Add(key, FigureJson(pool_figure, threads));
    spin_json.Add(key, FigureJson(spin, threads));
    mutex_json.Add(key, FigureJson(mutex, threads));
    nolock_json.Add(key, FigureJson(nolock, threads));
    bench::JsonObject ratios;
    ratios.Add("pool_over_spinlock_floor", pool_figure.median / spin.median)
        .Add("pool_over_nolock_floor", pool_figure.median / nolock.median)
        .Add("mutex_over_spinlock_floor", mutex.median / spin.median);
    ratio_json.Add(key, ratios);
    if (threads == 1) {
      pool_1t = pool_figure.median;
      spin_1t = spin.median;
      mutex_1t = mutex.median;
      nolock_1t = nolock.median;
    }
  }

  kvd::PagePool::Stats s = p.stats();
  Status invariants = p.CheckInvariants();
  bench::JsonObject stats_json;
  stats_json.Add("capacity_pages", static_cast<long long>(s.capacity_pages))
      .Add("created_pages", static_cast<long long>(s.created_pages))
      .Add("free_pages", static_cast<long long>(s.free_pages))
      .Add("group_free_pages", static_cast<long long>(s.group_free_pages))
      .Add("granted_pages", static_cast<long long>(s.granted_pages))
      .Add("reserve_pages", static_cast<long long>(s.reserve_pages))
      .Add("background_creates", static_cast<long long>(s.background_creates))
      .Add("sync_creates", static_cast<long long>(s.sync_creates))
      .Add("create_failures", static_cast<long long>(s.create_failures))
      .Add("invariants", invariants.ok() ? std::string("OK") : invariants.ToString());

  bench::JsonObject out;
  out.Add("bench", "page_pool")
      .Add("backend", std::string((*backend)->name()))
      .Add("device", info->name)
      .Add("hardware_threads", static_cast<long long>(std::thread::hardware_concurrency()))
      .Add("pairs_per_run", options.pairs)
      .Add("runs", static_cast<long long>(options.runs))
      .Add("statistic", "median of runs; ns_per_pair = wall * threads / pairs")
      .Add("pool_lock", "SpinLock (test-and-test-and-set, yield after 64 spins)")
      .Add("pool", pool_json)
      .Add("floor_spinlock", spin_json)
      .Add("floor_mutex", mutex_json)
      .Add("floor_nolock", nolock_json)
      .Add("ratios", ratio_json)
      .Add("pool_ns_per_pair_1t", pool_1t)
      .Add("pool_overhead_over_spinlock_floor_1t_ns", pool_1t - spin_1t)
      .Add("spinlock_faster_than_mutex_1t", spin_1t < mutex_1t)
      .Add("nolock_ns_per_pair_1t", nolock_1t)
      .Add("goal_ns_per_pair_1t", kGoalNsPerPair)
      .Add("goal_met", pool_1t <= kGoalNsPerPair)
      .Add("errors", errors.load())
      .Add("pool_stats", stats_json);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
