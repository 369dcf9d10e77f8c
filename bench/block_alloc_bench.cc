// Block allocate + free pairs per second: cache::BlockAllocator (best fit
// over an ordered index of free runs) against its floor measured in the same
// run, the linear scan of the CortexStream seed (a bit per block, first fit,
// scanning from block 0 on every allocation; ../shared/seeds/001_*.txt),
// written out faithfully below. Neither takes a lock (the seed's allocator
// takes a mutex; our KVCache takes one around ours: either way one
// uncontended lock, the same for both).
//
// Workload, per size (2048 and 65536 blocks) and starting fill (50%, 90%):
// the allocator is filled to the fill with runs of a realistic mix of sizes
// (60% one block: decode growth; 25% 2-8; 15% 16-128: prefills), then each
// pair allocates a run of a size from the same mix and frees random live runs
// until the fill is back at its start (about one free per allocation), so
// free space fragments as it would in an engine. Both allocators see the
// same sizes and victims. Failed allocations (no run long enough) are
// reported. Each figure is the median of --runs runs of at least --seconds
// of thread CPU time each. Prints one JSON object; asserts nothing.
//
//   block_alloc_bench [--runs R] [--seconds S] [--seed N]
#include <algorithm>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "libkv/cache/block_allocator.h"

namespace nanokv {
namespace {

// The seed's KVBlockAllocator, allocation and free as it wrote them.
class LinearScanAllocator {
 public:
  explicit LinearScanAllocator(size_t total) : free_list_(total, true), total_(total) {}

  // Returns the start, or -1 (the seed's invalid handle).
  int Allocate(int blocks_needed) {
    int start = FindContiguousFreeRegion(blocks_needed);
    if (start < 0) return -1;
    for (int i = start; i < start + blocks_needed; ++i) free_list_[i] = false;
    return start;
  }
  void Free(int start, int count) {
    for (int i = start; i < start + count; ++i) free_list_[i] = true;
  }

 private:
  int FindContiguousFreeRegion(int blocks_needed) const {
    int contiguous = 0;
    int start = -1;
    for (size_t i = 0; i <= total_; ++i) {
      if (i < total_ && free_list_[i]) {
        if (contiguous == 0) start = static_cast<int>(i);
        ++contiguous;
      } else {
        if (contiguous >= blocks_needed) return start;
        contiguous = 0;
      }
    }
    return -1;
  }

  std::vector<bool> free_list_;  // true = free, as the seed's bitset
  size_t total_;
};

struct Options {
  int runs = 3;
  double seconds = 0.5;
  uint64_t seed = 7;
};

bool ParseArgs(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (arg == "--runs") {
      options->runs = std::atoi(value);
    } else if (arg == "--seconds") {
      options->seconds = std::atof(value);
    } else if (arg == "--seed") {
      options->seed = std::strtoull(value, nullptr, 10);
    } else {
      return false;
    }
  }
  return options->runs > 0 && options->seconds > 0;
}

uint32_t RunSize(std::mt19937_64& rng) {
  uint32_t pick = rng() % 100;
  if (pick < 60) return 1;
  if (pick < 85) return 2 + rng() % 7;
  return 16 + rng() % 113;
}

// The ops both allocators replay: the prefill's sizes, then per pair a size
// and a victim (an index into the live runs, taken modulo their count).
// `pairs` must be a power of two.
struct Script {
  std::vector<uint32_t> fill_sizes;
  std::vector<uint32_t> sizes;
  std::vector<uint64_t> victims;
};

Script MakeScript(size_t total, double fill, size_t pairs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Script s;
  size_t filled = 0;
  while (filled < fill * static_cast<double>(total)) {
    uint32_t size = RunSize(rng);
    s.fill_sizes.push_back(size);
    filled += size;
  }
  s.sizes.resize(pairs);
  s.victims.resize(pairs);
  for (size_t i = 0; i < pairs; ++i) {
    s.sizes[i] = RunSize(rng);
    s.victims[i] = rng();
  }
  return s;
}

struct Outcome {
  double pairs_per_s = 0;
  long long pairs = 0;
  long long frees = 0;
  long long failures = 0;
  double end_fill = 0;
  double end_fragmentation = 0;  // BlockAllocator only
};

// Adapters with one interface over the two allocators.
struct Ours {
  cache::BlockAllocator a;
  explicit Ours(size_t total) : a(std::move(cache::BlockAllocator::Create(total)).value()) {}
  bool Allocate(uint32_t n, cache::BlockRun* run) {
    Result<cache::BlockRun> got = a.Allocate(n);
    if (!got.ok()) return false;
    *run = *got;
    return true;
  }
  void Free(cache::BlockRun run) { (void)a.Free(run); }
  size_t used() const { return a.used_blocks(); }
  double fragmentation() const { return a.fragmentation(); }
};

struct Linear {
  LinearScanAllocator a;
  size_t used_blocks = 0;
  explicit Linear(size_t total) : a(total) {}
  bool Allocate(uint32_t n, cache::BlockRun* run) {
    int start = a.Allocate(static_cast<int>(n));
    if (start < 0) return false;
    *run = {static_cast<cache::BlockId>(start), n};
    used_blocks += n;
    return true;
  }
  void Free(cache::BlockRun run) {
    a.Free(static_cast<int>(run.first), static_cast<int>(run.count));
    used_blocks -= run.count;
  }
  size_t used() const { return used_blocks; }
  double fragmentation() const { return -1; }
};

// CPU time of this thread: the benchmark box is shared, and wall time would
// count the time other processes had the core.
double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

template <typename Allocator>
Outcome RunOnce(size_t total, double fill, const Script& script, double seconds) {
  Allocator allocator(total);
  std::vector<cache::BlockRun> live;
  for (uint32_t size : script.fill_sizes) {
    cache::BlockRun run;
    if (allocator.Allocate(size, &run)) live.push_back(run);
  }
  const auto target = static_cast<size_t>(fill * static_cast<double>(total));
  Outcome out;
  long long failures = 0, frees = 0;
  size_t i = 0, v = 0;
  const double start = ThreadCpuSeconds();
  double elapsed = 0;
  constexpr size_t kChunk = 256;  // read the clock once per chunk of pairs
  const size_t mask = script.sizes.size() - 1;  // a power of two: the script repeats
  for (;;) {
    for (size_t end = i + kChunk; i < end; ++i) {
      cache::BlockRun fresh;
      if (allocator.Allocate(script.sizes[i & mask], &fresh)) {
        live.push_back(fresh);
      } else {
        ++failures;
      }
      // Free random live runs until the fill is back at the target: about
      // one free per allocation, and the fill stays where it started.
      while (allocator.used() > target && !live.empty()) {
        size_t victim = script.victims[v++ & mask] % live.size();
        allocator.Free(live[victim]);
        live[victim] = live.back();
        live.pop_back();
        ++frees;
      }
    }
    elapsed = ThreadCpuSeconds() - start;
    if (elapsed >= seconds) break;
  }
  out.pairs = static_cast<long long>(i);
  out.pairs_per_s = static_cast<double>(i) / elapsed;
  out.frees = frees;
  out.failures = failures;
  out.end_fill = static_cast<double>(allocator.used()) / static_cast<double>(total);
  out.end_fragmentation = allocator.fragmentation();
  return out;
}

template <typename Allocator>
Outcome Measure(size_t total, double fill, const Script& script, const Options& options) {
  std::vector<Outcome> outcomes;
  for (int r = 0; r < options.runs; ++r)
    outcomes.push_back(RunOnce<Allocator>(total, fill, script, options.seconds));
  std::sort(outcomes.begin(), outcomes.end(),
            [](const Outcome& a, const Outcome& b) { return a.pairs_per_s < b.pairs_per_s; });
  return outcomes[outcomes.size() / 2];
}

bench::JsonObject OutcomeJson(const Outcome& o) {
  bench::JsonObject j;
  j.Add("pairs_per_s", o.pairs_per_s)
      .Add("ns_per_pair", 1e9 / o.pairs_per_s)
      .Add("pairs_timed", o.pairs)
      .Add("frees", o.frees)
      .Add("failed_allocations", o.failures)
      .Add("end_fill", o.end_fill);
  if (o.end_fragmentation >= 0) j.Add("end_fragmentation", o.end_fragmentation);
  return j;
}

int Main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, &options)) {
    std::fprintf(stderr, "usage: block_alloc_bench [--runs R] [--seconds S] [--seed N]\n");
    return 2;
  }
  bench::LogToStderr("block_alloc_bench");
  bench::JsonObject cases;
  for (size_t total : {size_t{2048}, size_t{65536}}) {
    for (double fill : {0.5, 0.9}) {
      // A script of 2^20 pairs, replayed as often as --seconds allows.
      const size_t pairs = size_t{1} << 20;
      Script script = MakeScript(total, fill, pairs, options.seed + total);
      Outcome ours = Measure<Ours>(total, fill, script, options);
      Outcome linear = Measure<Linear>(total, fill, script, options);
      bench::JsonObject c;
      c.Add("blocks", static_cast<long long>(total))
          .Add("start_fill", fill)
          .Add("block_allocator", OutcomeJson(ours))
          .Add("floor_linear_scan", OutcomeJson(linear))
          .Add("speedup_over_linear_scan", ours.pairs_per_s / linear.pairs_per_s);
      cases.Add(std::to_string(total) + "_blocks_" + std::to_string(static_cast<int>(fill * 100)) +
                    "pct",
                c);
    }
  }
  bench::JsonObject out;
  out.Add("bench", "block_alloc")
      .Add("statistic", "median of runs, thread CPU time; a pair = allocate a run + free random "
                        "live runs back to the fill")
      .Add("run_sizes", "60% 1 block, 25% 2-8, 15% 16-128")
      .Add("runs", static_cast<long long>(options.runs))
      .Add("seconds_per_run", options.seconds)
      .Add("seed", static_cast<long long>(options.seed))
      .Add("cases", cases);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
