// A thin RAII layer over UCX's UCP: what the data path between nodes needs
// and nothing else (a context with active messages, a worker slept on
// through its event fd, a listener, endpoints with an error handler, active
// messages with a header and data). Errors are Status values naming the UCP
// call and UCX's own status string.
//
// Threads: a Worker is made in UCS_THREAD_MODE_SINGLE; every call on it, on
// its endpoints and listener, and every callback, happens on the one thread
// that progresses it (the transfer agent's, or a ClusterClient call holding
// the client's lock).
#ifndef NANOKV_IPC_UCX_UCX_H_
#define NANOKV_IPC_UCX_UCX_H_

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv::ucx {

// kUnavailable for the statuses a dead or unreachable peer gives
// (UCS_ERR_UNREACHABLE, CONNECTION_RESET, ENDPOINT_TIMEOUT, CANCELED, ...),
// kDeadline-like kUnavailable for TIMED_OUT, kInternal otherwise; the message
// names `call` and ucs_status_string.
Status FromUcs(std::string_view call, ucs_status_t status);

// UCX's text for `status`. REQUIRES: a Context was created.
const char* StatusString(ucs_status_t status);
// ucp_request_free (nullptr: nothing).
void RequestFree(void* request);

// "host:port" -> a socket address (IPv4 or IPv6 literal, or a name resolved
// once). kInvalidArgument naming `what` when it is not host:port.
Result<sockaddr_storage> ParseHostPort(const std::string& text, std::string_view what);
std::string FormatSockaddr(const sockaddr_storage& address);

class Context {
 public:
  // UCP_FEATURE_AM | UCP_FEATURE_WAKEUP. Loads UCX first (ucx_api.h:
  // kUnavailable without it). UCX reads its UCX_* environment variables
  // here (UCX_TLS picks the transports).
  static Result<std::unique_ptr<Context>> Create();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ucp_context_h get() const { return context_; }
  // Whether UCX can move CUDA (or ROCm) device memory itself: the transfer
  // could register store pages ("direct"); else it stages through host.
  bool device_memory() const { return device_memory_; }

 private:
  explicit Context(ucp_context_h context, bool device_memory) : context_(context), device_memory_(device_memory) {}
  ucp_context_h context_;
  bool device_memory_;
};

class Worker {
 public:
  // `context` must outlive the worker.
  static Result<std::unique_ptr<Worker>> Create(Context& context);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ucp_worker_h get() const { return worker_; }
  int event_fd() const { return event_fd_; }

  // Registers `callback(arg, ...)` for active message `id`.
  Status SetHandler(uint16_t id, ucp_am_recv_callback_t callback, void* arg);
  // ucp_worker_progress, ucp_worker_arm (UCS_ERR_BUSY: progress again).
  unsigned Progress();
  ucs_status_t Arm();
  // Progresses until nothing more happens, then arms the event fd: true once
  // armed (sleeping on event_fd() is then safe), false if events came
  // meanwhile (progress again).
  bool ProgressAndArm();
  // Progresses until `done()` or `timeout` passes without `done()`
  // (kUnavailable naming `what` and the timeout), sleeping on the event fd
  // between events.
  Status ProgressUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout, std::string_view what);

 private:
  explicit Worker(ucp_worker_h worker, int event_fd) : worker_(worker), event_fd_(event_fd) {}
  ucp_worker_h worker_;
  int event_fd_;
};

// Accepts connections on a TCP address; each one comes to `on_request` (on
// the worker's thread), which makes an endpoint of it (AcceptEndpoint) or
// rejects it.
class Listener {
 public:
  using OnRequest = void (*)(ucp_conn_request_h request, void* arg);
  static Result<std::unique_ptr<Listener>> Create(Worker& worker, const sockaddr_storage& address,
                                                  OnRequest on_request, void* arg);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  // The address bound (the port chosen when 0 was asked).
  const sockaddr_storage& address() const { return bound_; }
  // Refuses a connection request, once: only one never given to
  // AcceptEndpoint (which consumes it, failed or not).
  void Reject(ucp_conn_request_h request);

 private:
  Listener(ucp_listener_h listener, sockaddr_storage bound) : listener_(listener), bound_(bound) {}
  ucp_listener_h listener_;
  sockaddr_storage bound_;
};

// Endpoints are plain ucp_ep_h: their lifetime follows the peer's state
// machine (an error, then a close that completes later), which the owner
// tracks. Both kinds report a failed peer to `on_error(arg, ep, status)`.
using OnEndpointError = void (*)(void* arg, ucp_ep_h ep, ucs_status_t status);
Result<ucp_ep_h> ConnectEndpoint(Worker& worker, const sockaddr_storage& address, OnEndpointError on_error,
                                 void* arg);
// Consumes `request` either way: when it fails, UCX has already rejected
// and freed the request (rejecting it again would reject freed memory).
Result<ucp_ep_h> AcceptEndpoint(Worker& worker, ucp_conn_request_h request, OnEndpointError on_error, void* arg);
// The host (address without the port) a connection request comes from, as
// text; "" when UCX cannot say.
std::string ClientHostOf(ucp_conn_request_h request);
// Starts closing `ep` (force: outstanding operations end with an error at
// once; else they are flushed first). The returned request (nullptr when
// done already) completes later; check it with RequestDone.
void* CloseEndpoint(Worker& worker, ucp_ep_h ep, bool force);
// Starts pushing out what `ep` still has queued, UCX's own messages
// included (a rendezvous receive acknowledges its sender after it
// completes, from the worker's progress): a request as above.
void* FlushEndpoint(ucp_ep_h ep);
// Whether a close or flush request is done; frees it when it is.
bool RequestDone(void* request);

// Sends active message `id` with `header` and `data` (which must stay
// valid until `on_done(request, status, user_data)` runs on the worker's
// thread; it always runs once, and frees a non-null request with
// ucp_request_free). `rendezvous`: the data moves by
// UCX's rendezvous protocol (zero copy on the sender, the receiver pulls it
// into its own buffer). The reply flag is set, so the receiver learns the
// endpoint. An immediate error is returned and `on_done` does not run.
Status SendAm(ucp_ep_h ep, uint16_t id, const std::string& header, const void* data, size_t bytes,
              bool rendezvous, ucp_send_nbx_callback_t on_done, void* user_data);
// Drops a rendezvous message's data kept by a handler (UCS_INPROGRESS).
void ReleaseAmData(Worker& worker, void* descriptor);
// Pulls a rendezvous message's data (`descriptor` from the handler) into
// `buffer`; `on_done(request, status, length, user_data)` runs once (freeing
// a non-null request). An immediate error is returned and `on_done` does not
// run.
Status ReceiveAmData(Worker& worker, void* descriptor, void* buffer, size_t bytes,
                     ucp_am_recv_data_nbx_callback_t on_done, void* user_data);

}  // namespace nanokv::ucx

#endif  // NANOKV_IPC_UCX_UCX_H_
