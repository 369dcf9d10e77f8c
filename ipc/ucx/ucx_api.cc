// UCX loaded at run time (ipc/ucx/ucx_api.h).
#include "ipc/ucx/ucx_api.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <mutex>
#include <string>

namespace nanokv::ucx {
namespace {

Api g_api;
Status g_loaded = Status::Unavailable("UCX not loaded yet");

template <typename F>
bool Find(void* library, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(library, name));
  return *out != nullptr;
}

Status Load() {
  // Before libucs's constructor runs (it reads UCX_* then): no mmap hooks.
  setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 0);
  void* library = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return Status::Unavailable(std::string("UCX (the data path between nodes): dlopen libucp.so.0: ") +
                               (why != nullptr ? why : "?") + " (install libucx0, or carry it: scripts/gpu-bundle.sh)");
  }
  Api& a = g_api;
  const bool all = Find(library, "ucp_config_read", &a.config_read) &&
                   Find(library, "ucp_config_release", &a.config_release) &&
                   Find(library, "ucp_init_version", &a.init_version) &&
                   Find(library, "ucp_context_query", &a.context_query) && Find(library, "ucp_cleanup", &a.cleanup) &&
                   Find(library, "ucp_worker_create", &a.worker_create) &&
                   Find(library, "ucp_worker_destroy", &a.worker_destroy) &&
                   Find(library, "ucp_worker_get_efd", &a.worker_get_efd) &&
                   Find(library, "ucp_worker_arm", &a.worker_arm) &&
                   Find(library, "ucp_worker_progress", &a.worker_progress) &&
                   Find(library, "ucp_worker_set_am_recv_handler", &a.set_am_handler) &&
                   Find(library, "ucp_listener_create", &a.listener_create) &&
                   Find(library, "ucp_listener_query", &a.listener_query) &&
                   Find(library, "ucp_listener_destroy", &a.listener_destroy) &&
                   Find(library, "ucp_listener_reject", &a.listener_reject) &&
                   Find(library, "ucp_conn_request_query", &a.conn_request_query) &&
                   Find(library, "ucp_ep_create", &a.ep_create) && Find(library, "ucp_ep_close_nbx", &a.ep_close_nbx) &&
                   Find(library, "ucp_ep_flush_nbx", &a.ep_flush_nbx) &&
                   Find(library, "ucp_request_check_status", &a.request_check_status) &&
                   Find(library, "ucp_request_free", &a.request_free) &&
                   Find(library, "ucp_am_send_nbx", &a.am_send_nbx) &&
                   Find(library, "ucp_am_recv_data_nbx", &a.am_recv_data_nbx) &&
                   Find(library, "ucp_am_data_release", &a.am_data_release) &&
                   Find(library, "ucs_status_string", &a.status_string);
  if (!all) return Status::Unsupported("UCX: libucp.so.0 lacks a function the data path needs (UCX >= 1.13)");
  return Status::OK();  // the library stays loaded for the process's life
}

}  // namespace

Result<const Api*> LoadApi() {
  static std::once_flag once;
  std::call_once(once, [] { g_loaded = Load(); });
  if (!g_loaded.ok()) return g_loaded;
  return &g_api;
}

void RaiseAsyncEventLimit() {
  // One handler per fd the process may open, plus UCX's timers; never below
  // UCX's own 1024, never past its highest handler id for an fd (1000000).
  constexpr rlim_t kUcxDefault = 1024, kUcxFdIds = 1'000'000, kTimers = 64;
  rlimit files{};
  const rlim_t open_files = getrlimit(RLIMIT_NOFILE, &files) == 0 ? files.rlim_cur : kUcxDefault;
  const rlim_t limit = std::max(std::min(open_files, kUcxFdIds - kTimers) + kTimers, kUcxDefault);
  setenv("UCX_ASYNC_MAX_EVENTS", std::to_string(limit).c_str(), 0);
}

const Api& api() { return g_api; }

}  // namespace nanokv::ucx
