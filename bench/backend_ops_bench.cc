// Per-page cost of each backend operation (p50/p99 in microseconds): create,
// export, import, map+access, unmap, release. In the same run, the two grant
// strategies they add up to: map+access of a page created ahead (nanokv's
// pool) against create+map+access per page (kvcached's), as a ratio.
//
//   backend_ops_bench [--backend auto|host|cuda|hip] [--pages N] [--rounds R]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "gpu/backend.h"

namespace nanokv {
namespace {

struct Samples {
  std::vector<double> create, exporting, importing, map_access, unmap, release;
  std::vector<double> create_map_access;  // kvcached's per-map strategy
};

#define BENCH_CHECK(expr)                                                       \
  do {                                                                          \
    ::nanokv::Status s_ = (expr);                                               \
    if (!s_.ok()) {                                                             \
      std::fprintf(stderr, "backend_ops_bench: %s: %s\n", #expr, s_.ToString().c_str()); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

template <typename T>
T Must(Result<T> result, const char* what) {
  if (!result.ok()) {
    std::fprintf(stderr, "backend_ops_bench: %s: %s\n", what, result.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(result).value();
}

void OneRound(gpu::Backend& b, size_t page, int pages, Samples* out) {
  using bench::NowMicros;
  int devices[] = {0};
  std::vector<gpu::PageHandle> created(pages), imported(pages);
  std::vector<int> fds(pages);
  uintptr_t base = Must(b.ReserveRange(page * pages, 0), "ReserveRange");

  for (int i = 0; i < pages; ++i) {
    double t = NowMicros();
    created[i] = Must(b.CreatePage(0, page), "CreatePage");
    out->create.push_back(NowMicros() - t);
  }
  for (int i = 0; i < pages; ++i) {
    double t = NowMicros();
    fds[i] = Must(b.ExportPage(created[i]), "ExportPage");
    out->exporting.push_back(NowMicros() - t);
  }
  for (int i = 0; i < pages; ++i) {
    double t = NowMicros();
    imported[i] = Must(b.ImportPage(fds[i], 0, page), "ImportPage");
    out->importing.push_back(NowMicros() - t);
  }
  for (int i = 0; i < pages; ++i) {
    uintptr_t at = base + page * i;
    double t = NowMicros();
    BENCH_CHECK(b.Map(at, page, imported[i]));
    BENCH_CHECK(b.SetAccess(at, page, devices));
    out->map_access.push_back(NowMicros() - t);
  }
  for (int i = 0; i < pages; ++i) {
    double t = NowMicros();
    BENCH_CHECK(b.Unmap(base + page * i, page));
    out->unmap.push_back(NowMicros() - t);
  }
  for (int i = 0; i < pages; ++i) {
    BENCH_CHECK(b.ReleasePage(imported[i]));
    double t = NowMicros();
    BENCH_CHECK(b.ReleasePage(created[i]));
    out->release.push_back(NowMicros() - t);
  }
  // kvcached's strategy: every grant creates, maps and sets access.
  for (int i = 0; i < pages; ++i) {
    uintptr_t at = base + page * i;
    double t = NowMicros();
    gpu::PageHandle h = Must(b.CreatePage(0, page), "CreatePage");
    BENCH_CHECK(b.Map(at, page, h));
    BENCH_CHECK(b.SetAccess(at, page, devices));
    out->create_map_access.push_back(NowMicros() - t);
    created[i] = h;
  }
  for (int i = 0; i < pages; ++i) {
    BENCH_CHECK(b.Unmap(base + page * i, page));
    BENCH_CHECK(b.ReleasePage(created[i]));
  }
  BENCH_CHECK(b.FreeRange(base, page * pages));
}

int Main(int argc, char** argv) {
  bench::LogToStderr("backend_ops_bench");
  std::string backend_name = "auto";
  int pages = 128, rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend")) backend_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--pages")) pages = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: backend_ops_bench [--backend NAME] [--pages N] [--rounds R]\n");
      return 2;
    }
  }
  if (pages < 1 || rounds < 1) {
    std::fprintf(stderr, "backend_ops_bench: --pages and --rounds must be positive\n");
    return 2;
  }
  auto backend = Must(gpu::OpenBackend(backend_name), "OpenBackend");
  gpu::DeviceInfo info = Must(backend->GetDeviceInfo(0), "GetDeviceInfo");
  size_t page = info.granularity;

  Samples s;
  OneRound(*backend, page, pages, &s);  // warm-up: driver and page tables
  s = Samples{};
  for (int r = 0; r < rounds; ++r) OneRound(*backend, page, pages, &s);

  double pool_grant = bench::Quantile(s.map_access, 0.5);
  double per_map_grant = bench::Quantile(s.create_map_access, 0.5);
  bench::JsonObject json;
  json.Add("bench", "backend_ops")
      .Add("backend", std::string(backend->name()))
      .Add("device", info.name)
      .Add("page_bytes", static_cast<long long>(page))
      .Add("pages_per_round", static_cast<long long>(pages))
      .Add("rounds", static_cast<long long>(rounds))
      .Add("unit", "us")
      .AddPercentiles("create", s.create)
      .AddPercentiles("export", s.exporting)
      .AddPercentiles("import", s.importing)
      .AddPercentiles("map_access", s.map_access)
      .AddPercentiles("unmap", s.unmap)
      .AddPercentiles("release", s.release)
      .AddPercentiles("create_map_access", s.create_map_access)
      .Add("create_per_map_over_pool_grant_p50", per_map_grant / pool_grant);
  std::printf("%s\n", json.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
