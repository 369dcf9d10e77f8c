#include "base/clocks.h"
#include "daemon/server/node_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <spdlog/spdlog.h>

#include "daemon/objects/object_index.h"
#include "daemon/server/kvd_metrics.h"
#include "ipc/uds/fd_passing.h"
#include "ipc/wire/codec.h"
#include "ipc/wire/object_codec.h"

namespace nanokv::kvd {

NodeServer::NodeServer(NodeState& node, ipc::Listener listener, ServerOptions options)
    : node_(node), listener_(std::move(listener)), options_(std::move(options)) {
  // Made here, not in Run, so Stop() is safe from a signal handler at any time.
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  task_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

NodeServer::~NodeServer() {
  Shutdown();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  if (task_fd_ >= 0) close(task_fd_);
  for (int fd : spare_fds_) {
    if (fd >= 0) close(fd);
  }
}

Status NodeServer::Setup() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return Status::FromErrno("epoll_create1", errno);
  if (stop_fd_ < 0) return Status::FromErrno("eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag | static_cast<uint32_t>(listener_.fd());
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener_.fd(), &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno, "listener");
  }
  ev.data.u64 = kStopTag | static_cast<uint32_t>(stop_fd_);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno, "stop eventfd");
  }
  if (task_fd_ < 0) return Status::FromErrno("eventfd", errno);
  ev.data.u64 = kTaskTag | static_cast<uint32_t>(task_fd_);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, task_fd_, &ev) != 0) {
    return Status::FromErrno("epoll_ctl", errno, "task eventfd");
  }
  for (int& fd : spare_fds_) {  // AcceptOutOfFds's
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("open", errno, "/dev/null");
  }
  return Status::OK();
}

void NodeServer::Stop() {
  uint64_t one = 1;  // async-signal-safe: one write(2)
  ssize_t ignored = write(stop_fd_, &one, sizeof(one));
  (void)ignored;
}

Status NodeServer::Run() {
  NANOKV_RETURN_IF_ERROR(Setup());
  spdlog::info("kvd: serving on {}", listener_.path());
  using Clock = std::chrono::steady_clock;
  // The segment is rewritten at most every kPublishGap while things change
  // (a publish copies ~68 KiB; doing it after every grant would put it on the
  // next request's path), and at least every second as a heartbeat.
  constexpr auto kPublishGap = std::chrono::milliseconds(2);
  constexpr auto kHeartbeat = std::chrono::seconds(1);
  constexpr auto kReclaimGap = std::chrono::milliseconds(100);
  constexpr auto kRingSpin = std::chrono::microseconds(2);
  constexpr int kSlabPollGapMs = 1;
  auto last_publish = Clock::now() - kHeartbeat;
  const auto recovery_ends = Clock::now() + std::chrono::milliseconds(options_.recovery_window_ms);
  if (node_.recovering_pages() > 0) {
    spdlog::info("kvd: waiting up to {} ms for engines to hand back {} pages", options_.recovery_window_ms,
                 node_.recovering_pages());
  }
  bool stopping = false;
  epoll_event events[64];
  // Busy polling (busy_poll_us): until then, epoll_wait does not sleep.
  auto poll_until = Clock::now();
  auto next_reclaim = Clock::now();
  while (!stopping) {
    // Before this turn's requests, so a window of 0 frees the pages before
    // any engine can hand one back.
    if (node_.recovery_open() && Clock::now() >= recovery_ends) {
      size_t released = node_.ExpireRecovery();
      if (released > 0) {
        spdlog::warn("kvd: recovery window over: {} pages of the previous kvd were not handed "
                     "back and are free again", released);
      } else {
        spdlog::info("kvd: recovery window over: every page was handed back; adopts are refused now");
      }
      dirty_ = true;
    }
    // Writes left past write_timeout are reclaimed on this timer, not only
    // when a later open or commit happens to meet them (there may be none).
    if (objects_ != nullptr && Clock::now() >= next_reclaim) {
      if (objects_->Reclaim(SteadyNowNs()) > 0) dirty_ = true;
      next_reclaim = Clock::now() + kReclaimGap;
    }
    // v2 slabs' announce rings: read every turn, and the loop sleeps at most
    // kSlabPollGap while a slab is live. A producer is a kernel that rings
    // no doorbell (an eventfd write per put would be a host call per put,
    // which slabs exist to avoid), so a put becomes readable by key within
    // about kSlabPollGap; before that a get answers kNotFound, as for an
    // object not put yet. A poll is a lock and a host load per live slab.
    bool slabs_live = false;
    bool slabs_busy = false;  // a poll read a full batch: more is likely waiting, so no sleep
    if (objects_ != nullptr) {
      const size_t announced = objects_->PollSlabs(SteadyNowNs());
      if (announced > 0) dirty_ = true;
      slabs_busy = announced >= ObjectIndex::kSlabPollRecords;
      const size_t live = objects_->slab_counters().live;
      if (live != live_slabs_) dirty_ = true;  // one ended (expired, poisoned): /metrics says so
      live_slabs_ = live;
      slabs_live = live > 0;
    }
    auto since = Clock::now() - last_publish;
    int timeout_ms = 250;
    if (dirty_) {
      timeout_ms = since >= kPublishGap ? 0 : 1 + static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(kPublishGap - since).count());
    }
    if (slabs_live) timeout_ms = std::min(timeout_ms, slabs_busy ? 0 : kSlabPollGapMs);
    if (options_.busy_poll_us != 0 && Clock::now() < poll_until) timeout_ms = 0;
    // Rings are looked at every turn (a busy-polling kvd sees a request
    // without any wake-up); before sleeping each is marked so that its
    // client rings the doorbell.
    bool served = ServeRings();
    if (!served && timeout_ms == 0 && Clock::now() < poll_until && rings_ > 0) {
      // Busy polling: look at the rings alone for a moment before the next
      // epoll_wait (a syscall per look would be most of a ring request's
      // time); a socket request waits at most that long (measured: 20 us
      // here made a socket plan 54 us instead of 28 on an H200).
      const auto rings_until = Clock::now() + kRingSpin;
      while (!served && Clock::now() < rings_until) served = ServeRings();
    }
    timeout_ms = ResumeAcceptingIfDue(timeout_ms);
    if (served || (timeout_ms != 0 && RingsAsleep())) timeout_ms = 0;
    int n = epoll_wait(epoll_fd_, events, 64, timeout_ms);
    RingsAwake();
    if ((n > 0 || served) && options_.busy_poll_us != 0) {
      poll_until = Clock::now() + std::chrono::microseconds(options_.busy_poll_us);
    }
    if (n < 0 && errno != EINTR) return Status::FromErrno("epoll_wait", errno);
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64 & ~0xffffffffull;
      int fd = static_cast<int>(events[i].data.u64 & 0xffffffffull);
      if (tag == kStopTag) {
        stopping = true;
      } else if (tag == kListenerTag) {
        Accept();
      } else if (tag == kPidTag) {
        auto it = pidfds_.find(fd);
        if (it != pidfds_.end()) {
          // Closed now, so not again at the end of the turn: a connection
          // accepted later in this turn may be given the same fd number.
          std::erase(doomed_, it->second);
          CloseConnection(it->second, "its process exited");
        }
      } else if (tag == kSocketTag) {
        OnReadable(fd);
      } else if (tag == kTaskTag) {
        RunPosted();
      } else if (tag == kRingTag) {
        OnDoorbell(fd);
      }
    }
    DeliverNotices();
    CloseExpiredRefusals(/*all_over_cap=*/false);
    for (int fd : doomed_) CloseConnection(fd, "closed by kvd");
    doomed_.clear();
    if (options_.check_invariants && dirty_) {
      // Debug aid (kvd --check-invariants): stop at the first turn that breaks one.
      // The store's check includes the node's; it reads the device headers
      // of live objects (a debug aid: device work kvd never does otherwise).
      Status held = objects_ != nullptr ? objects_->CheckInvariants(node_) : node_.CheckInvariants();
      if (!held.ok()) {
        spdlog::critical("kvd: invariant broken: {}", held.ToString());
        return Status::Internal("invariant broken: " + std::string(held.message()));
      }
    }
    since = Clock::now() - last_publish;
    if (!publish_) dirty_ = false;  // nothing to publish to: never wait on it
    if (publish_ && ((dirty_ && since >= kPublishGap) || since >= kHeartbeat)) {
      publish_(node_);
      dirty_ = false;
      last_publish = Clock::now();
    }
  }
  Shutdown();
  return Status::OK();
}

void NodeServer::OnReadable(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  std::vector<std::byte> data;
  // A bounded number of datagrams per turn, so one busy engine cannot starve others.
  for (int i = 0; i < 32; ++i) {
    if (std::find(doomed_.begin(), doomed_.end(), fd) != doomed_.end()) return;
    std::vector<int> fds;
    auto received = c.channel.Receive(&data, &fds);
    if (!received.ok()) {
      for (int stray : fds) close(stray);
      Fault(c, 0, received.status());  // e.g. an oversized datagram
      if (received.status().code() != Code::kProtocolError) doomed_.push_back(fd);
      return;
    }
    if (*received == ipc::Channel::Received::kWouldBlock) {
      if (c.refused) doomed_.push_back(fd);
      return;
    }
    if (*received == ipc::Channel::Received::kClosed) {
      doomed_.push_back(fd);
      return;
    }
    if (c.refused) {
      for (int stray : fds) close(stray);
      SendError(c, 0, c.refusal);
      continue;  // drain everything, then close (below, on would-block)
    }
    Handle(c, data, &fds);
    for (int stray : fds) close(stray);  // fds a handler did not take
    // Now, not at the end of the turn: a notice this request caused (a reclaim
    // after set_limit) must reach the engine before the reply to its next
    // request, read in this same loop, or the engine would take it for news.
    DeliverNotices();
  }
}

void NodeServer::Handle(Connection& c, const std::vector<std::byte>& data,
                        std::vector<int>* fds) {
  RequestTimer timed(metrics_);  // latency and refusals for /metrics, when on
  MessageArena arena(request_block_);
  wire::Message& m = *arena.Make<wire::Message>();
  Status decoded = wire::Decode(data, &m);
  if (!decoded.ok()) return Fault(c, m.request_id(), decoded);
  timed.SetKind(m.body_case());
  uint64_t rid = m.request_id();
  uint64_t now = NowUnixNs();
  if (m.body_case() == wire::Message::kAdopt && c.tenant != 0) return HandleAdopt(c, m, fds);
  if (!fds->empty()) {
    // Not a fault to count: fds are kernel resources a hostile peer could pile
    // up in kvd between faults (each costs kvd an fd until closed), so any
    // that kvd did not ask for ends the connection.
    SendError(c, rid, Status::ProtocolError(
                          "kvd takes file descriptors only with an adopt request; closing"));
    doomed_.push_back(c.channel.fd());
    return;
  }
  if (m.body_case() == wire::Message::kAttach) return HandleAttach(c, m);
  if (m.body_case() == wire::Message::kRingSetup) return HandleRingSetup(c, rid);
  if (m.body_case() == wire::Message::kSetLimit && !m.set_limit().tenant().empty()) {
    return HandleSetLimit(c, m);  // an operator's request: no attach needed
  }
  if (m.body_case() == wire::Message::kEvict) return HandleEvict(c, m);  // an operator's too
  if (m.body_case() == wire::Message::kObjectLeaseBatch || m.body_case() == wire::Message::kObjectReleaseBatch) {
    return HandleObjectBatch(c, m);
  }
  if (wire::IsObjectRequest(m.body_case())) return HandleObject(c, m);
  bool engine_request = m.body_case() == wire::Message::kGrant ||
                        m.body_case() == wire::Message::kShare ||
                        m.body_case() == wire::Message::kReturnPages ||
                        m.body_case() == wire::Message::kSetLimit ||
                        m.body_case() == wire::Message::kDetach ||
                        m.body_case() == wire::Message::kAdopt ||
                        m.body_case() == wire::Message::kForgetDone ||
                        m.body_case() == wire::Message::kReserveReport;
  if (!engine_request) {
    return Fault(c, rid, Status::ProtocolError(std::string("kvd does not take '") + wire::BodyName(m) +
                                               "' from an engine"));
  }
  if (c.tenant == 0) {
    return SendError(c, rid, Status::FailedPrecondition("attach first"));
  }
  dirty_ = true;
  switch (m.body_case()) {
    case wire::Message::kGrant:
      return HandleGrant(c, rid, m.grant().device(),
                         node_.Grant(c.tenant, m.grant().device(), m.grant().pages(), now));
    case wire::Message::kShare: {
      std::vector<PageId> ids(m.share().page_ids().begin(), m.share().page_ids().end());
      return HandleGrant(c, rid, m.share().device(),
                         node_.Share(c.tenant, m.share().device(), ids, now));
    }
    case wire::Message::kReturnPages: {
      std::vector<PageId> ids(m.return_pages().page_ids().begin(),
                              m.return_pages().page_ids().end());
      Status returned = node_.Return(c.tenant, m.return_pages().device(), ids, now);
      if (!returned.ok()) return SendError(c, rid, returned);
      wire::Message reply;
      reply.set_request_id(rid);
      reply.mutable_return_reply()->set_returned(static_cast<uint32_t>(ids.size()));
      Send(c, reply);
      if (metrics_ != nullptr) metrics_->PagesReturned(m.return_pages().device(), ids.size());
      return;
    }
    case wire::Message::kSetLimit:
      return HandleSetLimit(c, m);
    case wire::Message::kForgetDone: {  // no reply: the engine does not wait for one
      std::vector<PageId> ids(m.forget_done().page_ids().begin(), m.forget_done().page_ids().end());
      Result<size_t> ended = node_.ForgetDone(c.tenant, m.forget_done().device(), ids);
      if (!ended.ok()) return Fault(c, rid, ended.status());
      return;
    }
    case wire::Message::kReserveReport: {  // no reply, as forget_done
      Status reported = node_.ReportReserve(c.tenant, m.reserve_report().device(),
                                            m.reserve_report().reserve_bytes());
      if (!reported.ok()) return Fault(c, rid, reported);
      return;
    }
    case wire::Message::kDetach: {
      TenantId tenant = std::exchange(c.tenant, 0);
      tenant_fds_.erase(tenant);
      Status detached = node_.Detach(tenant);
      if (!detached.ok()) return SendError(c, rid, detached);
      wire::Message reply;
      reply.set_request_id(rid);
      reply.mutable_detach_reply();
      Send(c, reply);
      return;
    }
    default:
      return;
  }
}

bool NodeServer::Send(Connection& c, const wire::Message& m, std::span<const int> fds) {
  std::vector<std::byte> bytes = wire::Encode(m);
  if (c.serving_ring && fds.empty()) {
    bool on_ring = false;
    if (!SendOnRing(c, bytes, &on_ring)) return false;
    if (on_ring) return true;
  }
  Status sent = c.channel.Send(bytes, fds);
  if (c.serving_ring) c.ring->WakeClient();  // it waits on the ring: a reply came by the socket
  if (sent.ok()) return true;
  // A full buffer means the engine is not reading its replies: it cannot be
  // served, and it must not hold kvd's loop or its pages hostage.
  spdlog::warn("kvd: dropping connection of pid {}: {}", c.peer.pid, sent.ToString());
  doomed_.push_back(c.channel.fd());
  return false;
}

void NodeServer::SendError(Connection& c, uint64_t request_id, const Status& status) {
  if (metrics_ != nullptr) metrics_->Refused(status.code());
  Send(c, wire::ErrorReply(request_id, status));
}

void NodeServer::Fault(Connection& c, uint64_t request_id, const Status& status) {
  ++c.faults;
  spdlog::warn("kvd: protocol fault from pid {} ({} so far): {}", c.peer.pid, c.faults,
               status.ToString());
  SendError(c, request_id, status);
  if (c.faults >= options_.max_faults) doomed_.push_back(c.channel.fd());
}

void NodeServer::DeliverNotices() {
  for (Notice& notice : node_.TakeNotices()) {
    auto it = tenant_fds_.find(notice.tenant);
    if (it == tenant_fds_.end()) continue;
    auto c = connections_.find(it->second);
    if (c == connections_.end()) continue;
    wire::Message m;
    m.set_request_id(0);
    if (notice.kind == Notice::Kind::kReclaim) {
      m.mutable_reclaim()->set_device(notice.device);
      m.mutable_reclaim()->set_pages(notice.pages);
      m.mutable_reclaim()->set_limit_bytes(notice.limit_bytes);
      if (metrics_ != nullptr) metrics_->ReclaimNotice(notice.pages);
    } else {
      m.mutable_forget()->set_device(notice.device);
      for (PageId id : notice.page_ids) m.mutable_forget()->add_page_ids(id);
      if (metrics_ != nullptr) metrics_->ForgetNotice();
    }
    Send(*c->second, m);
  }
}

void NodeServer::CloseConnection(int fd, const std::string& reason) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  if (c.tenant != 0) {
    const Tenant* t = node_.FindTenant(c.tenant);
    uint64_t used = t != nullptr ? node_.UsedBytes(*t) : 0;
    std::string name = t != nullptr ? t->name : "?";
    Status detached = node_.Detach(c.tenant);
    tenant_fds_.erase(c.tenant);
    if (metrics_ != nullptr) metrics_->EngineLost(used / node_.page_bytes());
    spdlog::info("kvd: tenant '{}' (pid {}) gone ({}): {} bytes back in the pool", name,
                 c.peer.pid, reason, used);
    if (!detached.ok()) spdlog::error("kvd: detach: {}", detached.ToString());
  }
  if (c.pidfd >= 0) {
    pidfds_.erase(c.pidfd);
    close(c.pidfd);
  }
  if (c.refused) {
    --refused_open_;
  } else if (auto counted = per_process_.find(c.peer.pid); counted != per_process_.end()) {
    if (--counted->second == 0) per_process_.erase(counted);
  }
  // Its slabs end (what it announced stands), then its uid's held pages.
  if (objects_ != nullptr) objects_->ReleaseHeldSlabs(c.serial, SteadyNowNs());
  ObjectPeerGone(c);
  if (objects_ != nullptr) objects_->EndConnectionLeases(c.serial);  // its views and gets end with it
  if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (c.doorbell.valid()) {  // closed with the connection
    if (!c.bell_muted) ListenToDoorbell(c, false);
    doorbells_.erase(c.doorbell.fd());
  }
  if (c.ring != nullptr) --rings_;
  connections_.erase(it);
  dirty_ = true;
}

void NodeServer::Shutdown() {
  if (connections_.empty() && listener_.fd() < 0) return;
  listener_.Close();  // stop accepting, remove the socket file
  // Engines keep the pages they mapped past kvd's stop and reconnect to the
  // next kvd: the journal keeps saying they hold them.
  pages_held_at_stop_ = node_.HoldsPages();
  metrics_ = nullptr;  // engines let go at the stop are not lost ones
  node_.SetJournal(nullptr);
  wire::Message notice;
  notice.mutable_shutdown()->set_reason("kvd is stopping");
  std::vector<int> fds;
  for (auto& [fd, c] : connections_) {
    (void)c->channel.Send(wire::Encode(notice));
    fds.push_back(fd);
  }
  for (int fd : fds) CloseConnection(fd, "kvd stopping");
  if (publish_) publish_(node_);
}

}  // namespace nanokv::kvd
