// Client::Impl after kvd went away: reconnect with back-off, attach again as
// the same tenant, and hand back the pages this engine still holds, so a
// restarted kvd re-adopts them (daemon/node/page_journal.h) and the engine's KV
// survives. Runs on the reader thread, which owns the connection's reads.
#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/naming.h"
#include "ipc/rpc/call.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/uds/kvd_socket.h"
#include "ipc/wire/codec.h"
#include "libkv/client/client_impl.h"

namespace nanokv {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{20};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
// One reply of a reconnect: kvd just started and may be busy, but a hung one
// must not keep Detach waiting long.
constexpr std::chrono::milliseconds kReplyTimeout{5'000};

}  // namespace

bool Client::Impl::Reconnect() {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::chrono::milliseconds backoff = kFirstBackoff;
  Status last = Status::Unavailable("not tried");
  for (int attempt = 1;; ++attempt) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (reconnect_cv_.wait_for(lock, backoff, [this] { return detaching_; })) return false;
    }
    if (options_.reconnect_timeout_ms != 0 &&
        Clock::now() - start > std::chrono::milliseconds(options_.reconnect_timeout_ms)) {
      spdlog::error("nanokv: gave up reconnecting to kvd '{}' after {} ms ({} attempts; last: "
                    "{}); mapped pages stay valid",
                    options_.ipc_name, options_.reconnect_timeout_ms, attempt - 1, last.ToString());
      return false;
    }
    backoff = std::min(backoff * 2, kMaxBackoff);
    // Found again each time: a restarted kvd may listen elsewhere.
    auto channel = ipc::ConnectToKvdNamed(options_.ipc_name);
    if (!channel.ok()) {
      last = channel.status();
      continue;
    }
    last = Resume(std::move(*channel));
    if (last.ok()) return true;
    spdlog::warn("nanokv: reconnecting to kvd '{}': {}", options_.ipc_name, last.ToString());
    if (last.code() == Code::kFailedPrecondition) return false;  // not a kvd we can resume with
  }
}

Status Client::Impl::Resume(ipc::Channel channel) {
  ClientOptions again = options_;
  again.limit_bytes = limit_bytes();  // what kvd last granted, not the first request
  again.limit_fraction = 0;
  again.limit_device_fraction = 0;
  NANOKV_ASSIGN_OR_RETURN(wire::AttachReply reply,
                          client::Handshake(channel, again, tenant_, next_request_id_++,
                                            /*resume=*/true));
  // Until Detach or a drop, kvd counts this connection as our tenant; a
  // failure below closes it (the Channel's destructor) and kvd detaches it.
  if (reply.backend() != backend_name_ || reply.devices_size() != static_cast<int>(devices_.size())) {
    return Status::FailedPrecondition("kvd came back with another backend or device set: the "
                                      "pages this engine holds cannot be handed back");
  }
  for (int i = 0; i < reply.devices_size(); ++i) {
    if (reply.devices(i).device() != devices_[i].device ||
        reply.devices(i).page_bytes() != page_bytes_ || reply.devices(i).uuid() != devices_[i].uuid) {
      return Status::FailedPrecondition("kvd came back with another page size or devices: the "
                                        "pages this engine holds cannot be handed back");
    }
  }
  // Handles of pages not held are of the old kvd's pages: nobody will grant
  // them again under these ids, and they keep old memory alive. Drop them.
  std::map<int, std::vector<std::pair<uint32_t, uint32_t>>> by_device;
  std::set<std::pair<int, uint32_t>> keep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, generation] : held_) {
      by_device[key.first].push_back({key.second, generation});
      keep.insert(key);
    }
  }
  cache_->RetainOnly(keep);
  for (const auto& [device, pages] : by_device) {
    if (!reply.adopt_by_id()) {
      // An older kvd takes pages back only as fds, and this process keeps
      // none (page_cache.h, invariant 4): the pages are lost to it.
      spdlog::error("nanokv: kvd '{}' takes pages back only with their fds (it is older than "
                    "this libkv): {} pages of device {} are forfeited; stop using them",
                    options_.ipc_name, pages.size(), device);
      std::vector<uint32_t> ids;
      for (const auto& page : pages) ids.push_back(page.first);
      NoteForfeited(device, ids);
      continue;
    }
    NANOKV_RETURN_IF_ERROR(AdoptDevice(channel, device, pages));
  }
  uint64_t held = 0;
  {
    std::lock_guard<std::mutex> send_lock(send_mu_);
    std::lock_guard<std::mutex> lock(mu_);
    channel_ = std::move(channel);
    tenant_id_ = reply.tenant_id();
    limit_bytes_ = reply.limit_bytes();
    connected_ = true;
    gone_ = Status::OK();
    ++reconnects_;
    held = held_.size();
  }
  spdlog::info("nanokv: reconnected to kvd '{}' as tenant '{}' (id {}); it took back {} pages",
               options_.ipc_name, tenant_, reply.tenant_id(), held);
  ResendReserve();
  return Status::OK();
}

Status Client::Impl::AdoptDevice(ipc::Channel& channel, int device,
                                 const std::vector<std::pair<uint32_t, uint32_t>>& pages) {
  for (size_t first = 0; first < pages.size(); first += wire::kMaxAdoptPages) {
    const size_t n = std::min<size_t>(wire::kMaxAdoptPages, pages.size() - first);
    wire::Message request;
    wire::AdoptRequest* adopt = request.mutable_adopt();
    adopt->set_device(device);
    // By id and generation alone: kvd checks each against the dead kvd's
    // journal (no fd is kept per page, page_cache.h invariant 4).
    for (size_t i = first; i < first + n; ++i) {
      wire::PageGrant* g = adopt->add_pages();
      g->set_page_id(pages[i].first);
      g->set_generation(pages[i].second);
    }
    // The reader does not read this connection yet: this thread waits for
    // the answer itself. Notices that come first are kvd's to this tenant (a
    // reclaim after an adopt over the limit) and are dispatched as the
    // reader would; a reply to anything else is a protocol error.
    ipc::ChannelTransport transport(channel);
    ipc::CallOptions call;
    call.peer = "kvd";
    call.timeout = kReplyTimeout;
    call.on_notice = [this](const wire::Message& notice) { return DispatchNotice(notice); };
    auto answered = ipc::Call(transport, next_request_id_++, std::move(request), {}, call);
    NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply, std::move(answered));
    if (!reply.message.has_adopt_reply()) {
      return Status::ProtocolError("kvd answered an adopt request with another message");
    }
    const wire::AdoptReply& answer = reply.message.adopt_reply();
    if (answer.refused_size() > 0) {
      spdlog::error("nanokv: kvd did not take back {} pages of device {} ({}): stop using them",
                    answer.refused_size(), device, answer.reason());
      std::vector<uint32_t> refused(answer.refused().begin(), answer.refused().end());
      NoteForfeited(device, refused);
    }
  }
  return Status::OK();
}

void Client::Impl::NoteForfeited(int device, std::span<const uint32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t id : ids) pages_forfeited_ += held_.erase({device, id});
}

}  // namespace nanokv
