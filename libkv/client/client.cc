// nanokv::Client: attach (the handshake, the backend), the public methods, and
// teardown. The request machinery and the reader thread are in
// client_requests.cc.
#include <errno.h>  // program_invocation_short_name (glibc)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/naming.h"
#include "ipc/rpc/call.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/uds/kvd_socket.h"
#include "ipc/wire/codec.h"
#include "libkv/client/client_impl.h"
#include "libkv/client/quiet_stdout.h"

namespace nanokv {
namespace {

// kvd may be slow to answer an attach (it is starting, or busy), but an engine
// must not hang forever on a kvd that accepted and then hung.
constexpr std::chrono::milliseconds kAttachTimeout{30'000};

// "<program>-<pid>", then "<program>-<pid>-2", ... for further clients of one
// process: kvd refuses a second live tenant of the same name.
std::string DefaultTenantName() {
  static std::atomic<int> clients{0};
  int n = ++clients;
  std::string suffix = "-" + std::to_string(getpid());
  if (n > 1) suffix += "-" + std::to_string(n);
  std::string program = program_invocation_short_name;
  for (char& c : program) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
    if (!ok) c = '_';
  }
  if (program.empty()) program = "engine";
  program.resize(std::min(program.size(), wire::kMaxNameBytes - suffix.size()));
  return program + suffix;
}

Status ValidateOptions(const ClientOptions& options, const std::string& tenant) {
  if (!ipc::ValidIpcName(options.ipc_name)) {
    return Status::InvalidArgument("IPC name '" + options.ipc_name.substr(0, 80) +
                                   "' is not 1-48 of [A-Za-z0-9_.-]");
  }
  if (!wire::ValidName(tenant)) {
    return Status::InvalidArgument("tenant name '" + tenant.substr(0, 80) +
                                   "' is not 1-63 of [A-Za-z0-9_.:@-]");
  }
  if (!options.group.empty() && !wire::ValidName(options.group)) {
    return Status::InvalidArgument("group name '" + options.group.substr(0, 80) +
                                   "' is not 1-63 of [A-Za-z0-9_.:@-]");
  }
  if (!(options.limit_device_fraction >= 0 && options.limit_device_fraction <= 1)) {
    return Status::InvalidArgument("limit_device_fraction " + std::to_string(options.limit_device_fraction) +
                                   " is not in [0, 1]");
  }
  if (!(options.limit_fraction >= 0 && options.limit_fraction <= 1)) {
    return Status::InvalidArgument("limit_fraction " + std::to_string(options.limit_fraction) +
                                   " is not in [0, 1]");
  }
  if (options.devices.size() > wire::kMaxDevices) {
    return Status::InvalidArgument("more than " + std::to_string(wire::kMaxDevices) + " devices");
  }
  for (int device : options.devices) {
    if (device < 0 || static_cast<size_t>(device) >= wire::kMaxDevices) {
      return Status::InvalidArgument("device " + std::to_string(device) + " is out of range");
    }
  }
  return Status::OK();
}

}  // namespace

namespace client {

Result<wire::AttachReply> Handshake(ipc::Channel& channel, const ClientOptions& options,
                                    const std::string& tenant, uint64_t request_id,
                                    bool resume) {
  wire::Message request;
  wire::AttachRequest* attach = request.mutable_attach();
  attach->set_tenant(tenant);
  attach->set_group(options.group);
  for (int device : options.devices) attach->add_devices(device);
  attach->set_limit_bytes(options.limit_bytes);
  attach->set_limit_fraction(options.limit_fraction);
  attach->set_device_fraction(options.limit_device_fraction);
  attach->set_resume(resume);
  // Attach is the connection's first request: a refusal at connect (an
  // Error with request id 0) is its answer (ipc::Call); any other message
  // before the reply is a protocol error, as are fds.
  ipc::ChannelTransport transport(channel);
  ipc::CallOptions call;
  call.peer = "kvd";
  call.timeout = kAttachTimeout;
  NANOKV_ASSIGN_OR_RETURN(ipc::Reply answer,
                          ipc::Call(transport, request_id, std::move(request), {}, call));
  const wire::Message& reply = answer.message;
  if (!reply.has_attach_reply()) {
    return Status::ProtocolError("kvd answered attach with another message");
  }
  return reply.attach_reply();
}

}  // namespace client

namespace {

// The backend kvd uses, opened in this process. For "host" the simulated
// device count must cover kvd's ordinals (ImportPage checks the device), so
// it is taken from the attach reply, not from NANOKV_HOST_DEVICES; a mask
// (NANOKV_HOST_VISIBLE_DEVICES) then picks among those, as
// CUDA_VISIBLE_DEVICES does among GPUs.
Result<std::unique_ptr<gpu::Backend>> OpenSameBackend(const std::string& name,
                                                      const std::vector<DeviceGeometry>& devices) {
  if (name == "host") {
    gpu::HostBackendOptions host = gpu::HostOptionsFromEnvironment();
    for (const DeviceGeometry& g : devices) host.devices = std::max(host.devices, g.device + 1);
    return gpu::MakeHostBackend(host);
  }
  if (name != "cuda" && name != "hip") {
    return Status::ProtocolError("kvd uses backend '" + name.substr(0, 40) +
                                 "', which this libkv does not know");
  }
  auto backend = gpu::OpenBackend(name);
  if (!backend.ok()) {
    const Status& s = backend.status();
    return Status(s.code(),
                  "kvd uses the " + name +
                      " backend, which this process cannot open: " + std::string(s.message()),
                  s.call(), s.error_name());
  }
  return backend;
}

}  // namespace

Result<std::unique_ptr<Client::Impl>> Client::Impl::Connect(const ClientOptions& options) {
  std::string tenant = options.tenant.empty() ? DefaultTenantName() : options.tenant;
  NANOKV_RETURN_IF_ERROR(ValidateOptions(options, tenant));

  // kvd's socket (NANOKV_RUN_DIR, else where its segment says), and kvd's
  // credentials checked before anything is sent (ipc/uds/kvd_socket.h).
  NANOKV_ASSIGN_OR_RETURN(ipc::Channel channel, ipc::ConnectToKvdNamed(options.ipc_name));

  std::unique_ptr<Impl> impl(new Impl());
  impl->options_ = options;
  impl->tenant_ = tenant;
  uint64_t request_id = impl->next_request_id_++;
  NANOKV_ASSIGN_OR_RETURN(wire::AttachReply reply,
                          client::Handshake(channel, options, tenant, request_id,
                                            /*resume=*/false));
  // From here a failure closes the socket (the Channel's destructor), and
  // kvd detaches the tenant it just made.

  if (reply.devices_size() == 0) return Status::ProtocolError("kvd's attach reply lists no device");
  for (const wire::DeviceGeometry& g : reply.devices()) {
    impl->devices_.push_back(
        {g.device(), static_cast<size_t>(g.page_bytes()), g.capacity_pages(), g.uuid(), -1});
  }
  impl->page_bytes_ = impl->devices_.front().page_bytes;
  for (const DeviceGeometry& g : impl->devices_) {
    if (g.page_bytes != impl->page_bytes_) {
      return Status::ProtocolError("kvd's devices use different page sizes");
    }
  }
  if (options.expect_page_bytes != 0 && options.expect_page_bytes != impl->page_bytes_) {
    return Status::InvalidArgument(
        "kvd '" + options.ipc_name + "' uses pages of " + std::to_string(impl->page_bytes_) +
        " bytes, but this engine expects " + std::to_string(options.expect_page_bytes) +
        " (KVCACHED_PAGE_SIZE_MB / NANOKV_PAGE_SIZE): configure both alike");
  }
  impl->tenant_id_ = reply.tenant_id();
  impl->segment_name_ = reply.segment_name();
  impl->backend_name_ = reply.backend();
  impl->limit_bytes_ = reply.limit_bytes();

  NANOKV_ASSIGN_OR_RETURN(impl->backend_, OpenSameBackend(impl->backend_name_, impl->devices_));
  for (DeviceGeometry& g : impl->devices_) {
    // kvd numbers devices as it sees them; this process may see them under
    // other numbers, or not at all (CUDA_VISIBLE_DEVICES): the uuid says
    // which of ours is kvd's. A kvd that sends none (ordinals agree) keeps
    // the old rule, same ordinal. A device not found is not fatal: requests
    // for it are refused here (kNotFound), never sent to another GPU.
    Result<int> local = gpu::LocalOrdinal(*impl->backend_, g.device, g.uuid);
    if (!local.ok()) {
      // Expected under a mask (an engine on one GPU of eight): not a warning.
      spdlog::info("nanokv: {}", local.status().message());
      continue;
    }
    auto info = impl->backend_->GetDeviceInfo(*local);
    if (!info.ok()) {
      spdlog::warn("nanokv: kvd serves device {}, which this process cannot use: {}", g.device,
                   info.status().ToString());
      continue;
    }
    g.local_device = *local;
    if (info->granularity == 0 || g.page_bytes % info->granularity != 0) {
      return Status::Unsupported("kvd's page size " + std::to_string(g.page_bytes) +
                                 " is not a multiple of device " + std::to_string(g.device) +
                                 "'s granularity " + std::to_string(info->granularity) +
                                 " in this process");
    }
  }
  impl->cache_ = std::make_unique<client::PageCache>(*impl->backend_, impl->page_bytes_);
  impl->channel_ = std::move(channel);
  impl->connected_ = true;
  impl->reader_ = std::thread([raw = impl.get()] { raw->ReaderLoop(); });
  spdlog::info(
      "nanokv: attached to kvd '{}' as tenant '{}' (id {}), backend {}, {} device(s), "
      "pages of {} bytes, limit {} bytes",
      options.ipc_name, impl->tenant_, impl->tenant_id_, impl->backend_name_, impl->devices_.size(),
      impl->page_bytes_, impl->limit_bytes());
  return impl;
}

bool Client::Impl::ServesDevice(int device) const {
  return std::any_of(devices_.begin(), devices_.end(),
                     [device](const DeviceGeometry& g) { return g.device == device; });
}

bool Client::Impl::connected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connected_;
}

Client::Impl::~Impl() {
  Status detached = Detach();
  if (!detached.ok()) spdlog::warn("nanokv: detaching from kvd: {}", detached.ToString());
  {
    std::lock_guard<std::mutex> lock(reclaim_->mu);
    reclaim_->stop = true;
  }
  reclaim_->cv.notify_all();
  std::lock_guard<std::mutex> lock(reclaim_thread_mu_);
  if (reclaim_thread_.joinable()) {
    if (reclaim_thread_.get_id() == std::this_thread::get_id()) {
      // Destroyed from inside the reclaim callback: joining would wait for
      // ourselves. The thread holds its own reference to the queue, so it can
      // finish safely once the callback returns.
      spdlog::error("nanokv: Client destroyed from its reclaim callback");
      reclaim_thread_.detach();
    } else {
      reclaim_thread_.join();
    }
  }
  // cache_ releases every handle as it goes, before backend_.
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Attach(const ClientOptions& options) {
  client::KeepLogsOffStdout();
  // No open-file limit to raise: an engine keeps no fd per page it maps
  // (page_cache.h, invariant 4).
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Connect(options));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<std::unique_ptr<Client>> Client::AttachFromEnv() {
  NANOKV_ASSIGN_OR_RETURN(std::optional<ClientOptions> options, OptionsFromEnvironment());
  if (!options) return Status::NotFound("nanokv is not enabled (set ENABLE_NANOKV=1)");
  return Attach(*options);
}

uint32_t Client::tenant_id() const { return impl_->tenant_id(); }
const std::string& Client::tenant() const { return impl_->tenant(); }
size_t Client::page_bytes() const { return impl_->page_bytes(); }
const std::string& Client::backend_name() const { return impl_->backend_name(); }
uint64_t Client::limit_bytes() const { return impl_->limit_bytes(); }
const std::vector<DeviceGeometry>& Client::devices() const { return impl_->devices(); }
const std::string& Client::segment_name() const { return impl_->segment_name(); }
bool Client::connected() const { return impl_->connected(); }

namespace {

std::vector<GrantedPage> Strip(const std::vector<client::ImportedPage>& pages) {
  std::vector<GrantedPage> out;
  out.reserve(pages.size());
  for (const auto& page : pages) out.push_back({page.id, page.generation});
  return out;
}

}  // namespace

Result<std::vector<GrantedPage>> Client::Grant(int device, uint32_t pages) {
  NANOKV_ASSIGN_OR_RETURN(auto granted, impl_->GrantPages(device, pages));
  return Strip(granted);
}

Result<std::vector<GrantedPage>> Client::Share(int device, std::span<const uint32_t> ids) {
  NANOKV_ASSIGN_OR_RETURN(auto shared, impl_->SharePages(device, ids));
  return Strip(shared);
}

Status Client::Return(int device, std::span<const uint32_t> ids) {
  return impl_->ReturnPages(device, ids);
}

Result<uint64_t> Client::SetLimit(uint64_t bytes) { return impl_->SetLimit(bytes); }
Status Client::AdjustReserve(int device, int64_t delta_bytes) {
  return impl_->AdjustReserve(device, delta_bytes);
}
Status Client::Detach() { return impl_->Detach(); }

void Client::OnReclaim(std::function<void(const ReclaimNotice&)> callback) {
  impl_->OnReclaim(std::move(callback));
}

uint32_t Client::pending_reclaim_pages() const { return impl_->pending_reclaim_pages(); }

Status Client::CopyToDevice(void* dst, const void* src, size_t bytes) {
  return impl_->backend().Copy(dst, src, bytes, gpu::CopyKind::kHostToDevice);
}

Status Client::CopyToHost(void* dst, const void* src, size_t bytes) {
  return impl_->backend().Copy(dst, src, bytes, gpu::CopyKind::kDeviceToHost);
}

Status Client::FillDevice(void* dst, uint8_t value, size_t bytes) {
  return impl_->backend().Fill(dst, value, bytes);
}

ClientStats Client::stats() const { return impl_->stats(); }

}  // namespace nanokv
