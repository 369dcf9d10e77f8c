// v2 slab puts (issue 34) end to end through a private kvd on cuda, against
// device memcpy in the same run, each timed from the host until the bytes
// have landed:
//   put_1MiB      ObjectStore::PutFromDevice of 1 MiB through a slab (one
//                 launch: kv_put_object, its READY and the announce stamp),
//                 and through the plan path (open, launch, commit), against
//                 cudaMemcpyAsync + stream synchronize of 1 MiB; the median
//                 of --samples.
//   burst         1000 puts of 64 KiB: one at a time through the slab
//                 (against 1000 memcpys each synchronised) and as one
//                 BatchPutFromDevice (kv_put_objects_announced, 32 a launch,
//                 one wait; against 1000 cudaMemcpyAsync and one wait).
//   kernel        1000 puts of 64 KiB by the producer's own kernel (the
//                 device API: PutInSlabBlock, allocation on the device), one
//                 launch, against the same floors and one cudaMemcpyAsync of
//                 all the bytes; and the time until kvd has read every
//                 announce.
//   peer          (two GPUs) 1 MiB from GPU 0 into a slab of GPU 1's
//                 store, against cudaMemcpyPeerAsync.
// Requests to kvd per put are counted (ObjectStore::requests_sent), and a
// sample of every run is read back and compared.
//
//   slab_put_bench [--kvd PATH] [--samples 25]
#include <cuda_runtime.h>

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
#include "bench/slab_put_kernel.h"
#include "kernels/kv_kernels.h"
#include "nanokv/object_store.h"

namespace nanokv {
namespace {

using bench::CudaCheck;
using bench::NowMicros;
using bench::StatusCheck;

constexpr uint64_t kMiB = 1 << 20;
constexpr int kBurst = 1000;
constexpr uint64_t kBurstBytes = 64 << 10;

template <typename Op>
double MedianUs(int samples, Op op) {
  std::vector<double> us;
  for (int s = -1; s < samples; ++s) {
    const double t0 = NowMicros();
    op();
    if (s >= 0) us.push_back(NowMicros() - t0);
  }
  return bench::Quantile(us, 0.5);
}

// The object `key` read back to the device equals `bytes` at `src`; exits 1 if not.
void Verify(ObjectStore& store, const std::string& key, const void* src, uint64_t bytes, void* scratch,
            cudaStream_t stream) {
  CudaCheck(cudaMemset(scratch, 0, bytes), "cudaMemset");
  auto got = store.GetToDevice(key, scratch, bytes, stream);
  StatusCheck(got.status(), ("GetToDevice " + key).c_str());
  std::vector<unsigned char> a(bytes), b(bytes);
  CudaCheck(cudaMemcpy(a.data(), src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  CudaCheck(cudaMemcpy(b.data(), scratch, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (*got != bytes || a != b) {
    std::fprintf(stderr, "slab_put_bench: %s came back different\n", key.c_str());
    std::exit(1);
  }
}

struct Floors {
  double memcpy_1mib_us = 0;    // cudaMemcpyAsync + sync, 1 MiB
  double memcpy_each_us = 0;    // 1000 x 64 KiB, each synchronised
  double memcpy_batch_us = 0;   // 1000 x 64 KiB, one sync
  double memcpy_single_us = 0;  // all 1000 x 64 KiB in one copy
};

Floors MeasureFloors(void* src, void* dst, cudaStream_t stream, int samples) {
  Floors f;
  f.memcpy_1mib_us = MedianUs(samples, [&] {
    CudaCheck(cudaMemcpyAsync(dst, src, kMiB, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  });
  auto* s = static_cast<char*>(src);
  auto* d = static_cast<char*>(dst);
  f.memcpy_each_us = MedianUs(3, [&] {
    for (int i = 0; i < kBurst; ++i) {
      CudaCheck(
          cudaMemcpyAsync(d + i * kBurstBytes, s + i * kBurstBytes, kBurstBytes, cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
  });
  f.memcpy_batch_us = MedianUs(5, [&] {
    for (int i = 0; i < kBurst; ++i) {
      CudaCheck(
          cudaMemcpyAsync(d + i * kBurstBytes, s + i * kBurstBytes, kBurstBytes, cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
    }
    CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  });
  f.memcpy_single_us = MedianUs(5, [&] {
    CudaCheck(cudaMemcpyAsync(d, s, kBurst * kBurstBytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  });
  return f;
}

// 1000 puts of 64 KiB by the producer's own kernel: a slab taken directly
// (AcquireSlab), its cursor on the device, its ring registered with it.
bench::JsonObject KernelPuts(ObjectStore& store, const Floors& floors, void* src, void* scratch, cudaStream_t stream,
                             int reps, int* serial) {
  std::vector<double> launch_us, indexed_us;
  uint64_t requests = 0;
  std::string last;
  for (int r = 0; r < reps; ++r) {
    auto slab = store.AcquireSlab(0, kBurst * kBurstBytes, kBurst, 1024);
    StatusCheck(slab.status(), "AcquireSlab");
    const uint64_t sent = store.requests_sent();
    const device::AnnounceRing ring = (*slab)->ring();
    const size_t ring_bytes = sizeof(device::AnnounceRingHeader) + 1024 * sizeof(device::AnnounceRecord);
    CudaCheck(cudaHostRegister(ring.header, ring_bytes, cudaHostRegisterMapped), "cudaHostRegister");
    void* ring_device = nullptr;
    CudaCheck(cudaHostGetDevicePointer(&ring_device, ring.header, 0), "cudaHostGetDevicePointer");
    std::vector<char> keys(kBurst * 32, 0);
    std::vector<uint32_t> key_bytes(kBurst);
    std::vector<uint64_t> hashes(kBurst);
    for (int i = 0; i < kBurst; ++i) {
      const std::string key = "kernel:" + std::to_string((*serial)++);
      std::memcpy(&keys[i * 32], key.data(), key.size());
      key_bytes[i] = static_cast<uint32_t>(key.size());
      hashes[i] = ObjectSlab::KeyHash(key);
      if (i == kBurst - 1) last = key;
    }
    bench::SlabKernelArgs args = bench::SlabKernelArgs::Upload(*(*slab)->cursor(), keys, key_bytes, hashes);
    const double t0 = NowMicros();
    CudaCheck(bench::LaunchBlockPuts(args, ring_device, (*slab)->geometry(), static_cast<const char*>(src), kBurst,
                                     kBurstBytes, stream),
              "slab block puts");
    CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const double t1 = NowMicros();
    while (__atomic_load_n(&ring.header->consumed, __ATOMIC_ACQUIRE) < kBurst) {
    }
    indexed_us.push_back(NowMicros() - t0);
    launch_us.push_back(t1 - t0);
    requests += store.requests_sent() - sent;
    const long long failed = args.Failed();
    args.Free();
    CudaCheck(cudaHostUnregister(ring.header), "cudaHostUnregister");
    if (failed != 0) {
      std::fprintf(stderr, "slab_put_bench: %lld kernel puts failed\n", failed);
      std::exit(1);
    }
    Verify(store, last, static_cast<char*>(src) + (kBurst - 1) * kBurstBytes, kBurstBytes, scratch, stream);
  }
  const double us = bench::Quantile(launch_us, 0.5);
  bench::JsonObject out;
  out.Add("us", us)
      .Add("GBps", bench::GBps(static_cast<double>(kBurst * kBurstBytes), us))
      .Add("over_memcpy_one_sync", floors.memcpy_batch_us / us)
      .Add("over_single_memcpy", floors.memcpy_single_us / us)
      .Add("indexed_by_kvd_us", bench::Quantile(indexed_us, 0.5))
      .Add("requests_per_put", static_cast<double>(requests) / (reps * kBurst));
  return out;
}

int Main(int argc, char** argv) {
  bench::LogToStderr("slab_put_bench");
  std::string kvd_path = bench::DefaultKvd(argv[0]);
  int samples = 25;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kvd"))
      kvd_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--samples"))
      samples = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: slab_put_bench [--kvd PATH] [--samples S]\n");
      return 2;
    }
  }
  if (samples < 1) {
    std::fprintf(stderr, "slab_put_bench: --samples must be positive\n");
    return 2;
  }
  bench::RequireGpu("slab_put");
  int gpus = 0;
  CudaCheck(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  bench::BenchKvd kvd(kvd_path, "slab_put_bench", "object_store:\n  size: 3GiB\n  max_slabs: 16\n",
                      {"--backend", "cuda", "--capacity", std::to_string(uint64_t{4} << 30), "--log-level", "warn"});
  ObjectStoreOptions options;
  options.ipc_name = kvd.ipc_name();
  options.backend = "cuda";
  if (gpus >= 2) options.access_devices = {0, 1};
  auto opened = bench::BenchKvd::Retry([&] { return ObjectStore::Open(options); });
  StatusCheck(opened.status(), "open the object store");
  auto plain = bench::BenchKvd::Retry([&] { return ObjectStore::Open(options); });
  StatusCheck(plain.status(), "open the plan path's store");
  ObjectStore& store = **opened;
  if (!store.device_transfers_use_kernels()) {
    std::fprintf(stderr, "slab_put_bench: the store copies instead of launching kernels\n");
    return 1;
  }
  StatusCheck(store.UseSlabs(0, {.payload_bytes = 126 * kMiB, .header_slots = 4096, .ring_records = 4096}), "UseSlabs");

  CudaCheck(cudaSetDevice(0), "cudaSetDevice");
  const uint64_t span = kBurst * kBurstBytes;
  void *src = nullptr, *dst = nullptr, *scratch = nullptr;
  CudaCheck(cudaMalloc(&src, span), "cudaMalloc");
  CudaCheck(cudaMalloc(&dst, span), "cudaMalloc");
  CudaCheck(cudaMalloc(&scratch, span), "cudaMalloc");
  std::vector<unsigned char> pattern(span);
  for (uint64_t i = 0; i < span; ++i) pattern[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
  CudaCheck(cudaMemcpy(src, pattern.data(), span, cudaMemcpyHostToDevice), "cudaMemcpy");
  cudaStream_t stream;
  CudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const Floors floors = MeasureFloors(src, dst, stream, samples);
  int serial = 0;

  bench::JsonObject json;
  json.Add("bench", "slab_put").Add("device", bench::DeviceName()).Add("gpus", static_cast<long long>(gpus));
  {
    std::string key;
    uint64_t sent = store.requests_sent();
    const double slab_us = MedianUs(samples, [&] {
      key = "one:" + std::to_string(serial++);
      StatusCheck(store.PutFromDevice(key, src, kMiB, 0, stream), "PutFromDevice (slab)");
    });
    const double slab_requests = static_cast<double>(store.requests_sent() - sent) / (samples + 1);
    StatusCheck(store.FlushSlabPuts(), "FlushSlabPuts");
    Verify(store, key, src, kMiB, scratch, stream);
    // The same launch alone (kv_put_object into plain device memory and a
    // header of its own, stamping a word of pinned memory): what is left of
    // slab_us is the host's part of a put.
    ObjectHeader* header = nullptr;
    uint64_t* stamp = nullptr;
    CudaCheck(cudaMalloc(&header, sizeof(ObjectHeader)), "cudaMalloc");
    CudaCheck(cudaMemset(header, 0, sizeof(ObjectHeader)), "cudaMemset");
    CudaCheck(cudaHostAlloc(&stamp, sizeof(uint64_t), cudaHostAllocMapped), "cudaHostAlloc");
    ObjectHeader writing{};
    writing.bytes_total = kMiB;
    writing.page_bytes = 2 << 20;
    writing.n_pages = 1;
    const kernels::Segment segment{dst, kMiB};
    const double kernel_us = MedianUs(samples, [&] {
      ++writing.epoch;
      StatusCheck(kernels::PutObjectAnnounced(src, &segment, 1, header, writing, stamp, writing.epoch, stream),
                  "PutObjectAnnounced");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    if (*stamp != writing.epoch) {
      std::fprintf(stderr, "slab_put_bench: the put kernel did not stamp its record\n");
      std::exit(1);
    }
    CudaCheck(cudaFree(header), "cudaFree");
    CudaCheck(cudaFreeHost(stamp), "cudaFreeHost");
    const double plan_us = MedianUs(samples, [&] {
      key = "plan:" + std::to_string(serial++);
      StatusCheck((*plain)->PutFromDevice(key, src, kMiB, 0, stream), "PutFromDevice (plan)");
    });
    bench::JsonObject one;
    one.Add("memcpy_us", floors.memcpy_1mib_us)
        .Add("slab_us", slab_us)
        .Add("slab_over_memcpy", floors.memcpy_1mib_us / slab_us)
        .Add("slab_requests_per_put", slab_requests)
        .Add("kernel_only_us", kernel_us)
        .Add("plan_us", plan_us)
        .Add("plan_over_memcpy", floors.memcpy_1mib_us / plan_us);
    json.Add("put_1MiB", one);
  }
  {
    const SlabPutOptions shape{.payload_bytes = 126 * kMiB, .header_slots = 4096, .ring_records = 4096};
    std::vector<std::string> keys;
    auto fresh_keys = [&] {
      keys.clear();
      for (int i = 0; i < kBurst; ++i) keys.push_back("burst:" + std::to_string(serial++));
    };
    auto each = [&] {
      fresh_keys();
      for (int i = 0; i < kBurst; ++i) {
        StatusCheck(store.PutFromDevice(keys[i], static_cast<char*>(src) + i * kBurstBytes, kBurstBytes, 0, stream),
                    "PutFromDevice (burst)");
      }
    };
    auto batch = [&] {
      fresh_keys();
      std::vector<ObjectStore::DevicePut> puts;
      for (int i = 0; i < kBurst; ++i)
        puts.push_back({keys[i], static_cast<char*>(src) + i * kBurstBytes, kBurstBytes});
      for (const Status& s : store.BatchPutFromDevice(puts, 0, stream)) StatusCheck(s, "BatchPutFromDevice");
    };
    // A fresh slab before each timed burst (a grant and the old one's
    // release, untimed; a burst is under half a slab, so none is asked for
    // ahead): the puts alone. Then back to back: a slab traded every two
    // bursts, the next granted by the store's worker while the puts run.
    std::vector<double> each_fresh, batch_fresh, grants;
    for (int r = 0; r < 5; ++r) {
      const double t0 = NowMicros();
      StatusCheck(store.UseSlabs(0, shape), "UseSlabs");
      grants.push_back(NowMicros() - t0);
      StatusCheck(store.FlushSlabPuts(), "FlushSlabPuts");  // the old slab released
      double t1 = NowMicros();
      each();
      each_fresh.push_back(NowMicros() - t1);
      StatusCheck(store.UseSlabs(0, shape), "UseSlabs");
      StatusCheck(store.FlushSlabPuts(), "FlushSlabPuts");
      t1 = NowMicros();
      batch();
      batch_fresh.push_back(NowMicros() - t1);
    }
    uint64_t sent = store.requests_sent();
    const double each_us = MedianUs(3, each);
    const double each_requests = static_cast<double>(store.requests_sent() - sent) / (4 * kBurst);
    sent = store.requests_sent();
    const double batch_us = MedianUs(5, batch);
    const double batch_requests = static_cast<double>(store.requests_sent() - sent) / (6 * kBurst);
    StatusCheck(store.FlushSlabPuts(), "FlushSlabPuts");
    Verify(store, keys.back(), static_cast<char*>(src) + (kBurst - 1) * kBurstBytes, kBurstBytes, scratch, stream);
    const double each_fresh_us = bench::Quantile(each_fresh, 0.5), batch_fresh_us = bench::Quantile(batch_fresh, 0.5);
    bench::JsonObject burst;
    burst.Add("each_fresh_slab_us", each_fresh_us)
        .Add("each_fresh_over_memcpy_each_synced", floors.memcpy_each_us / each_fresh_us)
        .Add("each_us", each_us)
        .Add("each_over_memcpy_each_synced", floors.memcpy_each_us / each_us)
        .Add("each_requests_per_put", each_requests)
        .Add("batch_fresh_slab_us", batch_fresh_us)
        .Add("batch_fresh_over_memcpy_one_sync", floors.memcpy_batch_us / batch_fresh_us)
        .Add("batch_us", batch_us)
        .Add("batch_GBps", bench::GBps(static_cast<double>(span), batch_us))
        .Add("batch_over_memcpy_one_sync", floors.memcpy_batch_us / batch_us)
        .Add("batch_requests_per_put", batch_requests)
        .Add("grant_126MiB_us", bench::Quantile(grants, 0.5))
        .Add("memcpy_each_synced_us", floors.memcpy_each_us)
        .Add("memcpy_one_sync_us", floors.memcpy_batch_us)
        .Add("single_memcpy_us", floors.memcpy_single_us);
    json.Add("burst_1000x64KiB", burst);
  }
  json.Add("kernel_1000x64KiB", KernelPuts(store, floors, src, scratch, stream, 5, &serial));
  if (gpus < 2) {
    json.Add("peer", "skipped: one GPU");
  } else {
    // A producer on GPU 0 puts into a slab of GPU 1's store, peer to peer.
    StatusCheck(store.UseSlabs(1, {.payload_bytes = 126 * kMiB, .header_slots = 4096, .ring_records = 4096}),
                "UseSlabs(1)");
    void* landing = nullptr;
    CudaCheck(cudaSetDevice(1), "cudaSetDevice");
    CudaCheck(cudaMalloc(&landing, kMiB), "cudaMalloc");
    CudaCheck(cudaSetDevice(0), "cudaSetDevice");
    cudaError_t enabled = cudaDeviceEnablePeerAccess(1, 0);
    if (enabled == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
    else
      CudaCheck(enabled, "cudaDeviceEnablePeerAccess");
    std::string key;
    const double put_us = MedianUs(samples, [&] {
      key = "peer:" + std::to_string(serial++);
      StatusCheck(store.PutFromDevice(key, src, kMiB, 1, stream), "PutFromDevice (peer)");
    });
    const double peer_us = MedianUs(samples, [&] {
      CudaCheck(cudaMemcpyPeerAsync(landing, 1, src, 0, kMiB, stream), "cudaMemcpyPeerAsync");
      CudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    });
    StatusCheck(store.FlushSlabPuts(), "FlushSlabPuts");
    Verify(store, key, src, kMiB, scratch, stream);
    CudaCheck(cudaFree(landing), "cudaFree");
    bench::JsonObject peer;
    peer.Add("put_us", put_us).Add("memcpy_peer_us", peer_us).Add("put_over_memcpy_peer", peer_us / put_us);
    json.Add("peer_1MiB", peer);
  }
  json.Add("slab_grants", static_cast<long long>(store.slab_grants()));
  std::printf("%s\n", json.str().c_str());
  CudaCheck(cudaStreamDestroy(stream), "cudaStreamDestroy");
  CudaCheck(cudaFree(src), "cudaFree");
  CudaCheck(cudaFree(dst), "cudaFree");
  CudaCheck(cudaFree(scratch), "cudaFree");
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
