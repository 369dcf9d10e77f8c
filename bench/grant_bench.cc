// What a grant costs an engine, per page, against the floor in the same run.
//
//   engine, cold: KVTensor::Map of pages this process never saw (after a
//                 warm-up map of other pages): one grant round trip to kvd
//                 for the batch, fds passed, import, map, set access.
//   engine, warm: the same pages again after Unmap: the round trip, the
//                 import cache hit (no driver call), map, set access.
//   floor, warm:  map + set access of an imported handle, in one process.
//   floor, cold:  import + map + set access, in one process.
//   kvcached:     create + map + set access per page (each engine creates).
//   engine, hot:  KVCache::AllocateFor of one block that its reserve holds:
//                 no request, no driver call; goal <= 2 us.
//
// It starts its own kvd (--kvd, default: next to this binary, else
// ../entry/kvd) on a private socket, and prints one JSON object.
//
//   grant_bench [--backend auto|cuda|host] [--pages 64] [--batch 16] [--rounds 5]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "gpu/backend.h"
#include "nanokv/client.h"
#include "nanokv/kv_cache.h"
#include "nanokv/kv_tensor.h"

namespace nanokv {
namespace {

using bench::NowMicros;

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "grant_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Must(Result<T> result, const std::string& what) {
  if (!result.ok()) Die(what, result.status());
  return std::move(result).value();
}

void MustOk(const Status& status, const std::string& what) {
  if (!status.ok()) Die(what, status);
}

// Engine-side samples, per page, `batch` pages per Map call. The tensor has
// 2 * pages slots. A first Map of [0, pages) warms the process and the
// driver (its figures are dropped, as the floor's first round is); then
// [pages, 2 * pages) is mapped with pages kvd never sent this process: the
// cold grants. After that every grant is of an imported page: warm.
void EngineSamples(KVTensor& tensor, size_t pages, size_t batch, int rounds,
                   std::vector<double>* cold, std::vector<double>* warm) {
  auto map_all = [&](size_t first, std::vector<double>* out) {
    for (size_t at = first; at < first + pages; at += batch) {
      double t = NowMicros();
      MustOk(tensor.Map(at, batch), "KVTensor::Map");
      if (out != nullptr) out->push_back((NowMicros() - t) / static_cast<double>(batch));
    }
  };
  map_all(0, nullptr);
  map_all(pages, cold);
  MustOk(tensor.Unmap(0, 2 * pages), "KVTensor::Unmap");
  for (int r = 0; r < rounds; ++r) {
    map_all(0, warm);
    map_all(pages, warm);
    MustOk(tensor.Unmap(0, 2 * pages), "KVTensor::Unmap");
  }
}

// One-block allocations a KVCache's reserve serves, each freed (back into
// the reserve) before the next; only the allocation is timed.
std::vector<double> HotSamples(Client& client, int rounds) {
  KVCacheConfig config;
  config.layers = 2;
  config.kv_heads = 8;
  config.head_dim = 128;
  config.num_blocks = 1024;
  config.reserve_low_blocks = 8;
  config.reserve_high_blocks = 64;
  auto cache = Must(KVCache::Create(client, config), "KVCache::Create");
  for (int i = 0; i < 5000 && cache->Stats().reserve_blocks < 64; ++i) usleep(1000);
  std::vector<double> hot;
  for (int i = 0; i < 1000 * rounds; ++i) {
    double t = NowMicros();
    MustOk(cache->AllocateFor(1, config.block_size), "KVCache::AllocateFor");
    hot.push_back(NowMicros() - t);
    MustOk(cache->FreeFor(1), "KVCache::FreeFor");
  }
  if (cache->Stats().reserve_hits != hot.size()) {
    Die("hot samples", Status::Internal("an allocation missed the reserve"));
  }
  return hot;
}

struct Floors {
  std::vector<double> warm, cold, kvcached;
};

void FloorRound(gpu::Backend& b, size_t page, size_t pages, Floors* out) {
  int devices[] = {0};
  uintptr_t base = Must(b.ReserveRange(page * pages, 0), "ReserveRange");
  std::vector<gpu::PageHandle> created(pages), imported(pages);
  std::vector<int> fds(pages);
  for (size_t i = 0; i < pages; ++i) {
    created[i] = Must(b.CreatePage(0, page), "CreatePage");
    fds[i] = Must(b.ExportPage(created[i]), "ExportPage");
  }
  for (size_t i = 0; i < pages; ++i) {  // cold: import + map + access
    double t = NowMicros();
    imported[i] = Must(b.ImportPage(fds[i], 0, page), "ImportPage");
    MustOk(b.Map(base + i * page, page, imported[i]), "Map");
    MustOk(b.SetAccess(base + i * page, page, devices), "SetAccess");
    out->cold.push_back(NowMicros() - t);
  }
  for (size_t i = 0; i < pages; ++i) MustOk(b.Unmap(base + i * page, page), "Unmap");
  for (size_t i = 0; i < pages; ++i) {  // warm: map + access
    double t = NowMicros();
    MustOk(b.Map(base + i * page, page, imported[i]), "Map");
    MustOk(b.SetAccess(base + i * page, page, devices), "SetAccess");
    out->warm.push_back(NowMicros() - t);
  }
  for (size_t i = 0; i < pages; ++i) {
    MustOk(b.Unmap(base + i * page, page), "Unmap");
    MustOk(b.ReleasePage(imported[i]), "ReleasePage");
    MustOk(b.ReleasePage(created[i]), "ReleasePage");
  }
  for (size_t i = 0; i < pages; ++i) {  // kvcached: create + map + access
    double t = NowMicros();
    gpu::PageHandle h = Must(b.CreatePage(0, page), "CreatePage");
    MustOk(b.Map(base + i * page, page, h), "Map");
    MustOk(b.SetAccess(base + i * page, page, devices), "SetAccess");
    out->kvcached.push_back(NowMicros() - t);
    created[i] = h;
  }
  for (size_t i = 0; i < pages; ++i) {
    MustOk(b.Unmap(base + i * page, page), "Unmap");
    MustOk(b.ReleasePage(created[i]), "ReleasePage");
  }
  MustOk(b.FreeRange(base, page * pages), "FreeRange");
}

int Main(int argc, char** argv) {
  bench::LogToStderr("grant_bench");
  std::string backend_name = "auto", kvd_path = bench::DefaultKvd(argv[0]);
  size_t pages = 64, batch = 16;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--backend") backend_name = argv[i + 1];
    else if (flag == "--kvd") kvd_path = argv[i + 1];
    else if (flag == "--pages") pages = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--batch") batch = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: grant_bench [--backend NAME] [--kvd PATH] [--pages N] [--batch B] [--rounds R]\n");
      return 2;
    }
  }
  if (pages == 0 || batch == 0 || pages % batch != 0 || rounds < 1) {
    std::fprintf(stderr, "grant_bench: --pages must be a positive multiple of --batch\n");
    return 2;
  }

  // A private kvd for this run, sized for the engine's pages and a margin.
  std::string capacity = std::to_string((2 * pages + 16) * (2u << 20));
  bench::BenchKvd kvd(kvd_path, "grant_bench", "",
                      {"--backend", backend_name, "--capacity", capacity, "--reserve-pages",
                       std::to_string(2 * pages), "--log-level", "warn"});
  ClientOptions options;
  options.ipc_name = kvd.ipc_name();
  options.tenant = "grant_bench";
  auto attached = bench::BenchKvd::Retry([&] { return Client::Attach(options); });
  std::unique_ptr<Client> client = Must(std::move(attached), "attach to kvd");
  auto tensor = Must(KVTensor::Create(*client, 0, 2 * pages * client->page_bytes()), "KVTensor::Create");

  std::vector<double> cold, warm;
  EngineSamples(*tensor, pages, batch, rounds, &cold, &warm);
  ClientStats stats = client->stats();
  std::vector<double> hot = HotSamples(*client, rounds);

  auto backend = Must(gpu::OpenBackend(client->backend_name()), "OpenBackend");
  Floors floors;
  FloorRound(*backend, client->page_bytes(), pages, &floors);  // warm-up
  floors = Floors{};
  for (int r = 0; r < rounds; ++r) FloorRound(*backend, client->page_bytes(), pages, &floors);

  double warm_p50 = bench::Quantile(warm, 0.5), cold_p50 = bench::Quantile(cold, 0.5);
  double floor_warm = bench::Quantile(floors.warm, 0.5), floor_cold = bench::Quantile(floors.cold, 0.5);
  double kvcached = bench::Quantile(floors.kvcached, 0.5);
  bench::JsonObject json;
  json.Add("bench", "grant")
      .Add("backend", client->backend_name())
      .Add("page_bytes", static_cast<long long>(client->page_bytes()))
      .Add("pages", static_cast<long long>(pages))
      .Add("batch", static_cast<long long>(batch))
      .Add("rounds", static_cast<long long>(rounds))
      .Add("unit", "us per page")
      .AddPercentiles("engine_cold", cold)
      .AddPercentiles("engine_warm", warm)
      .AddPercentiles("floor_cold_import_map_access", floors.cold)
      .AddPercentiles("floor_warm_map_access", floors.warm)
      .AddPercentiles("kvcached_create_map_access", floors.kvcached)
      .AddPercentiles("engine_hot_cache_reserve", hot)
      .Add("warm_over_floor", warm_p50 / floor_warm)
      .Add("cold_over_floor", cold_p50 / floor_cold)
      .Add("kvcached_over_warm", kvcached / warm_p50)
      .Add("goal_warm_le_1.15x", warm_p50 / floor_warm <= 1.15)
      .Add("goal_cold_le_1.2x", cold_p50 / floor_cold <= 1.2)
      .Add("goal_1.5x_faster_than_kvcached", kvcached / warm_p50 >= 1.5)
      .Add("goal_hot_le_2us", bench::Quantile(hot, 0.5) <= 2.0)
      .Add("imports", static_cast<long long>(stats.pages_imported))
      .Add("cache_hits", static_cast<long long>(stats.pages_reused));
  std::printf("%s\n", json.str().c_str());
  tensor.reset();
  client.reset();
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
