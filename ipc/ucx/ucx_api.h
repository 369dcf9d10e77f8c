// UCX's functions, loaded at run time (dlopen of libucp.so.0) instead of
// linked. Why: libucs's constructor installs UCM's memory hooks, and UCX
// 1.13's mremap hook drops mremap's fifth argument, so MREMAP_FIXED (the
// host backend maps pages with it) returns garbage in any process that
// merely loads UCX. Loading it ourselves lets us set UCX_MEM_MMAP_HOOK_MODE
// =none first (unless the environment already says otherwise), and a
// machine without UCX (the GPU machine) runs every binary, failing only
// the data path between nodes (kUnavailable naming the library).
// Limits: the setenv happens once, in whichever thread first needs UCX (a
// getenv racing it in another thread is glibc's usual hazard); a process
// that loaded UCX before us (another library using it) keeps whatever hooks
// that load installed, so the host backend's mappings may fail there.
#ifndef NANOKV_IPC_UCX_UCX_API_H_
#define NANOKV_IPC_UCX_UCX_API_H_

#include <ucp/api/ucp.h>

#include "nanokv/status.h"

namespace nanokv::ucx {

struct Api {
  decltype(&ucp_config_read) config_read;
  decltype(&ucp_config_release) config_release;
  decltype(&ucp_init_version) init_version;
  decltype(&ucp_context_query) context_query;
  decltype(&ucp_cleanup) cleanup;
  decltype(&ucp_worker_create) worker_create;
  decltype(&ucp_worker_destroy) worker_destroy;
  decltype(&ucp_worker_get_efd) worker_get_efd;
  decltype(&ucp_worker_arm) worker_arm;
  decltype(&ucp_worker_progress) worker_progress;
  decltype(&ucp_worker_set_am_recv_handler) set_am_handler;
  decltype(&ucp_listener_create) listener_create;
  decltype(&ucp_listener_query) listener_query;
  decltype(&ucp_listener_destroy) listener_destroy;
  decltype(&ucp_listener_reject) listener_reject;
  decltype(&ucp_conn_request_query) conn_request_query;
  decltype(&ucp_ep_create) ep_create;
  decltype(&ucp_ep_close_nbx) ep_close_nbx;
  decltype(&ucp_ep_flush_nbx) ep_flush_nbx;
  decltype(&ucp_request_check_status) request_check_status;
  decltype(&ucp_request_free) request_free;
  decltype(&ucp_am_send_nbx) am_send_nbx;
  decltype(&ucp_am_recv_data_nbx) am_recv_data_nbx;
  decltype(&ucp_am_data_release) am_data_release;
  decltype(&ucs_status_string) status_string;
};

// The table, loaded once; kUnavailable naming libucp.so.0 and dlerror when
// UCX is not installed.
Result<const Api*> LoadApi();
// For a process that listens (kvd's transfer agent), before anything loads
// UCX: raises UCX_ASYNC_MAX_EVENTS (unless the environment sets it) past
// the open-file limit. UCX 1.13 lets a worker hold 1024 async handlers, one
// per connection its listener accepted; past that its listener frees the
// new connection but leaves it on the cm's list (ucp_worker_destroy then
// walks freed memory: SIGSEGV) and closes its fd twice (the second close
// may hit an fd another thread just opened). Above the open-file limit that
// path is out of reach: accept() runs out of fds first. The cost is UCX's
// queue of 8 bytes a handler per worker. Clients (one endpoint per node)
// keep UCX's default.
void RaiseAsyncEventLimit();

// The loaded table. REQUIRES: LoadApi() succeeded (every object of ucx.h
// exists only after it did).
const Api& api();

}  // namespace nanokv::ucx

#endif  // NANOKV_IPC_UCX_UCX_API_H_
