// The host tier under the object store (daemon/objects/object_index_tier.cc)
// against the backend's pinned copies in the same run, on the backend asked
// for (cuda on a GPU; host in CI, where both tiers are host memory):
//   demotion: an object's move from the store into the host tier (Begin,
//     the copy, Finish) against a copy of as many bytes from device memory
//     into pinned host memory (goal: >= 0.8x);
//   promotion: the move back (bytes, then the READY header) against the
//     pinned host-to-device copy (goal: >= 0.8x);
//   working set: three times the store, read at random, with a host tier
//     three times the store and without one: hit rate (a get that finds its
//     object, in either tier) and mean get time (a store hit: the copy out;
//     a host hit: the copy out of the host tier's pages; a miss: the recompute
//     stand-in, a put of the object again, the least a recompute costs).
//   host-tier get to device: a get of a host-tier object as libkv makes it
//     (the host tier's pages mapped read-only from the fds kvd hands out,
//     registered with the driver once per mapping, one host-to-device copy
//     per page) against the pinned host-to-device copy (goal: >= 0.8x).
// In the working set a host hit is read where it is, as an engine's get
// does, and the promotion it asks for runs after it (kvd's worker).
//
//   object_tier_bench [--backend host|cuda] [--object-mib M] [--objects N] [--reads R]
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "daemon/objects/object_index.h"
#include "gpu/device_buffer.h"

namespace nanokv {
namespace {

constexpr size_t kPage = 2u << 20;

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "object_tier_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Must(Result<T> result, const std::string& what) {
  if (!result.ok()) Die(what, result.status());
  return std::move(result).value();
}

void Must(const Status& status, const std::string& what) {
  if (!status.ok()) Die(what, status);
}

struct Store {
  std::unique_ptr<kvd::NodeState> node;
  std::unique_ptr<kvd::ObjectIndex> index;
};

// A node of one device whose store holds `store_objects` objects of
// `object_bytes` (and its header page), with a host tier of `host_objects`.
Store MakeStore(gpu::Backend& backend, size_t object_bytes, size_t store_objects, size_t host_objects) {
  const size_t store_pages = 1 + store_objects * object_bytes / kPage;
  kvd::NodeOptions options;
  kvd::PagePoolConfig pool;
  pool.device = 0;
  pool.page_bytes = kPage;
  pool.capacity_bytes = (store_pages + 2) * kPage;
  pool.reserve_pages = 2;
  options.pools.push_back(pool);
  Store store;
  store.node = Must(kvd::NodeState::Create(backend, options), "node");
  kvd::ObjectStoreConfig config;
  config.size = SizeOrShare{store_pages * kPage, 0};
  config.high_watermark = 1.0;
  config.low_watermark = 0.99;
  config.host_tier = host_objects * object_bytes;
  config.lease_ttl = std::chrono::milliseconds(60000);
  store.index = Must(kvd::ObjectIndex::Create(backend, *store.node, config), "store");
  return store;
}

// A producer's put as libkv's copy path makes it: header, bytes, READY, commit.
Status Put(gpu::Backend& backend, kvd::ObjectIndex& index, const std::string& key, const void* src, size_t bytes,
           gpu::CopyKind kind, uint64_t now_ns) {
  NANOKV_ASSIGN_OR_RETURN(ObjectPlan plan, index.OpenForWrite(key, bytes, 0, now_ns));
  NANOKV_ASSIGN_OR_RETURN(uintptr_t base, index.StoreBase(0));
  ObjectHeader header = WritingHeaderOf(plan, now_ns);
  NANOKV_RETURN_IF_ERROR(backend.Copy(reinterpret_cast<void*>(base + plan.header_offset), &header, sizeof(header),
                                      gpu::CopyKind::kHostToDevice));
  NANOKV_RETURN_IF_ERROR(backend.Copy(reinterpret_cast<void*>(base + plan.payload_offset), src, bytes, kind));
  header.state = static_cast<uint32_t>(ObjectState::kReady);
  NANOKV_RETURN_IF_ERROR(backend.Copy(reinterpret_cast<void*>(base + plan.header_offset), &header, sizeof(header),
                                      gpu::CopyKind::kHostToDevice));
  return index.Commit(key, plan.epoch, now_ns);
}

// A host-tier plan's pages as a reader maps them: read-only fds of the
// host tier's memfds, mapped PROT_READ back to back, each registered with
// the driver once (libkv/client/host_tier_mappings.cc).
struct HostTierView {
  gpu::Backend* backend = nullptr;
  std::vector<void*> pages;
  ~HostTierView() {
    for (void* page : pages) {
      backend->UnpinHost(page);
      munmap(page, kPage);
    }
  }
  // The plan's payload pages mapped; returns the spans' addresses.
  std::vector<const std::byte*> Map(kvd::ObjectIndex& index, const ObjectPlan& plan) {
    std::vector<const std::byte*> out;
    for (const ObjectSpan& span : plan.spans) {
      const int fd = Must(index.HostTierReadOnlyFd(plan.device, span.page_id), "host tier fd");
      void* page = mmap(nullptr, kPage, PROT_READ, MAP_SHARED, fd, 0);
      close(fd);
      if (page == MAP_FAILED) Die("mapping a host tier page", Status::Internal("mmap"));
      Status pinned = backend->PinHostReadOnly(page, kPage);
      if (!pinned.ok()) std::fprintf(stderr, "object_tier_bench: unpinned: %s\n", pinned.ToString().c_str());
      pages.push_back(page);
      out.push_back(static_cast<const std::byte*>(page) + span.offset);
    }
    return out;
  }
};

double GBps(size_t bytes, double micros) { return micros > 0 ? static_cast<double>(bytes) / micros / 1e3 : 0; }

int Main(int argc, char** argv) {
  bench::LogToStderr("object_tier_bench");
  std::string backend_name;
  size_t object_mib = 4, objects = 16, reads = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend"))
      backend_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--object-mib"))
      object_mib = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--objects"))
      objects = std::strtoul(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reads"))
      reads = std::strtoul(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: object_tier_bench [--backend host|cuda] [--object-mib M] [--objects N] [--reads R]\n");
      return 2;
    }
  }
  if (object_mib == 0 || objects == 0) return 2;
  auto backend = Must(gpu::OpenBackend(backend_name), "backend");
  const size_t bytes = object_mib << 20;
  // The floors copy as many distinct objects' bytes as the moves do, so
  // neither side reads from a warm cache the other has not.
  std::vector<std::byte> pinned(bytes * objects, std::byte{7});
  Must(backend->PinHost(pinned.data(), pinned.size()), "pin");
  auto device = Must(gpu::DeviceBuffer::Create(*backend, 0, bytes * objects), "device buffer");
  Must(backend->Copy(device->get(), pinned.data(), pinned.size(), gpu::CopyKind::kHostToDevice), "fill");
  auto slice = [&](size_t i) { return static_cast<std::byte*>(device->get()) + i * bytes; };

  bench::JsonObject json;
  json.Add("bench", "object_tier")
      .Add("backend", std::string(backend->name()))
      .Add("object_bytes", static_cast<long long>(bytes))
      .Add("objects", static_cast<long long>(objects))
      .Add("unit", "GB/s");

  // Demotion and promotion against the pinned copies, object by object.
  {
    Store s = MakeStore(*backend, bytes, objects, objects);
    uint64_t now = 1;
    double d2h = 0, h2d = 0, demote = 0, promote = 0;
    for (size_t i = 0; i < objects; ++i) {
      Must(Put(*backend, *s.index, "o" + std::to_string(i), slice(0), bytes, gpu::CopyKind::kDeviceToDevice, ++now),
           "put");
    }
    for (size_t i = 0; i < objects; ++i) {
      double t0 = bench::NowMicros();
      Must(backend->Copy(pinned.data() + i * bytes, slice(i), bytes, gpu::CopyKind::kDeviceToHost), "D2H");
      d2h += bench::NowMicros() - t0;
      t0 = bench::NowMicros();
      auto move = s.index->BeginDemotion(0, ++now);
      if (!move) Die("demotion", Status::Internal("nothing to demote"));
      Status copied = s.index->CopyMove(*move);
      if (!s.index->FinishMove(*move, copied, now)) Die("demotion", copied);
      demote += bench::NowMicros() - t0;
    }
    for (size_t i = 0; i < objects; ++i) {
      double t0 = bench::NowMicros();
      Must(backend->Copy(slice(i), pinned.data() + i * bytes, bytes, gpu::CopyKind::kHostToDevice), "H2D");
      h2d += bench::NowMicros() - t0;
      (void)s.index->GetLocation("o" + std::to_string(i), ++now);  // a get asks for it back
      t0 = bench::NowMicros();
      auto move = s.index->BeginPromotion(0, ++now);
      if (!move) Die("promotion", Status::Internal("nothing to promote"));
      Status copied = s.index->CopyMove(*move);
      if (!s.index->FinishMove(*move, copied, now)) Die("promotion", copied);
      promote += bench::NowMicros() - t0;
    }
    const size_t total = bytes * objects;
    json.Add("pinned_d2h", GBps(total, d2h))
        .Add("demotion", GBps(total, demote))
        .Add("demotion_over_pinned_d2h", d2h / demote)
        .Add("pinned_h2d", GBps(total, h2d))
        .Add("promotion", GBps(total, promote))
        .Add("promotion_over_pinned_h2d", h2d / promote);
  }

  // A host-tier object's get to device, as libkv makes it, against the
  // pinned host-to-device floor.
  {
    Store s = MakeStore(*backend, bytes, objects, objects);
    uint64_t now = 1;
    for (size_t i = 0; i < objects; ++i) {
      Must(Put(*backend, *s.index, "g" + std::to_string(i), slice(0), bytes, gpu::CopyKind::kDeviceToDevice, ++now),
           "put");
      auto move = s.index->BeginDemotion(0, ++now);
      if (!move) Die("demotion", Status::Internal("nothing to demote"));
      Status copied = s.index->CopyMove(*move);
      if (!s.index->FinishMove(*move, copied, now)) Die("demotion", copied);
    }
    HostTierView view{backend.get(), {}};
    double h2d = 0, get = 0;
    for (size_t i = 0; i < objects; ++i) {
      const ObjectPlan plan = Must(s.index->GetLocation("g" + std::to_string(i), ++now), "locate");
      if (plan.tier != ObjectTier::kHost) Die("host-tier get", Status::Internal("the plan names the store"));
      const std::vector<const std::byte*> spans = view.Map(*s.index, plan);  // mapped once, as libkv caches
      double t0 = bench::NowMicros();
      Must(backend->Copy(slice(i), pinned.data() + i * bytes, bytes, gpu::CopyKind::kHostToDevice), "H2D");
      h2d += bench::NowMicros() - t0;
      t0 = bench::NowMicros();
      std::byte* out = slice((i + 1) % objects);
      for (size_t k = 0; k < spans.size(); ++k) {
        Must(backend->Copy(out, spans[k], plan.spans[k].length, gpu::CopyKind::kHostToDevice), "host-tier get");
        out += plan.spans[k].length;
      }
      get += bench::NowMicros() - t0;
    }
    const size_t total = bytes * objects;
    json.Add("host_tier_get_to_device", GBps(total, get)).Add("host_tier_get_over_pinned_h2d", h2d / get);
  }

  // A working set three times the store, read at random, with and without
  // a host tier three times the store.
  for (const bool tier : {true, false}) {
    Store s = MakeStore(*backend, bytes, objects, tier ? 3 * objects : 0);
    uint64_t now = 1;
    auto put = [&](size_t i) {
      for (;;) {
        Status stored = Put(*backend, *s.index, "w" + std::to_string(i), device->get(), bytes,
                            gpu::CopyKind::kDeviceToDevice, ++now);
        if (stored.code() != Code::kUnavailable) return stored;
        s.index->RunTierWork(now);  // kvd's tier worker, in this thread
      }
    };
    for (size_t i = 0; i < 3 * objects; ++i) Must(put(i), "put");
    std::mt19937 random(11);
    size_t hits = 0;
    double spent = 0;
    for (size_t n = 0; n < reads; ++n) {
      const size_t i = random() % (3 * objects);
      const std::string key = "w" + std::to_string(i);
      const double t0 = bench::NowMicros();
      auto plan = s.index->GetLocation(key, ++now);
      if (plan.ok() && plan->tier == ObjectTier::kHost) {
        ++hits;  // read where it is, a page at a time (pageable here: the bench's own mapping)
        uint64_t at = 0;
        for (const ObjectSpan& span : plan->spans) {
          const int fd = Must(s.index->HostTierReadOnlyFd(0, span.page_id), "host tier fd");
          void* mapped = mmap(nullptr, kPage, PROT_READ, MAP_SHARED, fd, 0);
          close(fd);
          if (mapped == MAP_FAILED) Die("mapping a host tier page", Status::Internal("mmap"));
          std::memcpy(pinned.data() + at, static_cast<const std::byte*>(mapped) + span.offset, span.length);
          munmap(mapped, kPage);
          at += span.length;
        }
      } else if (plan.ok()) {
        ++hits;
        const uintptr_t base = Must(s.index->StoreBase(0), "base");
        Must(backend->Copy(pinned.data(), reinterpret_cast<const void*>(base + plan->payload_offset), bytes,
                           gpu::CopyKind::kDeviceToHost),
             "get");
      } else {
        Must(put(i), "recompute stand-in");
      }
      spent += bench::NowMicros() - t0;
      s.index->RunTierWork(now);
    }
    const std::string prefix = tier ? "with_tier_" : "without_tier_";
    json.Add(prefix + "hit_rate", static_cast<double>(hits) / static_cast<double>(reads))
        .Add(prefix + "mean_get_us", spent / static_cast<double>(reads));
  }
  backend->UnpinHost(pinned.data());
  std::printf("%s\n", json.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
