// kv_store_pages / kv_load_pages (kernels/kv_kernels.h) bandwidth against
// cudaMemcpy device-to-device of the same bytes, in the same run: objects of
// 0.5, 1, 4, 16 and 64 MiB spread over 2 MiB page segments taken in a shuffled
// order from one arena (as the object store's pages are), the last partial.
// Goal: store and load at >= 90% of the copy (..._over_memcpy >= 0.9).
//
//   object_pages_bench [--page-mib P] [--samples S]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/gpu_timer.h"
#include "kernels/kv_kernels.h"

namespace nanokv {
namespace {

using bench::CudaCheck;
using bench::StatusCheck;

int Main(int argc, char** argv) {
  bench::LogToStderr("object_pages_bench");
  int page_mib = 2, samples = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--page-mib")) page_mib = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--samples")) samples = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: object_pages_bench [--page-mib P] [--samples S]\n");
      return 2;
    }
  }
  if (page_mib < 1 || samples < 1) {
    std::fprintf(stderr, "object_pages_bench: --page-mib and --samples must be positive\n");
    return 2;
  }
  bench::RequireGpu("object_pages");

  const std::uint64_t page = static_cast<std::uint64_t>(page_mib) << 20;
  const std::uint64_t max_object = 64ull << 20;
  const std::uint64_t n_pages = 2 * max_object / page;  // arena: twice the largest object
  void *arena = nullptr, *buf = nullptr, *copy_dst = nullptr;
  CudaCheck(cudaMalloc(&arena, n_pages * page), "cudaMalloc");
  CudaCheck(cudaMalloc(&buf, max_object), "cudaMalloc");
  CudaCheck(cudaMalloc(&copy_dst, max_object), "cudaMalloc");
  CudaCheck(cudaMemset(buf, 1, max_object), "cudaMemset");
  std::vector<std::uint64_t> order(n_pages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  cudaStream_t stream;
  CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  bench::JsonObject json;
  json.Add("bench", "object_pages")
      .Add("device", bench::DeviceName())
      .Add("page_bytes", static_cast<long long>(page))
      .Add("samples", static_cast<long long>(samples))
      .Add("unit", "GB/s");
  double worst = 1e9;
  for (double mib : {0.5, 1.0, 4.0, 16.0, 64.0}) {
    const auto bytes = static_cast<std::uint64_t>(mib * (1 << 20));
    std::vector<kernels::Segment> segs;
    for (std::uint64_t off = 0, i = 0; off < bytes; off += page, ++i) {
      segs.push_back({static_cast<char*>(arena) + order[i] * page, std::min(page, bytes - off)});
    }
    auto store = [&](cudaStream_t s) {
      StatusCheck(kernels::StorePages(buf, segs.data(), segs.size(), s), "StorePages");
    };
    auto load = [&](cudaStream_t s) {
      StatusCheck(kernels::LoadPages(buf, segs.data(), segs.size(), s), "LoadPages");
    };
    auto copy = [&](cudaStream_t s) {
      CudaCheck(cudaMemcpyAsync(copy_dst, buf, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    };
    const int reps = bench::RepsFor(static_cast<double>(bytes));
    bench::PairTiming ts = bench::TimePair(store, copy, stream, reps, samples);
    bench::PairTiming tl = bench::TimePair(load, copy, stream, reps, samples);
    const double store_ratio = ts.b_us / ts.a_us, load_ratio = tl.b_us / tl.a_us;
    worst = std::min({worst, store_ratio, load_ratio});
    bench::JsonObject r;
    r.Add("segments", static_cast<long long>(segs.size()))
        .Add("store_GBps", bench::GBps(static_cast<double>(bytes), ts.a_us))
        .Add("load_GBps", bench::GBps(static_cast<double>(bytes), tl.a_us))
        .Add("memcpy_GBps", bench::GBps(static_cast<double>(bytes), ts.b_us))
        .Add("store_over_memcpy", store_ratio)
        .Add("load_over_memcpy", load_ratio)
        .Add("store_us", ts.a_us)
        .Add("load_us", tl.a_us)
        .Add("memcpy_us", ts.b_us);
    char key[32];
    std::snprintf(key, sizeof key, "%gMiB", mib);
    json.Add(key, r);
  }
  json.Add("goal_over_memcpy", 0.9).Add("goal_met", worst >= 0.9);
  CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::printf("%s\n", json.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
