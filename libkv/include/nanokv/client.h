// The engine side of nanokv: attach to the node's kvd, ask it for pages, give
// them back. An engine (an LLM inference engine, or a test) holds one Client
// per kvd it uses; KVTensor (nanokv/kv_tensor.h) maps the pages it grants.
//
//   auto client = nanokv::Client::AttachFromEnv();   // ENABLE_NANOKV=1 ...
//   auto tensor = nanokv::KVTensor::Create(**client, /*device=*/0, 8ull << 30);
//   (*tensor)->Grow(64);   // 64 pages mapped and accessible at data()
//
// Words: a *page* is one physical allocation of page_bytes() that kvd created
// and exported; kvd names it by (device, page id). A page id keeps its name
// while kvd recycles it to new physical memory: the *generation* tells the
// two apart. A *grant* is kvd making this engine a holder of some pages; the
// engine imports each page's handle the first time it sees it and keeps it
// (the import cache), so granting a page it held before costs no driver call.
#ifndef NANOKV_CLIENT_H_
#define NANOKV_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv {

struct ClientOptions {
  // kvd's IPC name: its socket is $NANOKV_RUN_DIR/<ipc_name>.sock when that
  // is set, else where kvd's segment /dev/shm/nanokv_<ipc_name> says.
  std::string ipc_name = "nanokv";
  // A name for humans and kvctl, unique per kvd. Empty: "<program>-<pid>".
  std::string tenant;
  // Tenants of one group may share pages (Share). Empty: the group of this
  // process's uid ("uid:<uid>"); another must be one kvd's config lets this
  // uid join (groups:), else the attach is kPermissionDenied.
  std::string group;
  // The limit to ask for: bytes, or a fraction of kvd's capacity when
  // limit_bytes is 0. Both 0: kvd's default. kvd may grant less.
  uint64_t limit_bytes = 0;
  double limit_fraction = 0;
  // Or a share of this engine's own device(s) (`devices`, else one device),
  // as kvcached's KVCACHED_GPU_UTILIZATION means it; used when both above are 0.
  double limit_device_fraction = 0;
  // The page size this engine was built for; Attach fails (kInvalidArgument)
  // when kvd's differs. 0: accept kvd's.
  size_t expect_page_bytes = 0;
  // The devices this engine uses, as kvd numbers them. Empty: all of kvd's.
  std::vector<int> devices;
  // How long a request waits for kvd's answer before it fails with
  // kUnavailable. 0: wait until kvd answers or goes away.
  uint32_t request_timeout_ms = 60'000;
  // When kvd goes away (it crashed, or stopped to be restarted), reconnect
  // with back-off, attach again as the same tenant and hand back the pages
  // this engine holds, so their KV survives the restart. Gives up after
  // reconnect_timeout_ms (0: never).
  bool reconnect = true;
  uint32_t reconnect_timeout_ms = 60'000;
};

// The client options the environment asks for, kvcached's names included:
//   ENABLE_NANOKV (alias ENABLE_KVCACHED)    1/true/yes/on or 0/false/no/off
//   NANOKV_IPC_NAME (alias KVCACHED_IPC_NAME) default "nanokv"
//   NANOKV_LIMIT            a size ("2G", "512M") or a share ("30%")
//   KVCACHED_GPU_UTILIZATION a fraction in (0, 1], when NANOKV_LIMIT is unset
//   NANOKV_GROUP, NANOKV_TENANT
//   NANOKV_PAGE_SIZE (a size) or KVCACHED_PAGE_SIZE_MB (MiB): expect_page_bytes
//   NANOKV_LOG_LEVEL        trace/debug/info/warn/error/critical/off: applied
//                           to spdlog's default logger here
// A NANOKV_* variable wins over its KVCACHED_* alias; an empty variable counts
// as unset. nullopt when nanokv is not enabled (nothing else is read then, so
// a stray variable cannot break an engine that does not use nanokv).
// kInvalidArgument naming the variable and its value for a malformed one.
Result<std::optional<ClientOptions>> OptionsFromEnvironment();

// One device kvd serves, as the attach reply describes it.
// `device` is what every call of this API names; `local_device` is the same
// GPU as this process numbers it (its CUDA_VISIBLE_DEVICES may renumber):
// the ordinal for the engine's own work on the pages (streams, kernels).
struct DeviceGeometry {
  int device = 0;  // kvd's ordinal
  size_t page_bytes = 0;
  uint32_t capacity_pages = 0;
  std::string uuid;       // the device's identity (gpu::DeviceInfo::uuid); "" if kvd sent none
  int local_device = -1;  // this process's ordinal for it; -1: not visible to this process
};

// One page of a grant. `id` names it within its device; `generation` bumps
// each time kvd recycles the id to a new physical page.
struct GrantedPage {
  uint32_t id = 0;
  uint32_t generation = 0;
  friend bool operator==(const GrantedPage&, const GrantedPage&) = default;
};

// kvd asks for pages back (a lowered limit, kvctl evict). kvd grants nothing
// new to this tenant until it is under its limit again.
struct ReclaimNotice {
  int device = -1;           // -1: any device
  uint32_t pages = 0;        // how many pages to give back
  uint64_t limit_bytes = 0;  // the limit to get under
};

// What the import cache has done, for benchmarks and tests.
struct ClientStats {
  uint64_t pages_imported = 0;  // ImportPage calls that succeeded
  uint64_t pages_reused = 0;    // grants served by a cached handle: no driver call
  uint64_t pages_released = 0;  // handles released (recycled by kvd, or at exit)
  size_t cached_handles = 0;    // handles held now
  uint64_t reconnects = 0;      // times this client attached again to a restarted kvd
  // Pages a restarted kvd did not take back (its recovery window ended, or
  // it was started with another geometry): no longer this engine's. Their
  // mappings stay valid, but kvd may hand their ids to others: stop using them.
  uint64_t pages_forfeited = 0;
};

// A connection to kvd. Every request is thread-safe: any number of threads
// may call Grant/Share/Return/SetLimit at once; each blocks until kvd answers.
// After kvd's shutdown notice or a closed socket every request answers
// kUnavailable ("kvd went away"); pages already mapped stay valid, because the
// imported handles keep their memory alive. With options.reconnect (the
// default) the client reconnects in the background to the next kvd of the
// same IPC name, which takes back the pages this engine holds (same ids,
// same bytes); requests work again once connected() is true.
class Client {
 public:
  // Connects to kvd's socket (see ipc_name), checks that the process
  // listening is kvd (root, this process's uid, or a uid in $NANOKV_KVD_UID;
  // else kPermissionDenied, and nothing is sent), attaches as a tenant and
  // opens the backend kvd uses. kUnavailable when kvd is not running;
  // kInvalidArgument for bad options or a page size other than
  // options.expect_page_bytes; kvd's refusal as its own code, its message
  // naming the cause and kvd's config key (allowed_uids, max_connections);
  // kUnsupported for a kvd of another wire version. Keeps no fd per page
  // it maps: the process's open-file limit is left as it is.
  static Result<std::unique_ptr<Client>> Attach(const ClientOptions& options);
  // Attach(OptionsFromEnvironment()). kNotFound when nanokv is not enabled.
  static Result<std::unique_ptr<Client>> AttachFromEnv();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Detaches (kvd takes back every page still held), releases the cached
  // handles. Every KVTensor made on this client must be destroyed first.
  // Must not run on the reclaim callback's thread.
  ~Client();

  uint32_t tenant_id() const;
  const std::string& tenant() const;        // the name kvd knows this tenant by
  size_t page_bytes() const;                // one size for all devices
  const std::string& backend_name() const;  // "cuda", "hip" or "host"
  uint64_t limit_bytes() const;             // the latest limit kvd announced
  const std::vector<DeviceGeometry>& devices() const;
  const std::string& segment_name() const;  // kvd's /dev/shm state segment
  // False once kvd went away or Detach ran.
  bool connected() const;

  // Makes this tenant a holder of `pages` new pages of `device`, all or none
  // (at most 4096 in one request). kResourceExhausted when the tenant's limit
  // or the device's capacity refuses it.
  Result<std::vector<GrantedPage>> Grant(int device, uint32_t pages);
  // Becomes a holder of pages a tenant of the same group holds (or its
  // group's free pages), by id: how two engines of one group share bytes.
  // kPermissionDenied for a page of another group.
  Result<std::vector<GrantedPage>> Share(int device, std::span<const uint32_t> ids);
  // Gives pages back, all or none. The cached handles stay: kvd may grant the
  // same pages again, and then they cost no import.
  Status Return(int device, std::span<const uint32_t> ids);
  // Sets this tenant's own limit; returns the limit kvd applied (clamped to
  // its capacity; 0: kvd's default limit, as at attach). Below current use,
  // kvd sends a ReclaimNotice.
  Result<uint64_t> SetLimit(uint64_t bytes);
  // Tells kvd this tenant is leaving and closes the connection. Idempotent;
  // afterwards every request answers kFailedPrecondition.
  Status Detach();

  // Tells kvd that `delta_bytes` more (or, negative, fewer) of this engine's
  // pages on `device` are mapped ahead of need: a reserve, which `kvctl
  // tenants` shows as RESERVE beside USED (kvd counts the pages as used
  // either way). Totals per device, so several caches add up; never below
  // 0. KVCache reports its own reserve; an engine with its own pool over
  // KVTensor may report one too. One message, no reply; the total is sent
  // again after a reconnect. kInvalidArgument for a device kvd does not
  // serve; kUnavailable when kvd is gone.
  Status AdjustReserve(int device, int64_t delta_bytes);

  // Calls `callback` for each reclaim notice from kvd, on a thread of its own
  // (not the thread reading kvd's socket), so the callback may call Return or
  // SetLimit, which wait for that thread. Replaces any earlier callback.
  void OnReclaim(std::function<void(const ReclaimNotice&)> callback);
  // Pages kvd still wants back: the latest reclaim notice's count less the
  // pages returned since, or what a SetLimit reply implies. For engines that
  // poll instead of registering a callback.
  uint32_t pending_reclaim_pages() const;

  // Synchronous copies and fills through the backend, for engines and tests
  // that have no GPU framework. Device pointers are mapped, accessible
  // addresses (KVTensor::data() and up).
  Status CopyToDevice(void* dst, const void* src, size_t bytes);
  Status CopyToHost(void* dst, const void* src, size_t bytes);
  Status FillDevice(void* dst, uint8_t value, size_t bytes);

  ClientStats stats() const;

  class Impl;  // libkv/client/client_impl.h; incomplete to engines

 private:
  friend class KVTensor;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanokv

#endif  // NANOKV_CLIENT_H_
