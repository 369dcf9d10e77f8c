// NodeServer: the shared-memory request rings (ipc/ring/request_ring.h). A client asks for one over its socket; from
// then on its fd-less requests may come through the ring, served by this
// same thread (no thread per client): every loop turn looks at each ring,
// so a busy-polling kvd (busy_poll_us) answers without any wake-up, and a
// sleeping one is woken by the ring's own doorbell (ipc/ring/doorbell.h:
// kvd's end of a socket pair is kvd's alone, so no client can steal a
// wake-up or make kvd's read block).
//
// A ring is hostile input exactly like a datagram: each entry is copied out
// of the shared memory, then decoded and checked by the same Handle. A ring
// whose indices are impossible closes its connection; kvd never waits on a
// ring (a full reply ring sends the reply by the socket instead).
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "daemon/server/node_server.h"

namespace nanokv::kvd {

namespace {

// Bells in a row that found nothing in their ring before kvd stops listening
// to that doorbell. A client rings only after pushing a request, so its
// bells find nothing only when kvd's last look before sleeping took the
// request first: one now and then, never many in a row.
constexpr uint32_t kMaxEmptyBells = 16;

}  // namespace

void NodeServer::HandleRingSetup(Connection& c, uint64_t request_id) {
  if (c.ring != nullptr) {
    return SendError(c, request_id, Status::AlreadyExists("this connection has a ring already"));
  }
  int memfd = -1;
  Result<ipc::RequestRing> ring = ipc::RequestRing::Create(&memfd);
  int bell_end = -1;
  Result<ipc::Doorbell> doorbell = ring.ok() ? ipc::Doorbell::Create(&bell_end) : ring.status();
  if (!doorbell.ok()) {
    if (memfd >= 0) close(memfd);
    spdlog::warn("kvd: a request ring for pid {}: {}", c.peer.pid, doorbell.status().ToString());
    return SendError(c, request_id, doorbell.status());  // the client goes on over the socket
  }
  wire::Message reply;
  reply.set_request_id(request_id);
  reply.mutable_ring_setup_reply()->set_ring_version(ipc::kRingVersion);
  reply.mutable_ring_setup_reply()->set_ring_bytes(ipc::kRingFileBytes);
  const int fds[] = {memfd, bell_end};
  const bool sent = Send(c, reply, fds);
  // The mapping stays; the client's end of the doorbell is the client's
  // alone: a ring costs kvd one fd, its end of the doorbell.
  close(memfd);
  close(bell_end);
  if (!sent) return;
  c.ring = std::make_unique<ipc::RequestRing>(std::move(*ring));
  c.doorbell = std::move(*doorbell);
  doorbells_[c.doorbell.fd()] = c.channel.fd();
  ListenToDoorbell(c, true);
  ++rings_;
}

void NodeServer::ListenToDoorbell(Connection& c, bool listen) {
  if (epoll_fd_ < 0) return;
  const int fd = c.doorbell.fd();
  if (!listen) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kRingTag | static_cast<uint32_t>(fd);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    // The ring is still looked at every turn; only its wake-ups are lost.
    spdlog::warn("kvd: the ring doorbell of pid {}: {}", c.peer.pid,
                 Status::FromErrno("epoll_ctl", errno, "ring doorbell").ToString());
  }
}

void NodeServer::OnDoorbell(int bell_fd) {
  auto bell = doorbells_.find(bell_fd);
  if (bell == doorbells_.end()) return;  // its connection closed in this turn
  auto it = connections_.find(bell->second);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  const bool rang = c.doorbell.Drain();
  if (ServeRing(c) || !rang) return;
  if (++c.empty_bells < kMaxEmptyBells) return;
  // Muted: a client ringing in a loop costs kvd a few wake-ups per request
  // it sends, and itself the latency (its ring waits for kvd's next look).
  ListenToDoorbell(c, false);
  c.bell_muted = true;
  if (!std::exchange(c.bell_muted_before, true)) {
    spdlog::warn("kvd: pid {} rang its ring's doorbell {} times in a row with nothing in its ring: "
                 "not listening to it until its ring holds a request (kvd still looks at the ring "
                 "between other work)", c.peer.pid, c.empty_bells);
  }
}

bool NodeServer::ServeRing(Connection& c) {
  if (c.ring == nullptr || c.refused) return false;
  const int fd = c.channel.fd();
  bool served = false;
  std::vector<std::byte> data;
  std::vector<int> no_fds;
  // A bounded number per turn, as for datagrams: one busy client cannot
  // starve the others.
  for (int i = 0; i < 32; ++i) {
    if (std::find(doomed_.begin(), doomed_.end(), fd) != doomed_.end()) break;
    Result<bool> popped = c.ring->Pop(&data);
    if (!popped.ok()) {
      spdlog::warn("kvd: closing the connection of pid {}: {}", c.peer.pid,
                   popped.status().ToString());
      doomed_.push_back(fd);
      break;
    }
    if (!*popped) break;
    served = true;
    c.empty_bells = 0;
    if (std::exchange(c.bell_muted, false)) ListenToDoorbell(c, true);
    c.serving_ring = true;
    Handle(c, data, &no_fds);
    c.serving_ring = false;
    DeliverNotices();  // as after a datagram: before the client's next request
  }
  return served;
}

bool NodeServer::ServeRings() {
  bool served = false;
  for (auto& [fd, c] : connections_) {
    if (c->ring != nullptr) served = ServeRing(*c) || served;
  }
  return served;
}

bool NodeServer::RingsAsleep() {
  rings_marked_asleep_ = true;
  for (auto& [fd, c] : connections_) {
    if (c->ring != nullptr) c->ring->MarkAsleep();
  }
  // Looked at again after marking: a request pushed before a client could
  // see the mark came with no doorbell.
  return std::any_of(connections_.begin(), connections_.end(),
                     [](const auto& entry) { return entry.second->ring != nullptr &&
                                                    entry.second->ring->HasIncoming(); });
}

void NodeServer::RingsAwake() {
  if (!std::exchange(rings_marked_asleep_, false)) return;
  for (auto& [fd, c] : connections_) {
    if (c->ring != nullptr) c->ring->MarkAwake();
  }
}

bool NodeServer::SendOnRing(Connection& c, const std::vector<std::byte>& bytes, bool* sent) {
  *sent = false;
  if (bytes.size() > ipc::kMaxRingMessageBytes) return true;  // the socket takes it
  Status pushed = c.ring->Push(bytes);
  if (pushed.ok()) {
    c.ring->WakeClient();
    *sent = true;
    return true;
  }
  if (pushed.code() == Code::kResourceExhausted) return true;  // no room now: the socket
  spdlog::warn("kvd: closing the connection of pid {}: {}", c.peer.pid, pushed.ToString());
  doomed_.push_back(c.channel.fd());
  return false;
}

}  // namespace nanokv::kvd
