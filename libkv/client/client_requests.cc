// Client::Impl's requests and its reader thread: request ids, waiting for
// replies, routing kvd's datagrams, the import of granted pages, reclaim
// callbacks, detach.
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "ipc/wire/codec.h"
#include "libkv/client/client_impl.h"

namespace nanokv {
namespace {

// Detach should not hold an exiting engine for long on a hung kvd: closing
// the socket detaches the tenant anyway.
constexpr uint32_t kDetachTimeoutMs = 5'000;
// How long a grant waits for other engines to drop pages recycled away from
// them (kvd's retry_after_forget), at most: a holder that keeps its fds
// never answers, and the refusal then reaches the caller.
constexpr uint32_t kForgetWaitMs = 5'000;

// The request kind a reply without pages answers.
std::optional<Client::Impl::Kind> SimpleReplyKind(wire::Message::BodyCase body) {
  switch (body) {
    case wire::Message::kReturnReply:
      return Client::Impl::Kind::kReturn;
    case wire::Message::kSetLimitReply:
      return Client::Impl::Kind::kSetLimit;
    case wire::Message::kDetachReply:
      return Client::Impl::Kind::kDetach;
    default:
      return std::nullopt;
  }
}

Status CheckPageCount(size_t count, const char* what) {
  if (count == 0 || count > wire::kMaxPagesPerRequest) {
    return Status::InvalidArgument(std::string(what) + " of " + std::to_string(count) +
                                   " pages (1 to " + std::to_string(wire::kMaxPagesPerRequest) +
                                   " in one request)");
  }
  return Status::OK();
}

std::vector<uint32_t> Ids(const std::vector<client::ImportedPage>& pages) {
  std::vector<uint32_t> ids;
  ids.reserve(pages.size());
  for (const auto& page : pages) ids.push_back(page.id);
  return ids;
}

}  // namespace

Status Client::Impl::SendMessage(const wire::Message& message) {
  std::vector<std::byte> bytes = wire::Encode(message);
  std::lock_guard<std::mutex> lock(send_mu_);
  return channel_.Send(bytes);
}

Status Client::Impl::Call(wire::Message message, const std::shared_ptr<Pending>& pending,
                          uint32_t timeout_ms) {
  uint64_t id = next_request_id_++;
  message.set_request_id(id);
  std::unique_lock<std::mutex> lock(mu_);
  if (!connected_) return gone_;
  // Registered before sending: the reply may arrive before Send returns.
  pending_[id] = pending;
  lock.unlock();
  Status sent = SendMessage(message);
  if (!sent.ok()) {
    if (sent.code() != Code::kInvalidArgument) {  // not just a message too large
      // A peer that closed shows as EPIPE/ECONNRESET here; the reader sees it too.
      Status gone = Status::Unavailable("kvd went away (" + sent.ToString() + ")");
      Disconnect(gone, gone);
    }
    lock.lock();
    if (pending->done) return pending->status;
    pending_.erase(id);
    return sent;
  }
  lock.lock();
  auto finished = [&pending] { return pending->done; };
  if (timeout_ms == 0) {
    pending->cv.wait(lock, finished);
  } else if (!pending->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), finished)) {
    // The reply may still come: the reader then returns what it granted.
    pending->abandoned = true;
    return Status::Unavailable("kvd did not answer request " + std::to_string(id) + " within " +
                               std::to_string(timeout_ms) + " ms");
  }
  return pending->status;
}

void Client::Impl::SendForgetDone(int device, std::span<const uint32_t> ids) {
  if (ids.empty()) return;
  wire::Message message;
  message.set_request_id(next_request_id_++);  // kvd answers only a fault
  wire::DevicePages* done = message.mutable_forget_done();
  done->set_device(device);
  for (uint32_t id : ids) done->add_page_ids(id);
  Status sent = SendMessage(message);
  if (!sent.ok()) spdlog::warn("nanokv: telling kvd {} forgotten pages are dropped: {}", ids.size(), sent.ToString());
}

void Client::Impl::ReturnAbandoned(int device, std::vector<uint32_t> ids) {
  for (size_t first = 0; first < ids.size(); first += wire::kMaxPagesPerRequest) {
    size_t n = std::min<size_t>(wire::kMaxPagesPerRequest, ids.size() - first);
    auto pending = std::make_shared<Pending>();
    pending->kind = Kind::kReturn;
    pending->abandoned = true;  // nobody waits: the reader drops the reply
    wire::Message message;
    message.set_request_id(next_request_id_++);
    wire::DevicePages* request = message.mutable_return_pages();
    request->set_device(device);
    for (size_t i = first; i < first + n; ++i) request->add_page_ids(ids[i]);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!connected_) return;  // kvd takes back a closed connection's pages
      pending_[message.request_id()] = pending;
    }
    Status sent = SendMessage(message);
    if (!sent.ok()) {
      spdlog::warn("nanokv: returning {} unwanted pages of device {}: {}", n, device,
                   sent.ToString());
      std::lock_guard<std::mutex> lock(mu_);
      pending_.erase(message.request_id());
    }
  }
}

Result<std::vector<client::ImportedPage>> Client::Impl::FinishGrant(
    Status status, const std::shared_ptr<Pending>& pending, int device) {
  std::vector<client::ImportedPage> pages;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Once abandoned, the pages belong to the reader (it returns them).
    if (pending->done && !pending->abandoned) pages = std::move(pending->pages);
    if (status.ok()) NoteHeldLocked(device, pages);
  }
  if (status.ok()) return pages;
  if (!pages.empty()) {
    // kvd failed a grant after sending part of it: give the part back, so it
    // does not count against this tenant's limit unseen.
    Status returned = ReturnPages(device, Ids(pages));
    if (!returned.ok()) {
      spdlog::warn("nanokv: returning {} pages of a failed grant: {}", pages.size(),
                   returned.ToString());
    }
  }
  return status;
}

Status Client::Impl::CheckDevice(int device) const { return LocalDevice(device).status(); }

Result<int> Client::Impl::LocalDevice(int device) const {
  for (const DeviceGeometry& g : devices_) {
    if (g.device != device) continue;
    if (g.local_device >= 0) return g.local_device;
    return gpu::LocalOrdinal(*backend_, device, g.uuid).status();  // why it is not here
  }
  return Status::InvalidArgument("kvd does not serve device " + std::to_string(device));
}

Result<std::vector<client::ImportedPage>> Client::Impl::GrantPages(int device, uint32_t pages) {
  NANOKV_RETURN_IF_ERROR(CheckPageCount(pages, "grant"));
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  // A grant that needs pages recycled away from engines still holding them
  // is refused until they drop them (they were told to, and say so): ask
  // again for a while, backing off, rather than fail an engine for what
  // another one's reader thread settles in microseconds.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(std::min<uint32_t>(
                           options_.request_timeout_ms == 0 ? kForgetWaitMs
                                                            : options_.request_timeout_ms,
                           kForgetWaitMs));
  std::chrono::microseconds pause{100};
  for (;;) {
    auto pending = std::make_shared<Pending>();
    pending->kind = Kind::kGrant;
    pending->device = device;
    pending->expect_pages = pages;
    wire::Message message;
    message.mutable_grant()->set_device(device);
    message.mutable_grant()->set_pages(pages);
    Status status = Call(std::move(message), pending, options_.request_timeout_ms);
    if (status.ok() || !pending->retry_after_forget ||
        std::chrono::steady_clock::now() + pause >= give_up) {
      return FinishGrant(std::move(status), pending, device);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(50));
  }
}

Result<std::vector<client::ImportedPage>> Client::Impl::SharePages(int device,
                                                                   std::span<const uint32_t> ids) {
  NANOKV_RETURN_IF_ERROR(CheckPageCount(ids.size(), "share"));
  NANOKV_RETURN_IF_ERROR(CheckDevice(device));
  auto pending = std::make_shared<Pending>();
  pending->kind = Kind::kShare;
  pending->device = device;
  pending->expect_ids.assign(ids.begin(), ids.end());
  wire::Message message;
  message.mutable_share()->set_device(device);
  for (uint32_t id : ids) message.mutable_share()->add_page_ids(id);
  Status status = Call(std::move(message), pending, options_.request_timeout_ms);
  return FinishGrant(std::move(status), pending, device);
}

Status Client::Impl::ReturnPages(int device, std::span<const uint32_t> ids) {
  if (ids.empty()) return Status::OK();
  NANOKV_RETURN_IF_ERROR(CheckPageCount(ids.size(), "return"));
  if (!ServesDevice(device)) {
    return Status::InvalidArgument("kvd does not serve device " + std::to_string(device));
  }
  // No longer ours from here, whatever kvd answers: the engine unmapped them,
  // so a reconnect must not hand them back.
  NoteReleased(device, ids);
  auto pending = std::make_shared<Pending>();
  pending->kind = Kind::kReturn;
  wire::Message message;
  message.mutable_return_pages()->set_device(device);
  for (uint32_t id : ids) message.mutable_return_pages()->add_page_ids(id);
  // pending_reclaim_ is lowered by the reader as it dispatches the reply (Dispatch).
  NANOKV_RETURN_IF_ERROR(Call(std::move(message), pending, options_.request_timeout_ms));
  return Status::OK();
}

void Client::Impl::NoteHeldLocked(int device, const std::vector<client::ImportedPage>& pages) {
  for (const client::ImportedPage& page : pages) held_[{device, page.id}] = page.generation;
}

void Client::Impl::NoteReleased(int device, std::span<const uint32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t id : ids) held_.erase({device, id});
}

ClientStats Client::Impl::stats() const {
  ClientStats out = cache_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  out.reconnects = reconnects_;
  out.pages_forfeited = pages_forfeited_;
  return out;
}

void Client::Impl::NoteReturned(size_t pages) {
  uint32_t before = pending_reclaim_.load(std::memory_order_relaxed);
  uint32_t after;
  do {
    after = before > pages ? before - static_cast<uint32_t>(pages) : 0;
  } while (!pending_reclaim_.compare_exchange_weak(before, after, std::memory_order_relaxed));
}

Result<uint64_t> Client::Impl::SetLimit(uint64_t bytes) {
  auto pending = std::make_shared<Pending>();
  pending->kind = Kind::kSetLimit;
  wire::Message message;
  message.mutable_set_limit()->set_limit_bytes(bytes);  // tenant empty: our own
  NANOKV_RETURN_IF_ERROR(Call(std::move(message), pending, options_.request_timeout_ms));
  const wire::SetLimitReply& reply = pending->reply.set_limit_reply();
  limit_bytes_ = reply.limit_bytes();  // pending_reclaim_: set by the reader (Dispatch)
  return reply.limit_bytes();
}

Status Client::Impl::Detach() {
  std::lock_guard<std::mutex> detach_lock(detach_mu_);
  bool was_connected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_connected = connected_;
    detaching_ = true;  // no reconnect from here on
  }
  reconnect_cv_.notify_all();
  Status result;
  if (was_connected) {
    auto pending = std::make_shared<Pending>();
    pending->kind = Kind::kDetach;
    wire::Message message;
    message.mutable_detach();
    uint32_t timeout = options_.request_timeout_ms == 0
                           ? kDetachTimeoutMs
                           : std::min(options_.request_timeout_ms, kDetachTimeoutMs);
    result = Call(std::move(message), pending, timeout);
    // kvd gone or slow: closing the socket below detaches us all the same.
    if (result.code() == Code::kUnavailable) result = Status::OK();
  }
  Status detached = Status::FailedPrecondition("this client has detached from kvd");
  Disconnect(detached, detached);
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = detached;  // even when kvd had gone first: the user's Detach is the news
    held_.clear();
  }
  if (reader_.joinable()) reader_.join();
  return result;
}

void Client::Impl::Disconnect(const Status& in_flight, const Status& later) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connected_) {
      connected_ = false;
      gone_ = later;
    }
    for (auto& [id, pending] : pending_) {
      pending->done = true;
      pending->status = in_flight;
      pending->cv.notify_all();
    }
    pending_.clear();
  }
  // Wakes the reader (recvmsg returns 0) and tells kvd at once. Under
  // send_mu_: a reconnect replaces channel_ under it.
  std::lock_guard<std::mutex> send_lock(send_mu_);
  if (channel_.valid()) shutdown(channel_.fd(), SHUT_RDWR);
}

void Client::Impl::ReaderLoop() {
  std::vector<std::byte> data;
  std::vector<int> fds;
  for (;;) {
    auto received = channel_.Receive(&data, &fds);
    if (!received.ok() || *received == ipc::Channel::Received::kClosed) {
      client::CloseFds(&fds);
      std::string why = received.ok() ? "connection closed" : received.status().ToString();
      bool was_connected = connected();
      bool retry;
      {
        std::lock_guard<std::mutex> lock(mu_);
        retry = options_.reconnect && !detaching_;
      }
      Status gone = Status::Unavailable("kvd went away (" + why + ")" +
                                        (retry ? "; reconnecting" : ""));
      Disconnect(gone, gone);
      if (was_connected) {
        spdlog::warn("nanokv: kvd went away ({}); mapped pages stay valid{}", why,
                     retry ? "; reconnecting" : "");
      }
      if (retry && Reconnect()) continue;
      return;
    }
    if (*received == ipc::Channel::Received::kWouldBlock) continue;
    wire::Message message;
    Status fault = wire::Decode(data, &message);
    if (fault.ok()) fault = Dispatch(message, &fds);
    client::CloseFds(&fds);  // any Dispatch did not take
    if (!fault.ok()) {
      spdlog::error("nanokv: dropping the connection to kvd: {}", fault.ToString());
      Disconnect(fault, Status::Unavailable("the connection to kvd was dropped after a protocol "
                                            "error: " +
                                            fault.ToString()));
      return;
    }
  }
}

Status Client::Impl::Dispatch(const wire::Message& message, std::vector<int>* fds) {
  if (message.request_id() == 0) {
    if (!fds->empty())
      return Status::ProtocolError(std::string("kvd's ") + wire::BodyName(message) + " carried fds");
    return DispatchNotice(message);
  }
  std::shared_ptr<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(message.request_id());
    if (it != pending_.end()) pending = it->second;
  }
  if (pending == nullptr) {
    return Status::ProtocolError(std::string("kvd sent ") + wire::BodyName(message) + " for request " +
                                 std::to_string(message.request_id()) + ", which is not waiting");
  }
  switch (message.body_case()) {
    case wire::Message::kGrantReply:
      if (pending->kind != Kind::kGrant && pending->kind != Kind::kShare) break;
      return DispatchGrantReply(message, pending, fds);
    case wire::Message::kError: {
      client::CloseFds(fds);
      std::vector<uint32_t> unwanted;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pending->retry_after_forget = message.error().retry_after_forget();
        CompleteLocked(message.request_id(), *pending, wire::StatusFromError(message.error()));
        if (pending->abandoned) unwanted = Ids(pending->pages);
      }
      if (!unwanted.empty()) ReturnAbandoned(pending->device, std::move(unwanted));
      return Status::OK();
    }
    default:
      break;
  }
  std::optional<Kind> answers = SimpleReplyKind(message.body_case());
  if (!answers || *answers != pending->kind) {
    return Status::ProtocolError(std::string("kvd answered request ") +
                                 std::to_string(message.request_id()) + " with " +
                                 wire::BodyName(message));
  }
  if (!fds->empty())
    return Status::ProtocolError(std::string("kvd's ") + wire::BodyName(message) + " carried fds");
  // The reclaim count changes here, on the reader, in kvd's order: a reclaim
  // notice kvd sent before this reply was applied already, one sent after it
  // comes next. Done by the caller after it wakes, a late update could undo a
  // newer notice (KVCacheTest.KeptGroupsServeAgainAndGoBackOnReclaim, under ASan).
  if (message.has_return_reply()) NoteReturned(message.return_reply().returned());
  if (message.has_set_limit_reply()) {
    const wire::SetLimitReply& reply = message.set_limit_reply();
    uint64_t over = reply.used_bytes() > reply.limit_bytes() ? reply.used_bytes() - reply.limit_bytes() : 0;
    pending_reclaim_ = static_cast<uint32_t>((over + page_bytes_ - 1) / page_bytes_);
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending->reply = message;
  CompleteLocked(message.request_id(), *pending, Status::OK());
  return Status::OK();
}

Status Client::Impl::DispatchGrantReply(const wire::Message& message,
                                        const std::shared_ptr<Pending>& pending,
                                        std::vector<int>* fds) {
  const wire::GrantReply& reply = message.grant_reply();
  if (reply.device() != pending->device) {
    client::CloseFds(fds);
    return Status::ProtocolError("kvd answered a request for device " +
                                 std::to_string(pending->device) + " with pages of device " +
                                 std::to_string(reply.device()));
  }
  std::vector<client::IncomingPage> incoming;
  incoming.reserve(reply.pages_size());
  for (const wire::PageGrant& page : reply.pages()) {
    incoming.push_back({page.page_id(), page.generation(), page.fd_attached()});
  }
  // Imported here, on the reader, so the cache follows kvd's order of grants
  // and forgets exactly. An import failure drops the connection too: kvd
  // now believes this process holds the handle and will never resend its fd.
  std::vector<client::ImportedPage> imported;
  NANOKV_ASSIGN_OR_RETURN(int local_device, LocalDevice(reply.device()));
  NANOKV_RETURN_IF_ERROR(cache_->Apply(reply.device(), local_device, incoming, fds, &imported));

  std::vector<uint32_t> unwanted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending->pages.insert(pending->pages.end(), imported.begin(), imported.end());
    size_t expected =
        pending->kind == Kind::kGrant ? pending->expect_pages : pending->expect_ids.size();
    if (pending->pages.size() > expected || (!reply.more() && pending->pages.size() < expected)) {
      return Status::ProtocolError("kvd granted " + std::to_string(pending->pages.size()) +
                                   " pages for a request of " + std::to_string(expected));
    }
    if (reply.more()) return Status::OK();
    if (pending->kind == Kind::kShare) {
      for (size_t i = 0; i < expected; ++i) {
        if (pending->pages[i].id != pending->expect_ids[i]) {
          return Status::ProtocolError("kvd answered a share of page " +
                                       std::to_string(pending->expect_ids[i]) + " with page " +
                                       std::to_string(pending->pages[i].id));
        }
      }
    }
    CompleteLocked(message.request_id(), *pending, Status::OK());
    if (pending->abandoned) unwanted = Ids(pending->pages);
  }
  if (!unwanted.empty()) {
    spdlog::warn("nanokv: kvd answered a grant after its caller gave up; returning {} pages",
                 unwanted.size());
    ReturnAbandoned(pending->device, std::move(unwanted));
  }
  return Status::OK();
}

void Client::Impl::CompleteLocked(uint64_t request_id, Pending& pending, Status status) {
  pending.done = true;
  pending.status = std::move(status);
  pending_.erase(request_id);
  pending.cv.notify_all();
}

Status Client::Impl::DispatchNotice(const wire::Message& message) {
  switch (message.body_case()) {
    case wire::Message::kReclaim: {
      const wire::ReclaimRequest& reclaim = message.reclaim();
      ReclaimNotice notice{reclaim.device(), reclaim.pages(), reclaim.limit_bytes()};
      limit_bytes_ = notice.limit_bytes;
      // A notice states what kvd wants back now, not an increment.
      pending_reclaim_ = notice.pages;
      spdlog::info("nanokv: kvd asks for {} pages back (limit now {} bytes)", notice.pages,
                   notice.limit_bytes);
      EnqueueReclaim(notice);
      return Status::OK();
    }
    case wire::Message::kForget: {
      const wire::ForgetPages& forget = message.forget();
      std::vector<uint32_t> ids(forget.page_ids().begin(), forget.page_ids().end());
      cache_->Forget(forget.device(), ids);
      // Dropped (unmapped, released, fds closed): kvd may count the room again.
      SendForgetDone(forget.device(), ids);
      return Status::OK();
    }
    case wire::Message::kShutdown: {
      spdlog::warn("nanokv: kvd is shutting down ({}); mapped pages stay valid",
                   message.shutdown().reason());
      Status gone = Status::Unavailable(
          "kvd went away (it shut down: " + message.shutdown().reason().substr(0, 200) + ")");
      Disconnect(gone, gone);
      return Status::OK();  // the reader sees the closed socket next and stops
    }
    default:
      return Status::ProtocolError(std::string("kvd sent ") + wire::BodyName(message) +
                                   " with request id 0");
  }
}

void Client::Impl::OnReclaim(std::function<void(const ReclaimNotice&)> callback) {
  {
    std::lock_guard<std::mutex> lock(reclaim_->mu);
    reclaim_->callback = std::move(callback);
  }
  std::lock_guard<std::mutex> lock(reclaim_thread_mu_);
  if (reclaim_thread_.joinable()) return;
  // Its own thread, not the reader's: the callback may call Return or
  // SetLimit, whose replies only the reader can deliver.
  reclaim_thread_ = std::thread(RunReclaimCallbacks, reclaim_);
}

void Client::Impl::RunReclaimCallbacks(std::shared_ptr<ReclaimQueue> queue) {
  std::unique_lock<std::mutex> lock(queue->mu);
  for (;;) {
    queue->cv.wait(lock, [&queue] { return queue->stop || !queue->notices.empty(); });
    if (queue->stop) return;
    ReclaimNotice notice = queue->notices.front();
    queue->notices.pop_front();
    auto callback = queue->callback;
    lock.unlock();  // the callback may take its time, and call into the Client
    if (callback) callback(notice);
    lock.lock();
  }
}

void Client::Impl::EnqueueReclaim(const ReclaimNotice& notice) {
  {
    std::lock_guard<std::mutex> lock(reclaim_->mu);
    if (!reclaim_->callback) return;  // pollers read pending_reclaim_pages()
    reclaim_->notices.push_back(notice);
  }
  reclaim_->cv.notify_one();
}

}  // namespace nanokv
