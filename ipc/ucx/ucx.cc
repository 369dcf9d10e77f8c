// The RAII layer over UCP (ipc/ucx/ucx.h).
#include "ipc/ucx/ucx.h"

#include "ipc/ucx/ucx_api.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>

#include <cstring>

namespace nanokv::ucx {

const char* StatusString(ucs_status_t status) { return api().status_string(status); }

void RequestFree(void* request) {
  if (request != nullptr) api().request_free(request);
}

void ReleaseAmData(Worker& worker, void* descriptor) {
  if (descriptor != nullptr) api().am_data_release(worker.get(), descriptor);
}

unsigned Worker::Progress() { return api().worker_progress(worker_); }

ucs_status_t Worker::Arm() { return api().worker_arm(worker_); }

void Listener::Reject(ucp_conn_request_h request) { api().listener_reject(listener_, request); }

Status FromUcs(std::string_view call, ucs_status_t status) {
  const std::string text = std::string(call) + ": " + api().status_string(status);
  switch (status) {
    case UCS_OK:
      return Status::OK();
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_IO_ERROR:
      return Status::Unavailable(text);
    case UCS_ERR_BUSY:
      return Status::Unavailable(text + " (the address is in use)");
    case UCS_ERR_NO_MEMORY:
      return Status::OutOfMemory(text);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return Status::InvalidArgument(text);
    default:
      return Status::Internal(text);
  }
}

Result<sockaddr_storage> ParseHostPort(const std::string& text, std::string_view what) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument(std::string(what) + ": '" + text.substr(0, 80) + "' is not host:port");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = text.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 || std::stoi(port) > 65535) {
    return Status::InvalidArgument(std::string(what) + ": port '" + port.substr(0, 16) + "' is not 0-65535");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return Status::InvalidArgument(std::string(what) + ": host '" + host.substr(0, 80) + "': " + gai_strerror(rc));
  }
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  return out;
}

namespace {
// The address's host as inet_ntop writes it ("" for a family it does not know).
std::string HostText(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = {};
  const void* in = address.ss_family == AF_INET6
                       ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&address)->sin6_addr)
                       : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&address)->sin_addr);
  return inet_ntop(address.ss_family, in, host, sizeof(host)) != nullptr ? host : "";
}

socklen_t LengthOf(const sockaddr_storage& address) {
  return address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}
}  // namespace

std::string FormatSockaddr(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    return "[" + HostText(address) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  const auto* in4 = reinterpret_cast<const sockaddr_in*>(&address);
  return HostText(address) + ":" + std::to_string(ntohs(in4->sin_port));
}

Result<std::unique_ptr<Context>> Context::Create() {
  NANOKV_RETURN_IF_ERROR(LoadApi().status());
  ucp_config_t* config = nullptr;
  ucs_status_t status = api().config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) return FromUcs("ucp_config_read", status);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  status = api().init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context);
  api().config_release(config);
  if (status != UCS_OK) return FromUcs("ucp_init", status);
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  bool device_memory = false;
  if (api().context_query(context, &attr) == UCS_OK) {
    device_memory = (attr.memory_types & (UCS_BIT(UCS_MEMORY_TYPE_CUDA) | UCS_BIT(UCS_MEMORY_TYPE_ROCM))) != 0;
  }
  return std::unique_ptr<Context>(new Context(context, device_memory));
}

Context::~Context() { api().cleanup(context_); }

Result<std::unique_ptr<Worker>> Worker::Create(Context& context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  ucs_status_t status = api().worker_create(context.get(), &params, &worker);
  if (status != UCS_OK) return FromUcs("ucp_worker_create", status);
  int fd = -1;
  status = api().worker_get_efd(worker, &fd);
  if (status != UCS_OK) {
    api().worker_destroy(worker);
    return FromUcs("ucp_worker_get_efd", status);
  }
  return std::unique_ptr<Worker>(new Worker(worker, fd));
}

Worker::~Worker() { api().worker_destroy(worker_); }

Status Worker::SetHandler(uint16_t id, ucp_am_recv_callback_t callback, void* arg) {
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                     UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  param.id = id;
  param.flags = UCP_AM_FLAG_WHOLE_MSG;
  param.cb = callback;
  param.arg = arg;
  return FromUcs("ucp_worker_set_am_recv_handler", api().set_am_handler(worker_, &param));
}

bool Worker::ProgressAndArm() {
  while (api().worker_progress(worker_) != 0) {
  }
  return api().worker_arm(worker_) == UCS_OK;
}

Status Worker::ProgressUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout,
                             std::string_view what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (api().worker_progress(worker_) != 0) continue;
    if (done()) break;
    const ucs_status_t armed = api().worker_arm(worker_);
    if (armed == UCS_ERR_BUSY) continue;
    if (armed != UCS_OK) return FromUcs("ucp_worker_arm", armed);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status::Unavailable(std::string(what) + ": no answer within " + std::to_string(timeout.count()) + " ms");
    }
    pollfd p{event_fd_, POLLIN, 0};
    poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
  }
  return Status::OK();
}

Result<std::unique_ptr<Listener>> Listener::Create(Worker& worker, const sockaddr_storage& address,
                                                   OnRequest on_request, void* arg) {
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  params.sockaddr.addrlen = LengthOf(address);
  params.conn_handler.cb = on_request;
  params.conn_handler.arg = arg;
  ucp_listener_h listener = nullptr;
  ucs_status_t status = api().listener_create(worker.get(), &params, &listener);
  if (status != UCS_OK) return FromUcs("ucp_listener_create on " + FormatSockaddr(address), status);
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  status = api().listener_query(listener, &attr);
  if (status != UCS_OK) {
    api().listener_destroy(listener);
    return FromUcs("ucp_listener_query", status);
  }
  return std::unique_ptr<Listener>(new Listener(listener, attr.sockaddr));
}

Listener::~Listener() { api().listener_destroy(listener_); }

namespace {
Result<ucp_ep_h> CreateEndpoint(Worker& worker, ucp_ep_params_t& params, OnEndpointError on_error, void* arg,
                                std::string_view what) {
  params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer is reported, not fatal
  params.err_handler.cb = on_error;
  params.err_handler.arg = arg;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = api().ep_create(worker.get(), &params, &ep);
  if (status != UCS_OK) return FromUcs(what, status);
  return ep;
}
}  // namespace

Result<ucp_ep_h> ConnectEndpoint(Worker& worker, const sockaddr_storage& address, OnEndpointError on_error,
                                 void* arg) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
  params.sockaddr.addrlen = LengthOf(address);
  return CreateEndpoint(worker, params, on_error, arg, "ucp_ep_create to " + FormatSockaddr(address));
}

Result<ucp_ep_h> AcceptEndpoint(Worker& worker, ucp_conn_request_h request, OnEndpointError on_error, void* arg) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  params.conn_request = request;
  return CreateEndpoint(worker, params, on_error, arg, "ucp_ep_create (accept)");
}

std::string ClientHostOf(ucp_conn_request_h request) {
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (api().conn_request_query(request, &attr) != UCS_OK) return "";
  return HostText(attr.client_address);
}

void* CloseEndpoint(Worker& /*worker*/, ucp_ep_h ep, bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t request = api().ep_close_nbx(ep, &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return nullptr;
  return request;
}

void* FlushEndpoint(ucp_ep_h ep) {
  ucp_request_param_t param{};
  ucs_status_ptr_t request = api().ep_flush_nbx(ep, &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return nullptr;
  return request;
}

bool RequestDone(void* request) {
  if (request == nullptr) return true;
  if (api().request_check_status(request) == UCS_INPROGRESS) return false;
  api().request_free(request);
  return true;
}

Status SendAm(ucp_ep_h ep, uint16_t id, const std::string& header, const void* data, size_t bytes,
              bool rendezvous, ucp_send_nbx_callback_t on_done, void* user_data) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.flags = UCP_AM_SEND_FLAG_REPLY | (rendezvous ? UCP_AM_SEND_FLAG_RNDV : 0);
  param.cb.send = on_done;
  param.user_data = user_data;
  ucs_status_ptr_t request = api().am_send_nbx(ep, id, header.data(), header.size(), data, bytes, &param);
  if (UCS_PTR_IS_ERR(request)) return FromUcs("ucp_am_send_nbx", UCS_PTR_STATUS(request));
  if (request == nullptr) on_done(nullptr, UCS_OK, user_data);  // NO_IMM_CMPL should prevent it
  return Status::OK();
}

Status ReceiveAmData(Worker& worker, void* descriptor, void* buffer, size_t bytes,
                     ucp_am_recv_data_nbx_callback_t on_done, void* user_data) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv_am = on_done;
  param.user_data = user_data;
  ucs_status_ptr_t request = api().am_recv_data_nbx(worker.get(), descriptor, buffer, bytes, &param);
  if (UCS_PTR_IS_ERR(request)) return FromUcs("ucp_am_recv_data_nbx", UCS_PTR_STATUS(request));
  if (request == nullptr) on_done(nullptr, UCS_OK, bytes, user_data);  // NO_IMM_CMPL should prevent it
  return Status::OK();
}

}  // namespace nanokv::ucx
