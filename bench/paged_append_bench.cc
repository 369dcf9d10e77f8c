// Paged K/V append (kernels/kv_kernels.h) bandwidth against cudaMemcpy
// device-to-device of the same bytes, measured in the same run: the K and V
// rows of N tokens written to random slots of one layer's cache, both layouts,
// fp16 (bf16 takes the same byte-copy path) and FP8 (bytes = its fp16 input).
// Goal: the 16-bit append at >= 85% of the copy (append_over_memcpy >= 0.85).
//
//   paged_append_bench [--tokens N] [--heads H] [--head-dim D] [--block-size B] [--samples S]
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

void* DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  CudaCheck(cudaMalloc(&p, bytes), "cudaMalloc");
  CudaCheck(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}

int Main(int argc, char** argv) {
  bench::LogToStderr("paged_append_bench");
  std::int64_t tokens = 16384, heads = 8, head_dim = 128, block_size = 16;
  int samples = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--heads")) heads = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--head-dim")) head_dim = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--block-size")) block_size = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--samples")) samples = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: paged_append_bench [--tokens N] [--heads H] [--head-dim D] "
                           "[--block-size B] [--samples S]\n");
      return 2;
    }
  }
  if (tokens < 1 || heads < 1 || head_dim < 1 || block_size < 1 || samples < 1) {
    std::fprintf(stderr, "paged_append_bench: every size must be positive\n");
    return 2;
  }
  bench::RequireGpu("paged_append");

  // The cache has twice the slots the tokens need; tokens land on a random half.
  const std::int64_t blocks = (2 * tokens + block_size - 1) / block_size;
  const std::int64_t row = heads * head_dim;
  const size_t in_bytes = static_cast<size_t>(tokens * row * 2);  // per K or V
  const size_t cache_elems = static_cast<size_t>(blocks * block_size * row);
  std::vector<std::int64_t> slots(static_cast<size_t>(blocks * block_size));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(1));
  slots.resize(static_cast<size_t>(tokens));

  void* key = DeviceAlloc(in_bytes);
  void* value = DeviceAlloc(in_bytes);
  void* kc = DeviceAlloc(cache_elems * 2);
  void* vc = DeviceAlloc(cache_elems * 2);
  void* scales = DeviceAlloc(static_cast<size_t>(blocks * block_size * heads) * 4 * 2);
  void* copy_dst = DeviceAlloc(2 * in_bytes);
  void* copy_src = DeviceAlloc(2 * in_bytes);
  auto* d_slots = static_cast<std::int64_t*>(DeviceAlloc(slots.size() * 8));
  CudaCheck(cudaMemcpy(d_slots, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t stream;
  CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  kernels::AppendInput in;
  in.key = key;
  in.value = value;
  in.key_token_stride = in.value_token_stride = row;
  in.slot_mapping = d_slots;
  in.num_tokens = tokens;
  in.dtype = kernels::KvDType::kFloat16;
  const double bytes = 2.0 * static_cast<double>(in_bytes);  // K and V
  auto memcpy_op = [&](cudaStream_t s) {
    CudaCheck(cudaMemcpyAsync(copy_dst, copy_src, 2 * in_bytes, cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync");
  };
  const int reps = bench::RepsFor(bytes);

  bench::JsonObject json;
  json.Add("bench", "paged_append")
      .Add("device", bench::DeviceName())
      .Add("tokens", static_cast<long long>(tokens))
      .Add("heads", static_cast<long long>(heads))
      .Add("head_dim", static_cast<long long>(head_dim))
      .Add("block_size", static_cast<long long>(block_size))
      .Add("bytes", bytes)
      .Add("samples", static_cast<long long>(samples))
      .Add("reps_per_sample", static_cast<long long>(reps))
      .Add("unit", "GB/s");
  double worst_16bit = 1e9;
  for (bool head_major : {false, true}) {
    const kernels::PagedLayout layout =
        head_major ? kernels::PagedLayout::HeadMajor(blocks, heads, block_size, head_dim)
                   : kernels::PagedLayout::BlockMajor(blocks, heads, block_size, head_dim);
    auto fp16 = [&](cudaStream_t s) { StatusCheck(kernels::PagedAppend(in, layout, kc, vc, s), "PagedAppend"); };
    auto fp8 = [&](cudaStream_t s) {
      auto* ks = static_cast<float*>(scales);
      StatusCheck(kernels::PagedAppendFp8(in, layout, static_cast<std::uint8_t*>(kc),
                                          static_cast<std::uint8_t*>(vc), ks,
                                          ks + blocks * block_size * heads, s),
                  "PagedAppendFp8");
    };
    bench::PairTiming t16 = bench::TimePair(fp16, memcpy_op, stream, reps, samples);
    bench::PairTiming t8 = bench::TimePair(fp8, memcpy_op, stream, reps, samples);
    const double ratio16 = t16.b_us / t16.a_us;
    worst_16bit = std::min(worst_16bit, ratio16);
    bench::JsonObject r;
    r.Add("fp16_append_GBps", bench::GBps(bytes, t16.a_us))
        .Add("memcpy_GBps", bench::GBps(bytes, t16.b_us))
        .Add("fp16_append_over_memcpy", ratio16)
        .Add("fp8_append_GBps", bench::GBps(bytes, t8.a_us))
        .Add("fp8_append_over_memcpy", t8.b_us / t8.a_us)
        .Add("fp16_append_us", t16.a_us)
        .Add("memcpy_us", t16.b_us);
    json.Add(head_major ? "head_major" : "block_major", r);
  }
  json.Add("goal_append_over_memcpy", 0.85).Add("goal_met", worst_16bit >= 0.85);
  CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::printf("%s\n", json.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
