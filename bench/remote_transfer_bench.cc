// The data path between nodes, against its floors in the same run:
//   remote:  ClusterClient put and get of 1-256 MiB objects into and out of
//            another kvd's store (a master in this process, two kvds as
//            nodes n0 and n1, the client on n0, every copy on n1), through
//            n1's transfer agent: chunks, host staging, the store pages.
//   raw_ucp: the same bytes in the same chunks and depth over UCP active
//            messages (rendezvous) to a forked process that only receives
//            and acknowledges: no index, no staging copies, no store.
//   get_into: the same get into the caller's memory (ClusterClient::GetInto,
//            a buffer used before): no allocation, no first touch.
//   device:  put from and get into device memory of --backend
//            (PutFromDevice, GetToDevice: chunks through the client's
//            pinned staging buffers).
//   staging: the copies alone (a chunk at a time, memcpy: the host
//            backend's copy; cuda would be cudaMemcpy to/from pinned host).
// UCX_TLS defaults to tcp for all of them (set it to compare others).
//
//   remote_transfer_bench [--kvd PATH] [--backend host|cuda] [--sizes 1,4,16,64,256] [--reps 5]
//                         [--chunk-mib 4] [--depth 4]
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "bench/raw_ucp_floor.h"
#include "gpu/device_buffer.h"
#include "ipc/ucx/ucx.h"
#include "master/service/master_server.h"
#include "nanokv/cluster_client.h"

namespace nanokv::bench {
namespace {

struct Args {
  std::string kvd;
  std::string backend = "host";
  std::vector<size_t> sizes_mib = {1, 4, 16, 64, 256};
  int reps = 5;
  size_t chunk = size_t{4} << 20;
  int depth = 4;
};

double GBps(size_t bytes, double micros) { return static_cast<double>(bytes) / micros / 1e3; }

// --- the remote path ------------------------------------------------------

JsonObject Rates(const std::vector<double>& micros, size_t bytes) {
  std::vector<double> rates;
  for (double m : micros) rates.push_back(GBps(bytes, m));
  JsonObject o;
  o.Add("GBps_best", *std::max_element(rates.begin(), rates.end()))
      .Add("GBps_median", Quantile(rates, 0.5))
      .Add("ms_median", Quantile(micros, 0.5) / 1e3);
  return o;
}

std::vector<long long> Numbers(const std::string& text) {
  std::vector<long long> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

int Main(int argc, char** argv) {
  LogToStderr("remote_transfer_bench");
  Args args;
  args.kvd = DefaultKvd(argv[0]);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--kvd") args.kvd = value;
    else if (flag == "--backend") args.backend = value;
    else if (flag == "--sizes") {
      args.sizes_mib.clear();
      for (long long n : Numbers(value)) args.sizes_mib.push_back(static_cast<size_t>(n));
    } else if (flag == "--reps") args.reps = std::stoi(value);
    else if (flag == "--chunk-mib") args.chunk = std::stoul(value) << 20;
    else if (flag == "--depth") args.depth = std::stoi(value);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  setenv("UCX_TLS", "tcp", 0);
  size_t largest = 1;
  for (size_t m : args.sizes_mib) largest = std::max(largest, m);

  // The raw floor's receiver first, before this process loads UCX.
  Raw raw;
  if (!StartRaw(raw, args.chunk, args.depth)) return 1;

  // A master here, two kvds as nodes; the client is n0, every copy n1's.
  master::MasterConfig config;
  config.listen = "127.0.0.1:0";
  config.rebuild_window = std::chrono::milliseconds(0);
  config.id = "bench";
  auto server = master::MasterServer::Start(config);
  if (!server.ok()) return 1;
  const std::string address = (*server)->address();
  auto node = [&](const std::string& id, size_t store_mib) {
    const std::string transfer = "  transfer:\n    chunk: " + std::to_string(args.chunk) +
                                 "\n    depth: " + std::to_string(args.depth) + "\n";
    const std::string host = args.backend != "host" ? ""
                                                    : "host_device_memory: " + std::to_string(2 * store_mib + 128) +
                                                          "MiB\n";
    return "backend: " + args.backend + "\ncapacity: " + std::to_string(store_mib + 64) + "MiB\n" + host +
           "reserve_pages: 2\nlog_level: warn\nobject_store:\n  size: " +
           std::to_string(store_mib) + "MiB\nmaster:\n  addresses: [\"" + address + "\"]\n  node_id: " + id +
           "\n  data_address: 127.0.0.1:0\n  retry_interval: 50ms\n" + transfer;
  };
  BenchKvd n0(args.kvd, "remote_bench_n0", node("n0", 16), {});
  BenchKvd n1(args.kvd, "remote_bench_n1", node("n1", largest + 16), {});
  ClusterClientOptions options;
  options.masters = {address};
  options.node_id = "n0";
  options.ipc_name = n0.ipc_name();
  options.request_timeout_ms = 60'000;
  auto client = std::move(ClusterClient::Connect(options)).value();
  auto alive = BenchKvd::Retry([&]() -> Result<bool> {
    auto status = client->Cluster();
    if (!status.ok()) return status.status();
    int up = 0;
    for (const auto& n : status->nodes) up += n.state == "alive" ? 1 : 0;
    if (up == 2) return true;
    return Status::Unavailable("nodes not up yet");
  });
  if (!alive.ok()) {
    std::fprintf(stderr, "the kvds never registered: %s\n", alive.status().ToString().c_str());
    return 1;
  }

  JsonObject out;
  out.Add("bench", "remote_transfer_bench")
      .Add("backend", args.backend)
      .Add("transport", std::string("UCX_TLS=") + std::getenv("UCX_TLS"))
      .Add("cpus", static_cast<long long>(std::thread::hardware_concurrency()))
      .Add("chunk_bytes", static_cast<long long>(args.chunk))
      .Add("depth", static_cast<long long>(args.depth))
      .Add("reps", static_cast<long long>(args.reps));
  // Warm-up, not measured: endpoints made (UCX wires up on first use), the
  // agents' staging buffers allocated.
  {
    std::vector<std::byte> warm(args.chunk * static_cast<size_t>(args.depth) + 1);
    (void)client->Put("bench:warm", warm, {.preferred_segment = "n1"});
    (void)client->Get("bench:warm");
    (void)client->Remove("bench:warm");
    RawSend(raw, warm, args.chunk, args.depth);
  }
  auto device_backend = gpu::OpenBackend(args.backend);
  if (!device_backend.ok()) {
    std::fprintf(stderr, "backend %s: %s\n", args.backend.c_str(), device_backend.status().ToString().c_str());
    return 1;
  }
  auto device = gpu::DeviceBuffer::Create(**device_backend, 0, largest << 20);
  if (!device.ok()) {
    std::fprintf(stderr, "device buffer: %s\n", device.status().ToString().c_str());
    return 1;
  }
  int round = 0;
  for (size_t mib : args.sizes_mib) {
    const size_t bytes = mib << 20;
    std::vector<std::byte> data(bytes);
    for (size_t i = 0; i < bytes; i += 4096) data[i] = static_cast<std::byte>(i / 4096);
    std::vector<std::byte> sink(bytes, std::byte{2});  // GetInto's, touched before
    (void)(*device_backend)->Copy((*device)->get(), data.data(), bytes, gpu::CopyKind::kHostToDevice);
    std::vector<double> put, get, get_into, put_device, get_device, raw_us, staging, plan_calls, locate;
    std::vector<std::byte> store(bytes, std::byte{1});  // touched: kvd's store pages are
    for (int r = 0; r < args.reps; ++r) {
      const std::string key = "bench:" + std::to_string(round++);
      double t = NowMicros();
      Status stored = client->Put(key, data, {.preferred_segment = "n1"});
      put.push_back(NowMicros() - t);
      if (!stored.ok()) {
        std::fprintf(stderr, "put %s: %s\n", key.c_str(), stored.ToString().c_str());
        return 1;
      }
      t = NowMicros();
      auto back = client->Get(key);
      get.push_back(NowMicros() - t);
      if (!back.ok() || back->size() != bytes) {
        std::fprintf(stderr, "get %s: %s\n", key.c_str(), back.status().ToString().c_str());
        return 1;
      }
      t = NowMicros();
      auto into = client->GetInto(key, sink);
      get_into.push_back(NowMicros() - t);
      t = NowMicros();
      (void)client->GetLocation(key);
      locate.push_back(NowMicros() - t);
      (void)client->Remove(key);
      t = NowMicros();
      Status from_device = client->PutFromDevice(key, (*device)->get(), bytes, {.preferred_segment = "n1"});
      put_device.push_back(NowMicros() - t);
      t = NowMicros();
      auto to_device = client->GetToDevice(key, (*device)->get(), bytes);
      get_device.push_back(NowMicros() - t);
      if (!into.ok() || !from_device.ok() || !to_device.ok()) {
        std::fprintf(stderr, "%s: get into %s, put from device %s, get to device %s\n", key.c_str(),
                     into.status().ToString().c_str(), from_device.ToString().c_str(),
                     to_device.status().ToString().c_str());
        return 1;
      }
      (void)client->Remove(key);
      // The master's part of a put alone: open and commit, no bytes moved.
      t = NowMicros();
      auto plan = client->OpenForWrite(key, bytes, {.preferred_segment = "n1"});
      if (plan.ok()) (void)client->Commit(*plan);
      plan_calls.push_back(NowMicros() - t);
      (void)client->Remove(key);
      raw_us.push_back(RawSend(raw, data, args.chunk, args.depth));
      // The agent's own copy of a put (a staging chunk into the store), or
      // of a get (the store into a staging chunk): one pass over the object.
      t = NowMicros();
      for (size_t at = 0; at < bytes; at += args.chunk) {
        std::memcpy(store.data() + at, data.data() + at, std::min(args.chunk, bytes - at));
      }
      staging.push_back(NowMicros() - t);
    }
    JsonObject row;
    row.Add("remote_put", Rates(put, bytes))
        .Add("remote_get", Rates(get, bytes))
        .Add("remote_get_into", Rates(get_into, bytes))
        .Add("remote_put_from_device", Rates(put_device, bytes))
        .Add("remote_get_to_device", Rates(get_device, bytes))
        .Add("raw_ucp_am", Rates(raw_us, bytes))
        .Add("staging_copy_memcpy", Rates(staging, bytes))
        .Add("put_open_commit_ms_median", Quantile(plan_calls, 0.5) / 1e3)
        .Add("get_location_ms_median", Quantile(locate, 0.5) / 1e3);
    out.Add(std::to_string(mib) + "MiB", row);
  }
  client.reset();
  (*server)->Stop();
  StopRaw(raw);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv::bench

int main(int argc, char** argv) { return nanokv::bench::Main(argc, argv); }
