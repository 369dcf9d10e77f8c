// GPU timing for the kernel benchmarks: cudaEvents around `reps` back-to-back
// launches on one stream, a warmup, the median of the samples. The kernel and
// its cudaMemcpy floor are sampled in alternation so both see the same clocks.
#ifndef NANOKV_BENCH_GPU_TIMER_H_
#define NANOKV_BENCH_GPU_TIMER_H_

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "bench/bench_util.h"
#include "nanokv/status.h"

namespace nanokv::bench {

inline void CudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorName(e));
    std::exit(1);
  }
}

inline void StatusCheck(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// Exits 0 with a JSON line saying why when there is no GPU: a skip, not a failure.
inline void RequireGpu(const char* bench_name) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    JsonObject json;
    json.Add("bench", bench_name).Add("skipped", e != cudaSuccess ? cudaGetErrorName(e) : "no device");
    std::printf("%s\n", json.str().c_str());
    std::exit(0);
  }
}

inline std::string DeviceName() {
  cudaDeviceProp prop{};
  CudaCheck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  return prop.name;
}

// Median microseconds per op of `a` and of `b`, each timed as `reps` ops
// between two events, `samples` times, alternating a and b.
struct PairTiming {
  double a_us = 0, b_us = 0;
};
inline PairTiming TimePair(const std::function<void(cudaStream_t)>& a,
                           const std::function<void(cudaStream_t)>& b, cudaStream_t stream,
                           int reps, int samples, int warmup = 3) {
  cudaEvent_t start, stop;
  CudaCheck(cudaEventCreate(&start), "cudaEventCreate");
  CudaCheck(cudaEventCreate(&stop), "cudaEventCreate");
  auto time_one = [&](const std::function<void(cudaStream_t)>& op) {
    CudaCheck(cudaEventRecord(start, stream), "cudaEventRecord");
    for (int r = 0; r < reps; ++r) op(stream);
    CudaCheck(cudaEventRecord(stop, stream), "cudaEventRecord");
    CudaCheck(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    CudaCheck(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return 1000.0 * ms / reps;
  };
  for (int w = 0; w < warmup; ++w) {
    time_one(a);
    time_one(b);
  }
  std::vector<double> sa, sb;
  for (int s = 0; s < samples; ++s) {
    sa.push_back(time_one(a));
    sb.push_back(time_one(b));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return {Quantile(sa, 0.5), Quantile(sb, 0.5)};
}

// Enough back-to-back ops to move ~256 MiB per sample, so launch gaps and
// event resolution do not dominate small sizes.
inline int RepsFor(double bytes) {
  int reps = static_cast<int>((256.0 * (1 << 20)) / bytes);
  return reps < 1 ? 1 : reps > 1000 ? 1000 : reps;
}

inline double GBps(double bytes, double us) { return bytes / (us * 1e3); }

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_GPU_TIMER_H_
