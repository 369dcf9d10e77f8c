// The transfer agent's thread, endpoints, hello and timeouts
// (daemon/transfer/transfer_agent.h); put and get are transfer_ops.cc's.
#include "daemon/transfer/transfer_agent.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "daemon/transfer/transfer_agent_impl.h"
#include "ipc/master/master_auth.h"
#include "ipc/master/token.h"
#include "ipc/ucx/ucx_api.h"

namespace nanokv::kvd {

Result<std::unique_ptr<TransferAgent>> TransferAgent::Start(ObjectIndex& store, gpu::Backend& backend,
                                                            TransferAgentOptions options) {
  auto impl = std::make_unique<Impl>(store, backend, std::move(options));
  NANOKV_RETURN_IF_ERROR(impl->Open());
  Impl* raw = impl.get();
  raw->thread_ = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<TransferAgent>(new TransferAgent(std::move(impl)));
}

Result<std::unique_ptr<TransferAgent>> StartTransferAgent(ObjectIndex& store, gpu::Backend& backend,
                                                          MasterLinkConfig* link) {
  if (!link->enabled() || link->data_address.empty()) return std::unique_ptr<TransferAgent>();
  TransferAgentOptions options{link->data_address, "", link->transfer};
  if (!link->token_file.empty()) {
    auto token = master::ReadTokenFile(link->token_file);
    if (!token.ok()) {
      return Status(token.status().code(), "master.token_file: " + std::string(token.status().message()));
    }
    options.token = master::DataPathKey(*token);  // what a peer's hello carries
  }
  NANOKV_ASSIGN_OR_RETURN(auto agent, TransferAgent::Start(store, backend, std::move(options)));
  link->data_address = agent->address();
  return agent;
}

TransferAgent::TransferAgent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TransferAgent::~TransferAgent() { Stop(); }
void TransferAgent::Stop() { impl_->Stop(); }
const std::string& TransferAgent::address() const { return impl_->address_; }
const std::string& TransferAgent::mode() const { return impl_->mode_; }

TransferAgent::Impl::Impl(ObjectIndex& store, gpu::Backend& backend, TransferAgentOptions options)
    : store_(store),
      backend_(backend),
      options_(std::move(options)),
      staging_(backend, options_.config.staging_buffers, "transfer agent") {}

TransferAgent::Impl::~Impl() {
  Stop();
  listener_.reset();
  worker_.reset();
  context_.reset();
  if (stop_fd_ >= 0) close(stop_fd_);
}

Status TransferAgent::Impl::Open() {
  NANOKV_ASSIGN_OR_RETURN(sockaddr_storage address, ucx::ParseHostPort(options_.listen_address, "master.data_address"));
  ucx::RaiseAsyncEventLimit();  // a listener's connections past UCX's default crash it (ucx_api.h)
  NANOKV_ASSIGN_OR_RETURN(context_, ucx::Context::Create());
  NANOKV_ASSIGN_OR_RETURN(worker_, ucx::Worker::Create(*context_));
  NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kHello, &Impl::OnMessageOf<ucx::kHello>, this));
  NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kPut, &Impl::OnMessageOf<ucx::kPut>, this));
  NANOKV_RETURN_IF_ERROR(worker_->SetHandler(ucx::kGet, &Impl::OnMessageOf<ucx::kGet>, this));
  auto listener = ucx::Listener::Create(*worker_, address, &Impl::OnConnection, this);
  if (!listener.ok()) {
    return Status(listener.status().code(), "master.data_address: " + std::string(listener.status().message()));
  }
  listener_ = std::move(listener).value();
  address_ = ucx::FormatSockaddr(listener_->address());
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return Status::FromErrno("eventfd", errno, "transfer agent");
  spdlog::info("transfer agent: listening on {} (UCX), mode staging: device <-> host buffers of {} bytes, {} in "
               "flight a transfer{}; {}",
               address_, options_.config.chunk_bytes, options_.config.depth,
               context_->device_memory() ? " (UCX reports device memory: direct registration is not built yet)"
                                         : " (this UCX has no device memory support)",
               options_.token.empty() ? "no token: any peer that reaches the port may transfer" : "token required");
  return Status::OK();
}

void TransferAgent::Impl::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) spdlog::warn("transfer agent: waking the thread: {}", errno);
  thread_.join();
}

void TransferAgent::Impl::Run() {
  while (!stopping_) {
    bool busy = worker_->Progress() != 0;
    while (!incoming_.empty()) {
      Incoming in = std::move(incoming_.front());
      incoming_.pop_front();
      Handle(in);
      busy = true;
    }
    busy = Sweep() || busy;
    if (busy) continue;
    const ucs_status_t armed = worker_->Arm();
    if (armed == UCS_ERR_BUSY) continue;
    pollfd fds[2] = {{worker_->event_fd(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    // The timeout lets Sweep find silent peers.
    poll(fds, 2, 500);
  }
  // Stopping: every endpoint ends; reads in flight give their leases back.
  for (auto& [ep, peer] : peers_) Close(peer.get(), true, "kvd stops");
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!peers_.empty() && Clock::now() < deadline) {
    worker_->Progress();
    for (Incoming& in : incoming_) Release(in);
    incoming_.clear();
    Sweep();
  }
  for (auto& get : gets_) FinishGet(get.get());
  log_.Flush(Clock::now(), true);
}

void TransferAgent::Impl::OnConnection(ucp_conn_request_h request, void* arg) {
  auto* impl = static_cast<Impl*>(arg);
  if (impl->stopping_) return impl->listener_->Reject(request);  // nothing new while every endpoint ends
  auto peer = std::make_unique<Peer>();
  peer->impl = impl;
  peer->host = ucx::ClientHostOf(request);
  auto ep = ucx::AcceptEndpoint(*impl->worker_, request, &Impl::OnPeerError, peer.get());
  if (!ep.ok()) {
    // UCX rejected and freed the request already: it is not rejected again.
    impl->log_.Note(spdlog::level::warn, "a connection refused: " + ep.status().ToString());
    return;
  }
  Peer* raw = peer.get();
  raw->ep = *ep;
  impl->peers_[*ep] = std::move(peer);
  if (auto oldest = impl->waiters_.Add(IdOf(raw), raw->host)) {
    impl->Close(reinterpret_cast<Peer*>(*oldest), true,
                "ended for a newer one: " + std::to_string(impl->waiters_.per_host()) +
                    " endpoints from one host, " + std::to_string(impl->waiters_.total()) +
                    " in all, may wait for their hello");
  }
}

void TransferAgent::Impl::OnPeerError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  peer->impl->Close(peer, true, std::string("the peer failed: ") + ucx::StatusString(status));
}

ucs_status_t TransferAgent::Impl::OnMessage(uint16_t id, void* arg, const void* header, size_t header_length,
                                            void* data, size_t length, const ucp_am_recv_param_t* param) {
  auto* impl = static_cast<Impl*>(arg);
  const bool rendezvous = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  auto found = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? impl->peers_.find(param->reply_ep)
                                                                          : impl->peers_.end();
  if (found == impl->peers_.end() || found->second->closing || header_length > ucx::kMaxHeaderBytes ||
      length > impl->options_.config.chunk_bytes) {
    if (found != impl->peers_.end() && !found->second->closing) {
      impl->Close(found->second.get(), true, "a message past the limits (header or chunk size)");
    }
    return rendezvous ? UCS_ERR_REJECTED : UCS_OK;  // rendezvous data dropped
  }
  Incoming in;
  in.peer = found->second.get();
  in.peer->last_heard = Clock::now();
  in.header.assign(static_cast<const char*>(header), header_length);
  in.length = length;
  in.id = id;
  if (rendezvous) {
    in.descriptor = data;
  } else if (length > 0) {
    const auto* bytes = static_cast<const std::byte*>(data);
    in.eager.assign(bytes, bytes + length);
  }
  impl->incoming_.push_back(std::move(in));
  return rendezvous ? UCS_INPROGRESS : UCS_OK;
}

void TransferAgent::Impl::Release(Incoming& in) {
  ucx::ReleaseAmData(*worker_, in.descriptor);
  in.descriptor = nullptr;
}

void TransferAgent::Impl::Handle(Incoming& in) {
  if (in.peer->closing) {
    Release(in);
    return;
  }
  switch (in.id) {
    case ucx::kHello:
      Release(in);
      HandleHello(in);
      return;
    case ucx::kPut:
      if (in.peer->admitted) return HandlePut(in);
      break;
    case ucx::kGet:
      Release(in);
      if (in.peer->admitted) return HandleGet(in);
      break;
    default:
      break;
  }
  Release(in);
  Close(in.peer, true, "a message before its hello");
}

void TransferAgent::Impl::HandleHello(Incoming& in) {
  transfer::v1::Hello hello;
  if (in.peer->admitted || !ucx::DecodeHeader(in.header.data(), in.header.size(), "hello", &hello).ok()) {
    return Close(in.peer, true, "a hello that does not parse, or a second one");
  }
  const Status verdict = HelloVerdict(hello, options_.token);
  transfer::v1::Reply reply = ucx::ReplyOf(0, verdict);
  if (verdict.ok()) {
    in.peer->admitted = true;
    waiters_.Remove(IdOf(in.peer));
    reply.set_chunk_bytes(options_.config.chunk_bytes);
    reply.set_depth(options_.config.depth);
    reply.set_mode(mode_);
  } else {
    log_.Note(spdlog::level::warn, "a peer refused: " + verdict.ToString());
    in.peer->close_after_reply = true;
  }
  Reply(in.peer, ucx::kHelloReply, reply);
}

void TransferAgent::Impl::Reply(Peer* peer, uint16_t id, const transfer::v1::Reply& reply) {
  auto* op = new Op;
  op->impl = this;
  op->peer = peer;
  op->header = reply.SerializeAsString();
  ++peer->outstanding;
  Status sent = ucx::SendAm(peer->ep, id, op->header, nullptr, 0, false, &Impl::OnReplySent, op);
  if (!sent.ok()) {
    --peer->outstanding;
    delete op;
    Close(peer, true, "a reply failed: " + sent.ToString());
  }
}

void TransferAgent::Impl::OnReplySent(void* request, ucs_status_t /*status*/, void* user_data) {
  ucx::RequestFree(request);
  auto* op = static_cast<Op*>(user_data);
  --op->peer->outstanding;
  if (op->peer->close_after_reply && !op->peer->closing) op->impl->Close(op->peer, false, "refused");
  delete op;
}

void TransferAgent::Impl::Close(Peer* peer, bool force, const std::string& why) {
  if (peer->closing) return;
  peer->closing = true;
  waiters_.Remove(IdOf(peer));
  if (force) log_.Note(spdlog::level::info, "an endpoint ends: " + why);
  for (auto it = waiting_puts_.begin(); it != waiting_puts_.end();) {
    if (it->peer != peer) {
      ++it;
      continue;
    }
    Release(*it);
    --peer->queued_puts;
    it = waiting_puts_.erase(it);
  }
  for (auto& get : gets_) {
    if (get->peer == peer) get->failed = true;
  }
  peer->close_request = ucx::CloseEndpoint(*worker_, peer->ep, force);
}

bool TransferAgent::Impl::Referenced(const Peer* peer) const {
  for (const auto& get : gets_) {
    if (get->peer == peer) return true;
  }
  for (const auto* queue : {&incoming_, &waiting_puts_}) {
    for (const Incoming& in : *queue) {
      if (in.peer == peer) return true;
    }
  }
  return false;
}

bool TransferAgent::Impl::Sweep() {
  bool did = false;
  const auto now = Clock::now();
  // Reads that failed or finished and have nothing in flight end here.
  for (auto it = gets_.begin(); it != gets_.end();) {
    GetTransfer* get = it->get();
    if ((get->failed || get->next == get->plan.bytes_total) && get->inflight == 0) {
      FinishGet(get);
      it = gets_.erase(it);
      did = true;
    } else {
      ++it;
    }
  }
  // Buffers freed since: waiting chunks first, then reads.
  while (!waiting_puts_.empty() && StagingLeft()) {
    Incoming in = std::move(waiting_puts_.front());
    waiting_puts_.pop_front();
    --in.peer->queued_puts;
    HandlePut(in);
    did = true;
  }
  for (auto& get : gets_) {
    if (!get->failed && now - get->leased_at > store_.config().lease_ttl / 2) RenewLease(get.get());
    if (get->waiting && StagingLeft()) {
      get->waiting = false;
      Pump(get.get());
      did = true;
    }
  }
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer* peer = it->second.get();
    if (!peer->closing && now - peer->last_heard > options_.config.timeout &&
        (peer->outstanding > 0 || !peer->admitted)) {
      Close(peer, true, peer->admitted ? "silent for transfer.timeout with work in flight"
                                       : "silent for transfer.timeout before its hello");
    }
    if (peer->closing && peer->outstanding == 0 && ucx::RequestDone(peer->close_request)) {
      // Its endpoint is gone: UCX may hand its address to the next
      // connection, so the peer leaves the map now, and lives on apart
      // while reads still point at it (a new peer under the same key once
      // freed it under them: an ASan finding in ClusterTransferFaultsTest).
      peer->close_request = nullptr;
      if (Referenced(peer)) closed_peers_.push_back(std::move(it->second));
      it = peers_.erase(it);
      did = true;
      continue;
    }
    ++it;
  }
  std::erase_if(closed_peers_, [this](const std::unique_ptr<Peer>& peer) { return !Referenced(peer.get()); });
  for (auto it = writes_.begin(); it != writes_.end();) {
    it = now - it->second.last > options_.config.timeout ? writes_.erase(it) : std::next(it);
  }
  log_.Flush(now);
  return did;
}

}  // namespace nanokv::kvd
