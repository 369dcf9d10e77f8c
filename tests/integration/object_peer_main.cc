// A second process for the object store's integration tests:
//   object_peer put <ipc_name> <key> <bytes> <seed>         plan, copy, commit
//   object_peer get <ipc_name> <key> <bytes> <seed>         get, compare byte-exact
//   object_peer put-device <ipc_name> <key> <bytes> <seed>  the pattern in a device
//       buffer of this process, PutFromDevice (kernels on cuda)
//   object_peer get-device <ipc_name> <key> <bytes> <seed>  GetToDevice into a device
//       buffer, copied out and compared byte-exact
//   object_peer remove <ipc_name> <key> 0 0                 remove the object
//   object_peer view <ipc_name> <key> <bytes> <seed>        a view of the object, its
//       bytes compared, then "viewing" on stdout and a sleep until killed
//   object_peer read-hold <ipc_name> <key> <bytes> <seed>   a reader's lease and
//       plan, half the bytes read and compared, then "reading <tier>" on stdout and
//       a sleep until killed (a reader killed mid-read)
//   object_peer scribble <ipc_name> <key> <bytes> <seed>    writes through the READY
//       object's mapping, which is a reader's (read-only): host stores a byte by
//       hand (SIGSEGV expected); elsewhere the backend copies one in (refused
//       expected: exit 20)
//   object_peer slab-abandon <ipc_name> <key> <bytes> <seed>  a v2 slab on device 0:
//       <key> put and announced, <key>:untold put and not, then "abandoned" on
//       stdout and an exit with the slab never released (a producer that dies)
// Exit 0 on success; 1 with the reason on stderr.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "nanokv/object_store.h"
#include "tests/integration/object_pattern.h"
#include "tests/integration/slab_producer.h"

namespace {

int Failed(const char* what, const nanokv::Status& status) {
  std::fprintf(stderr, "%s: %s\n", what, status.ToString().c_str());
  return 1;
}

int RunDevice(nanokv::ObjectStore& store, const std::string& backend_name, bool put,
              const std::string& key, const std::vector<std::byte>& data) {
  auto backend = nanokv::gpu::OpenBackend(backend_name);
  if (!backend.ok()) return Failed("open backend", backend.status());
  // A put stages on device 0 and asks for the object there; a get reads into
  // a buffer on the object's own device, as a reader of that GPU would (the
  // peer names no access_devices, so no other device reaches its pages).
  int device_index = 0;
  if (!put) {
    auto plan = store.GetLocation(key);
    if (!plan.ok()) return Failed("locate", plan.status());
    device_index = plan->device;
  }
  auto buffer = nanokv::gpu::DeviceBuffer::Create(**backend, device_index, data.size() + 1);  // +1: past the end
  if (!buffer.ok()) return Failed("device buffer", buffer.status());
  void* device = (*buffer)->get();
  std::printf("device transfers use kernels: %d\n", store.device_transfers_use_kernels() ? 1 : 0);
  if (put) {
    nanokv::Status copied = (*backend)->Copy(device, data.data(), data.size(),
                                             nanokv::gpu::CopyKind::kHostToDevice);
    if (!copied.ok()) return Failed("stage the pattern", copied);
    nanokv::Status stored = store.PutFromDevice(key, device, data.size(), 0);
    return stored.ok() ? 0 : Failed("put from device", stored);
  }
  nanokv::Status cleared = (*backend)->Fill(device, 0xEE, (*buffer)->size());
  if (!cleared.ok()) return Failed("clear", cleared);
  auto got = store.GetToDevice(key, device, (*buffer)->size());
  if (!got.ok()) return Failed("get to device", got.status());
  if (*got != data.size()) {
    std::fprintf(stderr, "get to device: %llu bytes, expected %zu\n", static_cast<unsigned long long>(*got),
                 data.size());
    return 1;
  }
  std::vector<std::byte> out(data.size() + 1);
  nanokv::Status copied = (*backend)->Copy(out.data(), device, out.size(), nanokv::gpu::CopyKind::kDeviceToHost);
  if (!copied.ok()) return Failed("copy out", copied);
  if (out[data.size()] != std::byte{0xEE}) {
    std::fprintf(stderr, "get to device wrote past the object's end\n");
    return 1;
  }
  out.pop_back();
  if (out != data) {
    std::fprintf(stderr, "get to device: %zu bytes differ from the pattern\n", out.size());
    return 1;
  }
  return 0;
}

// Issue 19 item 12: a reader's mapping is read-only.
int Scribble(nanokv::ObjectStore& store, const std::string& backend_name, const std::string& key) {
  auto plan = store.GetLocation(key);
  if (!plan.ok()) return Failed("locate", plan.status());
  auto payload = store.PayloadPointer(*plan);
  if (!payload.ok()) return Failed("payload pointer", payload.status());
  if (backend_name == "host") {
    std::fflush(stdout);
    volatile unsigned char* byte = static_cast<unsigned char*>(*payload);
    *byte = static_cast<unsigned char>(*byte ^ 0xFF);  // faults: PROT_READ
    std::fprintf(stderr, "wrote through a reader's mapping\n");
    return 1;
  }
  // A backend of this process that did not map the page: the driver itself
  // must refuse (or fault on) the write into the read-only mapping.
  auto backend = nanokv::gpu::OpenBackend(backend_name);
  if (!backend.ok()) return Failed("open backend", backend.status());
  unsigned char byte = 0x5A;
  nanokv::Status wrote = (*backend)->Copy(*payload, &byte, 1, nanokv::gpu::CopyKind::kHostToDevice);
  if (wrote.ok()) {
    std::fprintf(stderr, "the driver let a copy write through a read-only mapping\n");
    return 1;
  }
  std::printf("refused: %s\n", wrote.ToString().c_str());
  return 20;
}

int ReadAndHold(nanokv::ObjectStore& store, const std::string& key, const std::vector<std::byte>& data) {
  auto lease = store.Lease(key);
  if (!lease.ok()) return Failed("lease", lease.status());
  auto plan = store.GetLocation(key);
  if (!plan.ok()) return Failed("locate", plan.status());
  auto payload = store.PayloadPointer(*plan);
  if (!payload.ok()) return Failed("map", payload.status());
  const size_t half = std::min(data.size(), static_cast<size_t>(plan->bytes_total)) / 2;
  if (std::memcmp(*payload, data.data(), half) != 0) {
    std::fprintf(stderr, "read-hold: the first half differs from the pattern\n");
    return 1;
  }
  std::printf("reading %s\n", plan->tier == nanokv::ObjectTier::kHost ? "host" : "gpu");
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(
        stderr,
        "usage: object_peer put|get|put-device|get-device|scribble|remove|view|read-hold|slab-abandon <ipc_name> <key> "
        "<bytes> <seed>\n");
    return 2;
  }
  std::string mode = argv[1];
  nanokv::ObjectStoreOptions options;
  options.ipc_name = argv[2];
  const char* backend = std::getenv("NANOKV_TEST_BACKEND");
  options.backend = backend != nullptr && *backend != '\0' ? backend : "host";
  std::string key = argv[3];
  size_t bytes = std::strtoull(argv[4], nullptr, 10);
  auto seed = static_cast<uint8_t>(std::atoi(argv[5]));
  auto store = nanokv::ObjectStore::Open(options);
  if (!store.ok()) return Failed("open", store.status());
  auto data = nanokv::testing::ObjectPattern(bytes, seed);
  if (mode == "put-device" || mode == "get-device") {
    return RunDevice(**store, options.backend, mode == "put-device", key, data);
  }
  if (mode == "read-hold") return ReadAndHold(**store, key, data);
  if (mode == "scribble") return Scribble(**store, options.backend, key);
  if (mode == "slab-abandon") {
    auto copier = nanokv::gpu::OpenBackend(options.backend);
    if (!copier.ok()) return Failed("open backend", copier.status());
    auto slab = (*store)->AcquireSlab(0, 4 * bytes + 4096, 8, 8);
    if (!slab.ok()) return Failed("slab", slab.status());
    nanokv::Status put = nanokv::testing::SlabPut(**slab, **copier, key, data);
    if (put.ok()) put = nanokv::testing::SlabPut(**slab, **copier, key + ":untold", data, /*announce=*/false);
    if (!put.ok()) return Failed("slab put", put);
    std::printf("abandoned\n");
    std::fflush(stdout);
    _exit(0);  // no release, no destructor: the connection just closes
  }
  if (mode == "put") {
    nanokv::Status put = (*store)->Put(key, data, 0);
    return put.ok() ? 0 : Failed("put", put);
  }
  if (mode == "remove") {
    nanokv::Status removed = (*store)->Remove(key);
    return removed.ok() ? 0 : Failed("remove", removed);
  }
  if (mode == "view") {
    auto view = (*store)->View(key);
    if (!view.ok()) return Failed("view", view.status());
    // The host backend's device memory is this process's: read in place.
    if (options.backend == "host" &&
        (view->size() != data.size() || std::memcmp(view->data(), data.data(), data.size()) != 0)) {
      std::fprintf(stderr, "view: its bytes differ from the pattern\n");
      return 1;
    }
    std::printf("viewing\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  auto got = (*store)->Get(key);
  if (!got.ok()) return Failed("get", got.status());
  if (*got != data) {
    std::fprintf(stderr, "get: %zu bytes differ from the pattern\n", got->size());
    return 1;
  }
  return 0;
}
