// nanokv_selfcheck: opens the GPU backend the way kvd will, lists its devices
// and runs one page through its whole life (create, export, import, map, set
// access, write, read back through the second handle, unmap, release).
// Exit code 0 when every step held; each failure names the call and error.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gpu/backend.h"

namespace nanokv {
namespace {

bool Step(const char* what, const Status& status) {
  std::printf("  %-34s %s\n", what, status.ok() ? "ok" : status.ToString().c_str());
  return status.ok();
}

bool CheckDevice(gpu::Backend& b, int device) {
  auto info = b.GetDeviceInfo(device);
  if (!Step("device info", info.status())) return false;
  auto free_bytes = b.GetFreeMemory(device);
  std::printf("device %d: %s, %.1f GiB, %.1f GiB free, granularity %zu KiB\n", device,
              info->name.c_str(), static_cast<double>(info->total_bytes) / (1 << 30),
              free_bytes.ok() ? static_cast<double>(*free_bytes) / (1 << 30) : -1.0,
              info->granularity >> 10);
  size_t page_bytes = info->granularity;
  auto page = b.CreatePage(device, page_bytes);
  if (!Step("create page", page.status())) return false;
  auto fd = b.ExportPage(*page);
  if (!Step("export as fd", fd.status())) return false;
  auto imported = b.ImportPage(*fd, device, page_bytes);
  if (!Step("import fd (second handle)", imported.status())) return false;
  auto base = b.ReserveRange(2 * page_bytes, 0);
  if (!Step("reserve range", base.status())) return false;
  int devices[] = {device};
  bool ok = Step("map first handle", b.Map(*base, page_bytes, *page)) &&
            Step("map second handle", b.Map(*base + page_bytes, page_bytes, *imported)) &&
            Step("set access over both", b.SetAccess(*base, 2 * page_bytes, devices));
  std::vector<uint8_t> data(page_bytes), back(page_bytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
  ok = ok &&
       Step("write through first", b.Copy(reinterpret_cast<void*>(*base), data.data(), page_bytes,
                                          gpu::CopyKind::kHostToDevice)) &&
       Step("read through second",
            b.Copy(back.data(), reinterpret_cast<void*>(*base + page_bytes), page_bytes,
                   gpu::CopyKind::kDeviceToHost));
  if (ok) ok = Step("bytes match", back == data ? Status::OK()
                                                : Status::Internal("shared page bytes differ"));
  ok = Step("unmap", b.Unmap(*base, 2 * page_bytes)) && ok;
  ok = Step("release both handles", b.ReleasePage(*page)) && ok;
  ok = Step("", b.ReleasePage(*imported)) && ok;
  ok = Step("free range", b.FreeRange(*base, 2 * page_bytes)) && ok;
  return ok;
}

int Main(int argc, char** argv) {
  CLI::App app{"nanokv_selfcheck: check that the GPU backend works on this machine"};
  std::string backend_name = "auto";
  app.add_option("--backend", backend_name, "auto, host, cuda or hip")
      ->check(CLI::IsMember({"auto", "host", "cuda", "hip"}));
  CLI11_PARSE(app, argc, argv);

  auto backend = gpu::OpenBackend(backend_name);
  if (!backend.ok()) {
    std::fprintf(stderr, "nanokv_selfcheck: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  gpu::Backend& b = **backend;
  std::printf("backend %s, %d device(s)\n", std::string(b.name()).c_str(), b.device_count());
  bool ok = true;
  for (int d = 0; d < b.device_count(); ++d) ok = CheckDevice(b, d) && ok;
  std::printf("selfcheck %s\n", ok ? "passed" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
