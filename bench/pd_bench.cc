// The KV highway: a request's KV, L layers x 2 objects (K, V) of
// S bytes, put by a prefill on GPU 0 into a store on GPU 1 through the
// cluster master's plans, then got by the decode side into GPU 1 memory as
// one batch, and viewed in place; against the hardware's floors in the same
// run: cudaMemcpyPeer of the same objects (GPU 0 -> GPU 1), device memcpy
// on GPU 1, a copy staged through pinned host memory, raw UCX of the same
// bytes (loopback TCP, as the cross-host path here).
//   a: one kvd serving both GPUs (node n0, the copies on n0/1)
//   b: two kvds on one host (nA serves GPU 0, nB GPU 1; copies on nB,
//      written through nB's socket and pages)
//   c: the same two kvds, the prefill told it is on another host
//      (host_id): copies move over UCX through pinned staging
// Also the stream-ordered put: when the call returns, when the last object
// is READY on the device (the event), when the master knows (Wait).
//
//   pd_bench [--kvd PATH] [--backend cuda|host] [--layers 32,64] [--sizes-kib 256,1024,8192]
//            [--reps 5] [--paths a,b,c] [--kvd-busy-poll-us N] [--slab-mib N]
// --slab-mib N: paths (a) and (b) also put each batch through slabs of N
// MiB (v2, no request per put; (b): slabs of nB's store, UseSlabsOn) and
// time until the owner kvd has indexed it (FlushSlabPuts: the decode's
// gets of its node's copies find it) and until the master locates all of it.
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_kvd.h"
#include "bench/bench_memory.h"
#include "bench/bench_util.h"
#include "bench/gpu_timer.h"
#include "bench/raw_ucp_floor.h"
#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/cluster_client.h"

namespace nanokv::bench {
namespace {

struct Args {
  std::string kvd;
  std::string backend = "cuda";
  std::vector<int> layers = {32, 64};
  std::vector<size_t> sizes_kib = {256, 1024, 8192};
  int reps = 5;
  std::string paths = "a,b,c";
  std::vector<std::string> kvd_args;  // --kvd-busy-poll-us N: the kvds' --busy-poll-us
  size_t slab_mib = 0;                // --slab-mib N: path (a) also puts through slabs of N MiB
};

std::vector<long long> Numbers(const std::string& text) {
  std::vector<long long> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

void Check(const Status& s, const std::string& what) {
  if (s.ok()) return;
  std::fprintf(stderr, "pd_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

JsonObject Gbps(const std::vector<double>& micros, size_t bytes) {
  JsonObject o;
  const double median = Quantile(micros, 0.5);
  o.Add("us_median", median).Add("GBps", static_cast<double>(bytes) / median / 1e3);
  return o;
}

// One path's nodes: the prefill's client, the decode's, where copies go.
struct Path {
  std::string name;
  std::unique_ptr<ClusterClient> prefill;
  std::unique_ptr<ClusterClient> decode;
  std::string segment;
  // With --slab-mib: a second prefill whose puts go through slabs of the
  // copies' store (ClusterClient::UseSlabs, UseSlabsOn), no request per put.
  std::unique_ptr<ClusterClient> slab_prefill;
};

// A slab put's batch visible at the master (the decode's BatchGetLocation
// finds every key): the owner kvd read the announces and sent its events.
void WaitVisible(ClusterClient& decode, const std::vector<std::string>& keys) {
  const double until = NowMicros() + 10e6;
  for (;;) {
    bool all = true;
    for (const auto& l : decode.BatchGetLocation(keys)) all = all && l.ok();
    if (all) return;
    if (NowMicros() > until) Check(Status::Unavailable("not after 10 s"), "slab puts visible at the master");
  }
}

std::unique_ptr<ClusterClient> Client(const std::string& master, const std::string& node, const std::string& ipc,
                                      const std::string& backend, const std::string& host_id = "") {
  ClusterClientOptions o;
  o.masters = {master};
  o.node_id = node;
  o.ipc_name = ipc;
  o.backend = backend;
  o.host_id = host_id;
  o.request_timeout_ms = 60'000;
  auto client = ClusterClient::Connect(o);
  Check(client.status(), "connect " + node);
  return std::move(*client);
}

void WaitNodes(ClusterClient& client, size_t nodes) {
  auto up = BenchKvd::Retry([&]() -> Result<bool> {
    auto status = client.Cluster();
    if (!status.ok()) return status.status();
    size_t alive = 0;
    for (const auto& n : status->nodes) alive += n.state == "alive" ? 1 : 0;
    if (alive >= nodes) return true;
    return Status::Unavailable("nodes not up yet");
  });
  Check(up.status(), "the kvds never registered");
}

// The bench's buffers, made once for the largest case: the prefill's
// K/V on GPU 0, the decode's landing and a second buffer for the device
// memcpy floor on GPU 1, and host bytes for the raw UCX floor.
struct Buffers {
  int producer = 0, consumer = 0;
  std::byte* src = nullptr;
  std::byte* dst = nullptr;
  std::byte* spare = nullptr;
  std::vector<std::byte> host;
};

// One (path, L, S) case: reps of put, get, views, the async put; floors.
JsonObject RunCase(Path& path, BenchMemory& memory, Buffers& buffers, int layers, size_t bytes, int reps, Raw* raw) {
  const size_t n = static_cast<size_t>(layers) * 2;
  const size_t total = n * bytes;
  const int producer = buffers.producer, consumer = buffers.consumer;
  std::byte* src = buffers.src;
  std::byte* dst = buffers.dst;
  std::vector<std::byte> pattern(total);
  for (size_t i = 0; i < total; i += 4096) pattern[i] = static_cast<std::byte>((i / 4096) * 7 + 1);
  memory.Upload(src, pattern);
  std::vector<double> put, get, get_again, view, async_return, async_ready, async_commit, peer, peer_whole, d2d, staged,
      raw_us, open_us, commit_us, locate_us, ping_us, slab_put, slab_flushed, slab_visible;
  for (int r = -1; r < reps; ++r) {  // r = -1: warm-up (mappings, endpoints), not kept
    const std::string prefix = path.name + ":" + std::to_string(layers) + "x" + std::to_string(bytes) + ":" +
                               std::to_string(r + 1) + ":";
    std::vector<DevicePut> puts;
    std::vector<DeviceGet> gets;
    std::vector<std::string> keys;
    for (size_t i = 0; i < n; ++i) {
      keys.push_back(prefix + std::to_string(i));
      puts.push_back({keys.back(), src + i * bytes, bytes, {.preferred_segment = path.segment}});
      gets.push_back({keys.back(), dst + i * bytes, bytes});
    }
    // Each side's calls start on its own GPU, as in a prefill process and a
    // decode process (one thread here does both, untimed switches).
    memory.MakeCurrent(producer);
    double t = NowMicros();
    for (const Status& s : path.prefill->BatchPutFromDevice(puts, memory.stream(producer))) Check(s, "put");
    const double put_us = NowMicros() - t;
    memory.MakeCurrent(consumer);
    t = NowMicros();
    for (const auto& got : path.decode->BatchGetToDevice(gets, memory.stream(consumer))) Check(got.status(), "get");
    const double get_us = NowMicros() - t;
    if (r == -1 && memory.Download(dst, total) != pattern) {
      std::fprintf(stderr, "pd_bench: %s: the decode's bytes differ from the prefill's\n", prefix.c_str());
      std::exit(1);
    }
    // The same batch again: locations the decode kept (its read cache).
    t = NowMicros();
    for (const auto& got : path.decode->BatchGetToDevice(gets, memory.stream(consumer)))
      Check(got.status(), "get again");
    const double again_us = NowMicros() - t;
    t = NowMicros();
    double view_us = -1;
    {
      auto views = path.decode->BatchView(keys);
      view_us = NowMicros() - t;
      for (const auto& v : views) {
        if (!v.ok()) view_us = -1;  // another host: no view
      }
    }
    for (const Status& s : path.prefill->BatchRemove(keys)) Check(s, "remove");
    // The stream-ordered put of the same batch.
    memory.MakeCurrent(producer);
    t = NowMicros();
    auto pending = path.prefill->PutFromDeviceAsync(puts, memory.stream(producer));
    Check(pending.status(), "async put");
    const double returned = NowMicros() - t;
    if (memory.cuda() && (*pending)->event() != nullptr) {
      CudaCheck(cudaEventSynchronize(static_cast<cudaEvent_t>((*pending)->event())), "cudaEventSynchronize");
    }
    const double ready = NowMicros() - t;
    for (const Status& s : (*pending)->Wait()) Check(s, "async put commit");
    const double committed = NowMicros() - t;
    for (const Status& s : path.prefill->BatchRemove(keys)) Check(s, "remove");
    // The master's part alone: the batch opened and committed with no
    // bytes moved, located, and an empty call.
    std::vector<WriteRequest> opens;
    for (const DevicePut& p : puts) opens.push_back({p.key, p.bytes, p.options});
    t = NowMicros();
    std::vector<Result<ClusterPlan>> plans = path.prefill->BatchOpenForWrite(opens);
    const double opened = NowMicros() - t;
    std::vector<ClusterPlan> open_plans;
    for (auto& p : plans) {
      Check(p.status(), "open");
      open_plans.push_back(std::move(*p));
    }
    t = NowMicros();
    for (const Status& s : path.prefill->BatchCommit(open_plans, /*published_on_device=*/true)) Check(s, "commit");
    const double committed_only = NowMicros() - t;
    t = NowMicros();
    for (const auto& l : path.decode->BatchGetLocation(keys)) Check(l.status(), "locate");
    const double located = NowMicros() - t;
    t = NowMicros();
    Check(path.prefill->Ping().status(), "ping");
    const double pinged = NowMicros() - t;
    for (const Status& s : path.prefill->BatchRemove(keys)) Check(s, "remove");
    if (path.slab_prefill != nullptr) {
      memory.MakeCurrent(producer);
      t = NowMicros();
      for (const Status& s : path.slab_prefill->BatchPutFromDevice(puts, memory.stream(producer))) {
        Check(s, "slab put");
      }
      const double put_once = NowMicros() - t;
      Check(path.slab_prefill->FlushSlabPuts(10'000), "flush slab puts");
      const double flushed = NowMicros() - t;  // the owner kvd indexed them: its readers find them
      WaitVisible(*path.decode, keys);
      const double visible = NowMicros() - t;
      if (r == -1) {
        for (const auto& got : path.decode->BatchGetToDevice(gets, memory.stream(consumer))) {
          Check(got.status(), "get of slab puts");
        }
        if (memory.Download(dst, total) != pattern) {
          std::fprintf(stderr, "pd_bench: %s: the slab puts' bytes differ from the prefill's\n", prefix.c_str());
          std::exit(1);
        }
      }
      for (const Status& s : path.prefill->BatchRemove(keys)) Check(s, "remove");
      if (r >= 0) slab_put.push_back(put_once), slab_flushed.push_back(flushed), slab_visible.push_back(visible);
    }
    const double peer_us = memory.PeerCopy(dst, consumer, src, producer, n, bytes);
    const double whole_us = memory.PeerCopy(dst, consumer, src, producer, 1, total);
    const double d2d_us = memory.PeerCopy(buffers.spare, consumer, dst, consumer, 1, total);
    const double staged_us = memory.Staged(dst, consumer, src, producer, total);
    double raw_once = 0;
    if (raw != nullptr) {
      raw_once = RawSend(*raw, std::span<const std::byte>(buffers.host.data(), total),
                         std::min<size_t>(total, size_t{4} << 20), 4);
    }
    if (r < 0) continue;
    put.push_back(put_us);
    get.push_back(get_us);
    get_again.push_back(again_us);
    if (view_us >= 0) view.push_back(view_us);
    async_return.push_back(returned);
    async_ready.push_back(ready);
    async_commit.push_back(committed);
    peer.push_back(peer_us);
    peer_whole.push_back(whole_us);
    d2d.push_back(d2d_us);
    staged.push_back(staged_us);
    if (raw != nullptr) raw_us.push_back(raw_once);
    open_us.push_back(opened);
    commit_us.push_back(committed_only);
    locate_us.push_back(located);
    ping_us.push_back(pinged);
  }
  JsonObject row;
  const double put_m = Quantile(put, 0.5), get_m = Quantile(get, 0.5);
  row.Add("objects", static_cast<long long>(n))
      .Add("bytes", static_cast<long long>(total))
      .Add("put", Gbps(put, total))
      .Add("get", Gbps(get, total))
      .Add("put_over_memcpy_peer", Quantile(peer, 0.5) / put_m)
      .Add("put_over_memcpy_peer_whole", Quantile(peer_whole, 0.5) / put_m)
      .Add("get_over_device_memcpy", Quantile(d2d, 0.5) / get_m)
      .Add("get_again", Gbps(get_again, total))
      .Add("get_again_over_device_memcpy", Quantile(d2d, 0.5) / Quantile(get_again, 0.5))
      .Add("floor_memcpy_peer", Gbps(peer, total))
      .Add("floor_memcpy_peer_whole", Gbps(peer_whole, total))
      .Add("floor_device_memcpy", Gbps(d2d, total));
  if (memory.cuda()) {
    row.Add("floor_pinned_staged", Gbps(staged, total)).Add("put_over_pinned_staged", Quantile(staged, 0.5) / put_m);
  }
  if (!raw_us.empty()) {
    row.Add("floor_raw_ucx_tcp", Gbps(raw_us, total)).Add("put_over_raw_ucx", Quantile(raw_us, 0.5) / put_m);
  }
  if (!view.empty()) row.Add("views_us_median", Quantile(view, 0.5));
  if (!slab_put.empty()) {
    const double slab_m = Quantile(slab_put, 0.5);
    row.Add("slab_put", Gbps(slab_put, total))
        .Add("slab_put_over_memcpy_peer", Quantile(peer, 0.5) / slab_m)
        .Add("slab_put_indexed_by_owner_us", Quantile(slab_flushed, 0.5))
        .Add("slab_put_indexed_over_memcpy_peer", Quantile(peer, 0.5) / Quantile(slab_flushed, 0.5))
        .Add("slab_put_visible_at_master_us", Quantile(slab_visible, 0.5))
        .Add("slab_put_visible_over_memcpy_peer", Quantile(peer, 0.5) / Quantile(slab_visible, 0.5));
  }
  JsonObject async;
  async.Add("returned_us", Quantile(async_return, 0.5))
      .Add("last_ready_us", Quantile(async_ready, 0.5))
      .Add("committed_us", Quantile(async_commit, 0.5));
  row.Add("stream_ordered_put", async);
  JsonObject master_part;
  master_part.Add("open_us", Quantile(open_us, 0.5))
      .Add("commit_us", Quantile(commit_us, 0.5))
      .Add("locate_us", Quantile(locate_us, 0.5))
      .Add("empty_call_us", Quantile(ping_us, 0.5))
      .Add("open_us_per_object", Quantile(open_us, 0.5) / static_cast<double>(n))
      .Add("commit_us_per_object", Quantile(commit_us, 0.5) / static_cast<double>(n));
  row.Add("master", master_part);
  return row;
}

// One object of 1 MiB put to another host, against raw UCX of the same
// bytes: the put's fixed costs (open, staging, the agent's reply, commit).
JsonObject SinglePut(Path& path, Buffers& buffers, Raw& raw, int reps) {
  const size_t bytes = size_t{1} << 20;
  std::vector<double> put, raw_us;
  for (int r = -1; r < reps; ++r) {
    const std::string key = "single:" + std::to_string(r + 1);
    double t = NowMicros();
    Check(path.prefill->PutFromDevice(key, buffers.src, bytes, {.preferred_segment = path.segment}), "single put");
    const double put_once = NowMicros() - t;
    Check(path.prefill->Remove(key), "remove");
    const double raw_once = RawSend(raw, std::span<const std::byte>(buffers.host.data(), bytes), bytes, 1);
    if (r < 0) continue;
    put.push_back(put_once);
    raw_us.push_back(raw_once);
  }
  JsonObject row;
  row.Add("put_us_median", Quantile(put, 0.5))
      .Add("raw_ucx_us_median", Quantile(raw_us, 0.5))
      .Add("put_over_raw_ucx_time", Quantile(put, 0.5) / Quantile(raw_us, 0.5));
  return row;
}

int Main(int argc, char** argv) {
  LogToStderr("pd_bench");
  Args args;
  args.kvd = DefaultKvd(argv[0]);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--kvd") args.kvd = value;
    else if (flag == "--backend") args.backend = value;
    else if (flag == "--layers") {
      args.layers.clear();
      for (long long v : Numbers(value)) args.layers.push_back(static_cast<int>(v));
    } else if (flag == "--sizes-kib") {
      args.sizes_kib.clear();
      for (long long v : Numbers(value)) args.sizes_kib.push_back(static_cast<size_t>(v));
    } else if (flag == "--reps") args.reps = std::stoi(value);
    else if (flag == "--paths") args.paths = value;
    else if (flag == "--kvd-busy-poll-us")
      args.kvd_args = {"--busy-poll-us", value};
    else if (flag == "--slab-mib")
      args.slab_mib = static_cast<size_t>(std::stoull(value));
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (args.backend == "cuda") RequireGpu("pd_bench");
  setenv("UCX_TLS", "tcp", 0);
  Raw raw;
  const bool with_raw = args.paths.find('c') != std::string::npos;
  if (with_raw && !StartRaw(raw, size_t{4} << 20, 4)) return 1;  // before this process loads UCX otherwise
  BenchMemory memory(args.backend);
  size_t largest = 0;
  for (int l : args.layers) {
    for (size_t s : args.sizes_kib) largest = std::max(largest, static_cast<size_t>(l) * 2 * s * 1024);
  }
  // With slabs, room for two of them (the live one and the next, each as
  // large as a batch: slab_puts.h) beside the plans' batch: the master's
  // plans' pages (kvd's callers') stay apart from the slabs' (the producer
  // uid's) while the producer holds their write fds (owned_space.h), and a
  // grant past the high watermark evicts.
  const size_t slab_room = args.slab_mib != 0 ? (largest >> 20) + 2 * std::max(args.slab_mib, largest >> 20) : 0;
  const std::string store = std::to_string((largest >> 20) * 2 + 256 + slab_room) + "MiB";
  Buffers buffers;
  buffers.consumer = memory.devices() > 1 ? 1 : 0;
  buffers.src = memory.Alloc(buffers.producer, largest);
  buffers.dst = memory.Alloc(buffers.consumer, largest);
  buffers.spare = memory.Alloc(buffers.consumer, largest);
  if (args.paths.find('c') != std::string::npos) buffers.host.assign(largest, std::byte{1});

  BenchMaster master(args.kvd, {});
  const std::string& address = master.address();
  const bool host = args.backend == "host";
  auto node_yaml = [&](const std::string& id, const std::string& devices) {
    return "backend: " + args.backend + "\ndevices: " + devices + "\n" +
           (host ? "host_devices: 2\nhost_device_memory: " +
                       std::to_string(2 * ((largest >> 20) * 2 + 512 + slab_room)) +
                       "MiB\ncapacity: " + std::to_string((largest >> 20) * 2 + 384 + slab_room) + "MiB\n"
                 : "") +
           "reserve_pages: 2\nlog_level: warn\nobject_store:\n  size: " + store + "\n  max_leases: 4096\n" +
           "master:\n  addresses: [\"" + address + "\"]\n  node_id: " + id +
           "\n  data_address: 127.0.0.1:0\n  retry_interval: 50ms\n";
  };
  const std::string two = memory.devices() > 1 ? "[0, 1]" : "[0]";
  const std::string second = memory.devices() > 1 ? "[1]" : "[0]";

  JsonObject out;
  out.Add("bench", "pd_bench").Add("backend", args.backend).Add("devices", static_cast<long long>(memory.devices()));
  if (memory.cuda()) out.Add("device", DeviceName());
  out.Add("reps", static_cast<long long>(args.reps));
  auto run_path = [&](Path& path) {
    JsonObject rows;
    for (int layers : args.layers) {
      for (size_t kib : args.sizes_kib) {
        rows.Add(std::to_string(layers) + "x" + std::to_string(kib) + "KiB",
                 RunCase(path, memory, buffers, layers, kib * 1024, args.reps, path.name == "c" ? &raw : nullptr));
      }
    }
    out.Add(path.name, rows);
  };
  if (args.paths.find('a') != std::string::npos) {
    BenchKvd one(args.kvd, "pd_one", node_yaml("n0", two), args.kvd_args);
    Path a{"a", Client(address, "n0", one.ipc_name(), args.backend),
           Client(address, "n0", one.ipc_name(), args.backend), memory.devices() > 1 ? "n0/1" : "n0/0", nullptr};
    WaitNodes(*a.prefill, 1);
    if (args.slab_mib != 0) {
      a.slab_prefill = Client(address, "n0", one.ipc_name(), args.backend);
      SlabPutOptions slab;
      slab.payload_bytes = uint64_t{args.slab_mib} << 20;
      Check(a.slab_prefill->UseSlabs(memory.devices() > 1 ? 1 : 0, slab), "use slabs");
    }
    run_path(a);
    a.slab_prefill.reset();
    a.prefill.reset();
    a.decode.reset();
  }
  if (args.paths.find('b') != std::string::npos || with_raw) {
    BenchKvd node_a(args.kvd, "pd_a", node_yaml("nA", "[0]"), args.kvd_args);
    BenchKvd node_b(args.kvd, "pd_b", node_yaml("nB", second), args.kvd_args);
    if (args.paths.find('b') != std::string::npos) {
      Path b{"b", Client(address, "nA", node_a.ipc_name(), args.backend),
             Client(address, "nB", node_b.ipc_name(), args.backend), "nB", nullptr};
      WaitNodes(*b.prefill, 2);
      if (args.slab_mib != 0) {
        b.slab_prefill = Client(address, "nA", node_a.ipc_name(), args.backend);
        SlabPutOptions slab;
        slab.payload_bytes = uint64_t{args.slab_mib} << 20;
        Check(b.slab_prefill->UseSlabsOn(memory.devices() > 1 ? "nB/1" : "nB/0", slab), "use slabs on nB");
      }
      run_path(b);
    }
    if (with_raw) {
      Path c{"c", Client(address, "nA", node_a.ipc_name(), args.backend, "pd-bench-elsewhere"),
             Client(address, "nB", node_b.ipc_name(), args.backend), "nB", nullptr};
      WaitNodes(*c.prefill, 2);
      run_path(c);
      out.Add("c_single_1MiB", SinglePut(c, buffers, raw, args.reps * 4));
    }
  }
  StopRaw(raw);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv::bench

int main(int argc, char** argv) { return nanokv::bench::Main(argc, argv); }
