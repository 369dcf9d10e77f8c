// The object store's put and get of device-resident bytes end to end, as an
// engine calls them (ObjectStore::PutFromDevice / GetToDevice through a
// private kvd on cuda: open_for_write, kv_store_pages + kv_commit_ready,
// commit; lease, locate, kv_load_pages, release), against cudaMemcpy
// device-to-device of the same bytes in the same run, each timed from the
// host until the bytes have landed (the copy: cudaMemcpyAsync + stream
// synchronize). Objects of 0.5 to 64 MiB; the median of --samples. Each put
// is of a fresh key; the Remove of the one before is untimed.
//
// With two GPUs it also times the cross-GPU push, both ways (GPU 0 -> GPU 1,
// GPU 1 -> GPU 0), 1 to 64 MiB: a producer on one GPU (access_devices
// {0, 1}, its own stream, its device current) puts from its own memory an
// object owned by the other, the kernels storing peer-to-peer into the
// other's pages, against cudaMemcpyPeerAsync of the same bytes on the same
// stream in the same run (peer access enabled both ways); each direction's
// last object is read back and compared.
//
//   object_put_get_bench [--kvd PATH] [--samples 15] [--spin-us 50] [--busy-poll-us 0]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "bench/gpu_timer.h"
#include "kernels/kv_kernels.h"
#include "nanokv/object_store.h"

namespace nanokv {
namespace {

using bench::CudaCheck;
using bench::NowMicros;
using bench::StatusCheck;

// Median host microseconds of `op` over `samples` runs (after one warm-up);
// `before` runs untimed ahead of each.
template <typename Op, typename Before>
double MedianUs(int samples, Op op, Before before) {
  std::vector<double> us;
  for (int s = -1; s < samples; ++s) {
    before();
    double t0 = NowMicros();
    op();
    if (s >= 0) us.push_back(NowMicros() - t0);
  }
  return bench::Quantile(us, 0.5);
}
template <typename Op>
double MedianUs(int samples, Op op) {
  return MedianUs(samples, op, [] {});
}

// Compares the first `bytes` of two device buffers on the host.
bool SameBytes(const void* a, const void* b, uint64_t bytes) {
  std::vector<unsigned char> ha(bytes), hb(bytes);
  CudaCheck(cudaMemcpy(ha.data(), a, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  CudaCheck(cudaMemcpy(hb.data(), b, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return ha == hb;
}

// The push from GPU `from` into objects owned by GPU `to` (the header's
// comment), one JSON object per size. Exits 1 where an object comes back
// different.
bench::JsonObject PeerPush(ObjectStore& store, int from, int to, const std::vector<unsigned char>& pattern,
                          int samples, int* serial) {
  const uint64_t max_object = pattern.size();
  void *landing = nullptr, *src = nullptr, *check = nullptr;
  CudaCheck(cudaSetDevice(to), "cudaSetDevice");
  CudaCheck(cudaMalloc(&landing, max_object), "cudaMalloc");
  CudaCheck(cudaSetDevice(from), "cudaSetDevice");  // as the producer's thread would have it
  cudaError_t enabled = cudaDeviceEnablePeerAccess(to, 0);
  if (enabled == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  else CudaCheck(enabled, "cudaDeviceEnablePeerAccess");
  CudaCheck(cudaMalloc(&src, max_object), "cudaMalloc");
  CudaCheck(cudaMalloc(&check, max_object), "cudaMalloc");
  CudaCheck(cudaMemcpy(src, pattern.data(), max_object, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t stream;
  CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  bench::JsonObject sizes;
  for (int mib : {1, 4, 16, 64}) {
    const uint64_t bytes = uint64_t(mib) << 20;
    std::string last;
    double push_us = MedianUs(
        samples,
        [&] {
          last = "peer:" + std::to_string(from) + ":" + std::to_string((*serial)++);
          StatusCheck(store.PutFromDevice(last, src, bytes, to, stream), "PutFromDevice (peer)");
        },
        [&] {
          if (!last.empty()) StatusCheck(store.Remove(last), "Remove");
        });
    auto where = store.GetLocation(last);  // a preference kvd could pass over: a local put is no push
    StatusCheck(where.status(), "GetLocation (peer)");
    if (where->device != to) {
      std::fprintf(stderr, "object_put_get_bench: peer object %s landed on GPU %d, not %d\n", last.c_str(),
                   where->device, to);
      std::exit(1);
    }
    CudaCheck(cudaMemset(check, 0, bytes), "cudaMemset");
    auto got = store.GetToDevice(last, check, max_object, stream);
    StatusCheck(got.status(), "GetToDevice (peer)");
    if (*got != bytes || !SameBytes(src, check, bytes)) {
      std::fprintf(stderr, "object_put_get_bench: peer object %s (GPU %d -> GPU %d) came back different\n",
                   last.c_str(), from, to);
      std::exit(1);
    }
    StatusCheck(store.Remove(last), "Remove");
    double peer_us = MedianUs(samples, [&] {
      CudaCheck(cudaMemcpyPeerAsync(landing, to, src, from, bytes, stream), "cudaMemcpyPeerAsync");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    bench::JsonObject r;
    r.Add("push_GBps", bench::GBps(static_cast<double>(bytes), push_us))
        .Add("memcpy_peer_GBps", bench::GBps(static_cast<double>(bytes), peer_us))
        .Add("push_over_memcpy_peer", peer_us / push_us)
        .Add("push_us", push_us)
        .Add("memcpy_peer_us", peer_us);
    sizes.Add(std::to_string(mib) + "MiB", r);
  }
  CudaCheck(cudaStreamDestroy(stream), "cudaStreamDestroy");
  CudaCheck(cudaFree(src), "cudaFree");
  CudaCheck(cudaFree(check), "cudaFree");
  CudaCheck(cudaFree(landing), "cudaFree");
  CudaCheck(cudaSetDevice(0), "cudaSetDevice");
  return sizes;
}

int Main(int argc, char** argv) {
  bench::LogToStderr("object_put_get_bench");
  std::string kvd_path = bench::DefaultKvd(argv[0]);
  int samples = 15;
  uint32_t spin_us = ObjectStoreOptions{}.spin_us, busy_poll_us = 0;
  bool ring = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kvd")) kvd_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--samples")) samples = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--spin-us")) spin_us = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--busy-poll-us")) busy_poll_us = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--ring")) ring = std::strcmp(argv[i + 1], "0") != 0;
    else {
      std::fprintf(stderr, "usage: object_put_get_bench [--kvd PATH] [--samples S] [--spin-us US] [--busy-poll-us US] [--ring 0|1]\n");
      return 2;
    }
  }
  if (samples < 1) {
    std::fprintf(stderr, "object_put_get_bench: --samples must be positive\n");
    return 2;
  }
  bench::RequireGpu("object_put_get");
  int gpus = 0;
  CudaCheck(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");

  const uint64_t max_object = 64ull << 20;
  bench::BenchKvd kvd(kvd_path, "object_put_get_bench", "object_store:\n  size: 320MiB\n",
                      {"--backend", "cuda", "--capacity", std::to_string(512ull << 20), "--log-level", "warn",
                       "--busy-poll-us", std::to_string(busy_poll_us)});
  ObjectStoreOptions options;
  options.ipc_name = kvd.ipc_name();
  options.backend = "cuda";
  options.spin_us = spin_us;
  options.ring = ring;
  if (gpus >= 2) options.access_devices = {0, 1};
  auto opened = bench::BenchKvd::Retry([&] { return ObjectStore::Open(options); });
  StatusCheck(opened.status(), "open the object store");
  ObjectStore& store = **opened;
  if (!store.device_transfers_use_kernels()) {
    std::fprintf(stderr, "object_put_get_bench: the store copies instead of launching kernels\n");
    return 1;
  }

  CudaCheck(cudaSetDevice(0), "cudaSetDevice");
  void *src = nullptr, *dst = nullptr, *copy_dst = nullptr;
  CudaCheck(cudaMalloc(&src, max_object), "cudaMalloc");
  CudaCheck(cudaMalloc(&dst, max_object), "cudaMalloc");
  CudaCheck(cudaMalloc(&copy_dst, max_object), "cudaMalloc");
  std::vector<unsigned char> pattern(max_object);
  for (uint64_t i = 0; i < max_object; ++i) pattern[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
  CudaCheck(cudaMemcpy(src, pattern.data(), max_object, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t stream;
  CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  bench::JsonObject json;
  json.Add("bench", "object_put_get")
      .Add("device", bench::DeviceName())
      .Add("gpus", static_cast<long long>(gpus))
      .Add("samples", static_cast<long long>(samples))
      .Add("client_spin_us", static_cast<long long>(spin_us))
      .Add("kvd_busy_poll_us", static_cast<long long>(busy_poll_us))
      .Add("ring", ring)
      .Add("unit", "GB/s");
  int serial = 0;
  for (double mib : {0.5, 1.0, 4.0, 16.0, 64.0}) {
    const auto bytes = static_cast<uint64_t>(mib * (1 << 20));
    const std::string base = "bench:" + std::to_string(bytes) + ":";
    // Each put a fresh key; the get reads the last put's object; removal untimed.
    std::string last;
    double put_us = MedianUs(
        samples,
        [&] {
          last = base + std::to_string(serial++);
          StatusCheck(store.PutFromDevice(last, src, bytes, 0, stream), "PutFromDevice");
        },
        [&] {
          if (!last.empty()) StatusCheck(store.Remove(last), "Remove");
        });
    double get_us = MedianUs(samples, [&] {
      auto got = store.GetToDevice(last, dst, max_object, stream);
      StatusCheck(got.status(), "GetToDevice");
    });
    if (!SameBytes(src, dst, bytes)) {
      std::fprintf(stderr, "object_put_get_bench: %s came back different\n", last.c_str());
      return 1;
    }
    StatusCheck(store.Remove(last), "Remove");
    double memcpy_us = MedianUs(samples, [&] {
      CudaCheck(cudaMemcpyAsync(copy_dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    bench::JsonObject r;
    r.Add("put_GBps", bench::GBps(static_cast<double>(bytes), put_us))
        .Add("get_GBps", bench::GBps(static_cast<double>(bytes), get_us))
        .Add("memcpy_GBps", bench::GBps(static_cast<double>(bytes), memcpy_us))
        .Add("put_over_memcpy", memcpy_us / put_us)
        .Add("get_over_memcpy", memcpy_us / get_us)
        .Add("put_us", put_us)
        .Add("get_us", get_us)
        .Add("memcpy_us", memcpy_us);
    char key[32];
    std::snprintf(key, sizeof key, "%gMiB", mib);
    json.Add(key, r);
  }

  // Where a put's time goes (1 MiB, the plan API's steps, each timed: the
  // pointers begin the header by a copy of this process's, untimed; then
  // the store and commit kernels; kvd's commit; the remove. kvd does no GPU
  // work in any of them while it serves, so the kernels follow this process's own
  // work).
  {
    const uint64_t bytes = 1 << 20;
    std::vector<double> open_us, store_us, again_us, commit_us, remove_us;
    for (int s = 0; s < samples + 1; ++s) {
      std::string key = "steps:" + std::to_string(serial++);
      double t0 = NowMicros();
      auto plan = store.OpenForWrite(key, bytes, 0);
      StatusCheck(plan.status(), "OpenForWrite");
      double t1 = NowMicros();
      auto payload = store.PayloadPointer(*plan);
      auto header = store.HeaderPointer(*plan);
      StatusCheck(payload.status(), "PayloadPointer");
      StatusCheck(header.status(), "HeaderPointer");
      kernels::Segment seg{*payload, bytes};
      double t2 = NowMicros();
      StatusCheck(kernels::StorePagesAndCommit(src, &seg, 1, static_cast<ObjectHeader*>(*header), plan->epoch,
                                               nullptr, stream), "StorePagesAndCommit");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      double t3 = NowMicros();
      // The same stores again: this process's GPU work follows its own.
      StatusCheck(kernels::StorePages(src, &seg, 1, stream), "StorePages");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      double t3b = NowMicros();
      StatusCheck(store.Commit(key, plan->epoch, /*published_on_device=*/true), "Commit");
      double t4 = NowMicros();
      StatusCheck(store.Remove(key), "Remove");
      double t5 = NowMicros();
      if (s == 0) continue;  // warm-up
      open_us.push_back(t1 - t0);
      store_us.push_back(t3 - t2);
      again_us.push_back(t3b - t3);
      commit_us.push_back(t4 - t3b);
      remove_us.push_back(t5 - t4);
    }
    // At 1 and 64 MiB: the kernels' part of a put in three forms, and the
    // copy floor at the same point.
    auto kernel_steps = [&](uint64_t size) {
      // The same store as PutFromDevice runs it: kv_put_object (begin, then
      // store and READY in one kernel), then the sync; and, alternating with
      // it, as it ran before: kv_begin_write, kv_store_pages, kv_commit_ready.
      // Third in the alternation, the floor of this position: cudaMemcpyAsync of
      // the same size into the plan's payload right after the open, then the
      // sync (the plan revoked after): what a copy pays that follows a request.
      std::vector<double> put_object_us, three_launches_us, memcpy_after_open_us;
      for (int s = 0; s < 3 * (samples + 1); ++s) {
        const bool three = s % 3 == 1, copy = s % 3 == 2;
        std::string key = "put-object:" + std::to_string(serial++);
        auto plan = store.OpenForWrite(key, size, 0);
        StatusCheck(plan.status(), "OpenForWrite");
        auto payload = store.PayloadPointer(*plan);
        auto header = store.HeaderPointer(*plan);
        StatusCheck(payload.status(), "PayloadPointer");
        StatusCheck(header.status(), "HeaderPointer");
        kernels::Segment seg{*payload, size};
        const ObjectHeader writing = WritingHeaderOf(*plan, 0);
        double t0 = NowMicros();
        auto* at = static_cast<ObjectHeader*>(*header);
        if (copy) {
          CudaCheck(cudaMemcpyAsync(*payload, src, size, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
          CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          const double t1 = NowMicros();
          StatusCheck(store.Revoke(key, plan->epoch), "Revoke");
          if (s >= 3) memcpy_after_open_us.push_back(t1 - t0);
          continue;
        }
        if (three) {
          StatusCheck(kernels::BeginWrite(at, writing, nullptr, stream), "BeginWrite");
          StatusCheck(kernels::StorePagesAndCommit(src, &seg, 1, at, writing.epoch, nullptr, stream),
                      "StorePagesAndCommit");
        } else {
          StatusCheck(kernels::PutObject(src, &seg, 1, at, writing, nullptr, stream), "PutObject");
        }
        CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        double t1 = NowMicros();
        StatusCheck(store.Commit(key, plan->epoch, /*published_on_device=*/true), "Commit");
        StatusCheck(store.Remove(key), "Remove");
        if (s < 3) continue;  // warm-up
        (three ? three_launches_us : put_object_us).push_back(t1 - t0);
      }
      // kv_put_object back to back: plans opened first, then each put and its
      // sync right after the one before (no request in between).
      std::vector<double> back_to_back_us;
      {
        std::vector<std::pair<std::string, ObjectPlan>> plans;
        // As many as the store holds at once (320 MiB, a few at 64 MiB).
        const uint64_t fit = std::max<uint64_t>(2, (256ull << 20) / size);
        for (uint64_t s = 0; s < std::min<uint64_t>(static_cast<uint64_t>(samples) + 1, fit); ++s) {
          std::string key = "back-to-back:" + std::to_string(serial++);
          auto plan = store.OpenForWrite(key, size, 0);
          StatusCheck(plan.status(), "OpenForWrite");
          plans.emplace_back(key, *plan);
        }
        for (size_t s = 0; s < plans.size(); ++s) {
          const auto& [key, plan] = plans[s];
          auto payload = store.PayloadPointer(plan);
          auto header = store.HeaderPointer(plan);
          StatusCheck(payload.status(), "PayloadPointer");
          StatusCheck(header.status(), "HeaderPointer");
          kernels::Segment seg{*payload, size};
          const ObjectHeader writing = WritingHeaderOf(plan, 0);
          double t0 = NowMicros();
          StatusCheck(kernels::PutObject(src, &seg, 1, static_cast<ObjectHeader*>(*header), writing, nullptr, stream),
                      "PutObject");
          CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
          if (s > 0) back_to_back_us.push_back(NowMicros() - t0);
        }
        for (const auto& [key, plan] : plans) {
          StatusCheck(store.Commit(key, plan.epoch, /*published_on_device=*/true), "Commit");
          StatusCheck(store.Remove(key), "Remove");
        }
      }
      bench::JsonObject k;
      k.Add("put_object_kernels_sync_us", bench::Quantile(put_object_us, 0.5))
          .Add("put_object_back_to_back_us", bench::Quantile(back_to_back_us, 0.5))
          .Add("memcpy_after_open_us", bench::Quantile(memcpy_after_open_us, 0.5))
          .Add("begin_store_commit_3_launches_sync_us", bench::Quantile(three_launches_us, 0.5));
      return k;
    };
    bench::JsonObject steps;
    steps.Add("open_us", bench::Quantile(open_us, 0.5))
        .Add("store_commit_kernels_sync_us", bench::Quantile(store_us, 0.5))
        .Add("store_again_kernels_sync_us", bench::Quantile(again_us, 0.5))
        .Add("commit_published_us", bench::Quantile(commit_us, 0.5))
        .Add("remove_us", bench::Quantile(remove_us, 0.5));
    json.Add("put_steps_1MiB", steps);
    json.Add("put_kernels_1MiB", kernel_steps(1 << 20));
    json.Add("put_kernels_64MiB", kernel_steps(64ull << 20));
  }

  // 1000 puts of 64 KiB back to back, then their gets: aggregate GB/s against
  // 1000 cudaMemcpyAsync of 64 KiB back to back, each synchronised as a put
  // is (the burst).
  {
    constexpr int kBurst = 1000;
    constexpr uint64_t kBytes = 64 << 10;
    std::vector<std::string> keys;
    for (int i = 0; i < kBurst; ++i) keys.push_back("burst:" + std::to_string(serial++));
    double t0 = NowMicros();
    for (const std::string& key : keys) StatusCheck(store.PutFromDevice(key, src, kBytes, 0, stream), "PutFromDevice");
    double t1 = NowMicros();
    for (const std::string& key : keys) {
      StatusCheck(store.GetToDevice(key, dst, max_object, stream).status(), "GetToDevice");
    }
    double t2 = NowMicros();
    for (int i = 0; i < kBurst; ++i) {
      CudaCheck(cudaMemcpyAsync(copy_dst, src, kBytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
    double t3 = NowMicros();
    for (const std::string& key : keys) StatusCheck(store.Remove(key), "Remove");
    const double total = static_cast<double>(kBurst * kBytes);
    bench::JsonObject burst;
    burst.Add("puts", static_cast<long long>(kBurst))
        .Add("bytes_each", static_cast<long long>(kBytes))
        .Add("put_GBps", bench::GBps(total, t1 - t0))
        .Add("get_GBps", bench::GBps(total, t2 - t1))
        .Add("memcpy_GBps", bench::GBps(total, t3 - t2))
        .Add("put_over_memcpy", (t3 - t2) / (t1 - t0))
        .Add("get_over_memcpy", (t3 - t2) / (t2 - t1));
    json.Add("burst_1000x64KiB", burst);
  }

  if (gpus < 2) {
    json.Add("peer", "skipped: one GPU");
  } else {
    bench::JsonObject peer;
    peer.Add("gpu0_to_gpu1", PeerPush(store, 0, 1, pattern, samples, &serial))
        .Add("gpu1_to_gpu0", PeerPush(store, 1, 0, pattern, samples, &serial));
    json.Add("peer", peer);
  }
  std::printf("%s\n", json.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
