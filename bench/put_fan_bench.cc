// The put kernel (kv_put_object) across NVLink, one stream against a fan of
// streams: L objects of S bytes from a buffer on GPU 0 into memory of GPU 1,
// each put beginning and publishing on its own header there, on 1 stream
// and on 2, 4 and 8 forked from it (kernels::ForkStreams, as a batch put
// does); the floor in the same run is cudaMemcpyPeer of the same bytes.
// Needs two GPUs with peer access; prints {"skipped": why} otherwise.
//
//   put_fan_bench [--objects 128] [--mib 8] [--reps 5]
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/kv_kernels.h"

namespace nanokv::bench {
namespace {

void Check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "put_fan_bench: %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

void Check(const Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "put_fan_bench: %s: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

int Main(int argc, char** argv) {
  LogToStderr("put_fan_bench");
  size_t objects = 128, mib = 8;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--objects")
      objects = std::stoul(argv[i + 1]);
    else if (flag == "--mib")
      mib = std::stoul(argv[i + 1]);
    else if (flag == "--reps")
      reps = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: put_fan_bench [--objects N] [--mib M] [--reps R]\n");
      return 2;
    }
  }
  int devices = 0, peer = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2 ||
      cudaDeviceCanAccessPeer(&peer, 0, 1) != cudaSuccess || peer == 0) {
    std::printf("{\"bench\": \"put_fan_bench\", \"skipped\": \"needs two GPUs with peer access\"}\n");
    return 0;
  }
  const size_t bytes = mib << 20, total = bytes * objects;
  constexpr size_t kPage = size_t{2} << 20;
  void *src = nullptr, *dst = nullptr;
  ObjectHeader* headers = nullptr;
  Check(cudaSetDevice(1), "cudaSetDevice 1");
  Check(cudaMalloc(&dst, total), "cudaMalloc dst");
  Check(cudaMalloc(&headers, sizeof(ObjectHeader) * objects), "cudaMalloc headers");
  Check(cudaMemset(headers, 0, sizeof(ObjectHeader) * objects), "cudaMemset headers");
  Check(cudaSetDevice(0), "cudaSetDevice 0");
  Check(cudaMalloc(&src, total), "cudaMalloc src");
  Check(cudaMemset(src, 7, total), "cudaMemset src");
  Check(cudaDeviceEnablePeerAccess(1, 0), "cudaDeviceEnablePeerAccess");
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  Check(cudaEventCreate(&start), "cudaEventCreate");
  Check(cudaEventCreate(&stop), "cudaEventCreate");
  auto timed = [&](auto&& enqueue) {
    std::vector<double> us;
    for (int r = 0; r < reps; ++r) {
      Check(cudaEventRecord(start, stream), "cudaEventRecord");
      enqueue();
      Check(cudaEventRecord(stop, stream), "cudaEventRecord");
      Check(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      Check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      us.push_back(ms * 1000.0);
    }
    const double median = Quantile(us, 0.5);
    JsonObject row;
    row.Add("us_median", median).Add("GBps", static_cast<double>(total) / median / 1e3);
    return std::make_pair(row, median);
  };
  JsonObject out;
  out.Add("bench", "put_fan_bench")
      .Add("objects", static_cast<long long>(objects))
      .Add("object_bytes", static_cast<long long>(bytes));
  auto [floor, floor_us] = timed([&] { Check(cudaMemcpyPeerAsync(dst, 1, src, 0, total, stream), "memcpyPeer"); });
  out.Add("floor_memcpy_peer", floor);
  uint32_t epoch = 0;
  for (int ways : {1, 2, 4, 8}) {
    auto [row, us] = timed([&, ways] {
      ++epoch;
      void* forked[kernels::kMaxFanStreams] = {stream};
      if (ways > 1) Check(kernels::ForkStreams(stream, ways, forked), "ForkStreams");
      for (size_t k = 0; k < objects; ++k) {
        std::vector<kernels::Segment> segments;
        for (size_t at = 0; at < bytes; at += kPage) {
          segments.push_back({static_cast<char*>(dst) + k * bytes + at, std::min(kPage, bytes - at)});
        }
        ObjectHeader writing{};
        writing.epoch = epoch;
        writing.bytes_total = bytes;
        writing.n_pages = static_cast<uint32_t>(segments.size());
        writing.page_bytes = kPage;
        Check(kernels::PutObject(static_cast<char*>(src) + k * bytes, segments.data(), segments.size(), headers + k,
                                 writing, nullptr, forked[k % static_cast<size_t>(ways)]),
              "PutObject");
      }
      if (ways > 1) Check(kernels::JoinStreams(stream, forked, ways), "JoinStreams");
    });
    row.Add("over_memcpy_peer", floor_us / us);
    out.Add("put_on_" + std::to_string(ways) + "_streams", row);
  }
  std::vector<ObjectHeader> seen(objects);
  Check(cudaMemcpy(seen.data(), headers, sizeof(ObjectHeader) * objects, cudaMemcpyDeviceToHost), "headers back");
  long long ready = 0;
  for (const ObjectHeader& h : seen) ready += h.state == static_cast<uint32_t>(ObjectState::kReady) && h.epoch == epoch;
  out.Add("objects_ready_after_last_run", ready);
  std::printf("%s\n", out.str().c_str());
  return ready == static_cast<long long>(objects) ? 0 : 1;
}

}  // namespace
}  // namespace nanokv::bench

int main(int argc, char** argv) { return nanokv::bench::Main(argc, argv); }
