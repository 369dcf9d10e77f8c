// Client::Impl's reader thread: routing kvd's datagrams (replies to the
// waiting requests, grants with their fds, notices) and the reclaim
// callbacks they start.
#include <sys/socket.h>

#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "ipc/wire/codec.h"
#include "libkv/client/client_impl.h"

namespace nanokv {
namespace {

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

}  // namespace

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
        CompleteLocked(message.request_id(), *pending, wire::StatusFromError(message.error()));
        if (pending->abandoned) unwanted = client::IdsOf(pending->pages);
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
    if (pending->abandoned) unwanted = client::IdsOf(pending->pages);
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
