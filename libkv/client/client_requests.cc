// Client::Impl's requests: request ids, waiting for replies, the import of
// granted pages, detach (the reader thread that routes kvd's datagrams is
// client_reader.cc).
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
// them (kvd's Hint::kRetryAfterForget), at most: a holder that keeps its fds
// never answers, and the refusal then reaches the caller.
constexpr uint32_t kForgetWaitMs = 5'000;

Status CheckPageCount(size_t count, const char* what) {
  if (count == 0 || count > wire::kMaxPagesPerRequest) {
    return Status::InvalidArgument(std::string(what) + " of " + std::to_string(count) +
                                   " pages (1 to " + std::to_string(wire::kMaxPagesPerRequest) +
                                   " in one request)");
  }
  return Status::OK();
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
    Status returned = ReturnPages(device, client::IdsOf(pages));
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
    // kvd says when a refusal ends once engines drop pages recycled away
    // from them (wire Error.retry_after_forget, the status's hint).
    if (status.ok() || status.hint() != Hint::kRetryAfterForget ||
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

}  // namespace nanokv
