// NodeServer's admission of connections: who may connect, how many, and what
// kvd does when it runs out of file descriptors. Every limit here is kvd's
// own; nothing a client says changes it.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include <spdlog/spdlog.h>

#include "daemon/server/kvd_metrics.h"
#include "daemon/server/node_server.h"
#include "ipc/uds/fd_passing.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {
namespace {

// How long a refused peer has to read its refusal before kvd closes the
// connection anyway, and how many refused connections may wait at once: a
// peer that connects in a loop and never reads must not hold kvd's fds.
constexpr auto kRefusalGrace = std::chrono::seconds(2);
constexpr size_t kMaxPendingRefusals = 128;

// How long kvd stops accepting when it has no fd even to turn a peer away.
constexpr auto kAcceptPause = std::chrono::milliseconds(20);

// The refusal of a connection kvd closes at once because it is out of fds:
// sent before the close, so the engine reads why (ipc::Call looks for it when
// its send or receive finds the connection gone), not just a reset.
void TellOutOfFds(int fd) {
  rlimit limit{};
  const std::string soft =
      getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::to_string(limit.rlim_cur) : std::string("?");
  const Status why = Status::ResourceExhausted(
      "kvd is out of file descriptors (its open-file limit, RLIMIT_NOFILE, is " + soft +
      "): it closed this connection at once; raise kvd's limit (LimitNOFILE= in its systemd "
      "unit; kvd --check-limits says how far) or lower max_connections in kvd's config");
  (void)ipc::SendWithFds(fd, wire::Encode(wire::ErrorReply(0, why)), {});
  // Read what the peer sent already (its attach): closing a socket with
  // unread data resets the peer's end, which may then miss the refusal.
  std::byte drain[512];
  for (int i = 0; i < 4 && recv(fd, drain, sizeof(drain), MSG_DONTWAIT) > 0; ++i) {
  }
}

int PidfdOpen(pid_t pid) {
  if (pid <= 0) return -1;
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

Result<std::string> NodeServer::GroupFor(const ipc::PeerCredentials& peer,
                                         const std::string& asked) const {
  // A group is never just what an engine says: if it were, any uid could
  // name another's group and read and overwrite its pages.
  if (asked.empty()) return UidGroup(peer.uid);
  if (peer.uid == 0 || peer.uid == geteuid()) return asked;  // operators join any group
  if (asked == UidGroup(peer.uid)) return asked;
  auto group = options_.groups.find(asked);
  if (group != options_.groups.end()) {
    const GroupAccess& access = group->second;
    if (std::find(access.uids.begin(), access.uids.end(), peer.uid) != access.uids.end() ||
        std::find(access.gids.begin(), access.gids.end(), peer.gid) != access.gids.end()) {
      return asked;
    }
    return Status::PermissionDenied("uid " + std::to_string(peer.uid) + " (gid " + std::to_string(peer.gid) +
                                    ") may not join group '" + asked + "': kvd's config (groups." + asked +
                                    ".uids or groups." + asked + ".gids) does not list it");
  }
  return Status::PermissionDenied("uid " + std::to_string(peer.uid) + " may not join group '" + asked +
                                  "': it is not in kvd's config (groups); an engine that names no group "
                                  "gets its own ('" + UidGroup(peer.uid) + "')");
}

bool NodeServer::PeerAllowed(const ipc::PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == geteuid()) return true;
  if (std::find(options_.allowed_uids.begin(), options_.allowed_uids.end(), peer.uid) !=
      options_.allowed_uids.end()) {
    return true;
  }
  return std::find(options_.allowed_gids.begin(), options_.allowed_gids.end(), peer.gid) !=
         options_.allowed_gids.end();
}

Status NodeServer::Admit(const ipc::PeerCredentials& peer) const {
  if (!PeerAllowed(peer)) {
    // Numbers only: a user-name lookup (NSS, maybe LDAP) would stall the loop.
    return Status::PermissionDenied(
        "uid " + std::to_string(peer.uid) + " (gid " + std::to_string(peer.gid) +
        ") may not connect to this kvd (uid " + std::to_string(geteuid()) +
        "): kvd's config allows root, its own uid and those in allowed_uids or allowed_gids");
  }
  size_t admitted = connections_.size() - refused_open_;
  if (admitted >= options_.max_connections) {
    return Status::ResourceExhausted("kvd serves " + std::to_string(admitted) +
                                     " connections, its most (max_connections in kvd's config, "
                                     "or what its open-file limit leaves: see kvd's log)");
  }
  auto it = per_process_.find(peer.pid);
  if (it != per_process_.end() && it->second >= options_.max_connections_per_process) {
    return Status::ResourceExhausted(
        "pid " + std::to_string(peer.pid) + " has " + std::to_string(it->second) +
        " connections to kvd, its most (max_connections_per_process in kvd's config)");
  }
  return Status::OK();
}

void NodeServer::Accept() {
  // Bounded per turn, so a connect storm cannot starve the engines' requests.
  for (int i = 0; i < 64; ++i) {
    auto accepted = listener_.Accept();
    if (!accepted.ok()) {
      auto room = AcceptOutOfFds();
      if (!room.has_value()) {
        if (accepting_paused_) return;
        continue;  // one was shed; the next may find room
      }
      accepted = std::optional<ipc::Channel>(std::move(*room));
    }
    if (!accepted->has_value()) return;
    auto c = std::make_unique<Connection>();
    c->channel = std::move(**accepted);
    c->serial = next_serial_++;
    auto peer = c->channel.Peer();
    if (!peer.ok()) {
      spdlog::warn("kvd: refusing a peer with no credentials: {}", peer.status().ToString());
      continue;
    }
    c->peer = *peer;
    int fd = c->channel.fd();
    Status admitted = Admit(c->peer);
    if (!admitted.ok()) {
      Refuse(std::move(c), admitted);
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = kSocketTag | static_cast<uint32_t>(fd);
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      spdlog::warn("kvd: epoll_ctl: {}", Status::FromErrno("epoll_ctl", errno).ToString());
      continue;
    }
    c->pidfd = PidfdOpen(c->peer.pid);
    if (c->pidfd >= 0) {
      ev.events = EPOLLIN;
      ev.data.u64 = kPidTag | static_cast<uint32_t>(c->pidfd);
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->pidfd, &ev) == 0) {
        pidfds_[c->pidfd] = fd;
      } else {
        close(c->pidfd);
        c->pidfd = -1;
      }
    }
    ++per_process_[c->peer.pid];
    if (metrics_ != nullptr) metrics_->ConnectionAccepted();
    spdlog::debug("kvd: connection from pid {} uid {}", c->peer.pid, c->peer.uid);
    connections_[fd] = std::move(c);
  }
}

void NodeServer::Refuse(std::unique_ptr<Connection> c, const Status& why) {
  spdlog::warn("kvd: refusing a connection of pid {} uid {}: {}", c->peer.pid, c->peer.uid,
               why.ToString());
  // The refusal goes out now; the socket stays open until the peer sends or
  // hangs up (OnReadable drains it, then closes), so the peer's first send
  // does not fail before it could read why. Closing with unread data would
  // reset the peer's end.
  if (metrics_ != nullptr) metrics_->ConnectionRefused(why.code());
  SendError(*c, 0, why);
  c->refused = true;
  c->refusal = why;
  int fd = c->channel.fd();
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = kSocketTag | static_cast<uint32_t>(fd);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return;  // closed with c
  refusals_.push_back({std::chrono::steady_clock::now() + kRefusalGrace, fd, c->serial});
  connections_[fd] = std::move(c);
  ++refused_open_;
  if (refused_open_ > kMaxPendingRefusals) CloseExpiredRefusals(/*all_over_cap=*/true);
}

void NodeServer::CloseExpiredRefusals(bool all_over_cap) {
  auto now = std::chrono::steady_clock::now();
  while (!refusals_.empty()) {
    const Refusal r = refusals_.front();
    bool over_cap = all_over_cap && refused_open_ > kMaxPendingRefusals;
    if (!over_cap && r.deadline > now) return;
    refusals_.pop_front();
    auto it = connections_.find(r.fd);
    // Gone already (the peer read and hung up), or the fd is a newer connection's.
    if (it == connections_.end() || it->second->serial != r.serial) continue;
    std::erase(doomed_, r.fd);
    CloseConnection(r.fd, "refused");
  }
}

bool NodeServer::RefillSpares() {
  bool all = true;
  for (int& spare : spare_fds_) {
    if (spare < 0) spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
    all = all && spare >= 0;
  }
  return all;
}

std::optional<ipc::Channel> NodeServer::AcceptOutOfFds() {
  // Spares lost at an earlier shed (another thread took the fd meanwhile)
  // that come back now mean the limit rose or fds were freed: the accept
  // that failed may be tried again as usual.
  bool had_all = std::all_of(spare_fds_.begin(), spare_fds_.end(), [](int fd) { return fd >= 0; });
  if (!had_all && RefillSpares()) {
    auto again = listener_.Accept();
    if (again.ok() && again->has_value()) return std::move(**again);
    if (again.ok()) return std::nullopt;  // nobody waits any more
  }
  // Level-triggered epoll keeps reporting a listener with a queued connection
  // kvd cannot accept: without this the loop spins and the peer waits
  // forever in the backlog. The spare fds make room for one accept.
  for (int& spare : spare_fds_) {
    if (spare >= 0) close(spare);
    spare = -1;
  }
  int fd = accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    const int error = errno;  // before RefillSpares' opens overwrite it
    (void)RefillSpares();
    if (error == EAGAIN || error == EINTR || error == ECONNABORTED) return std::nullopt;
    // Not even a spare's room (other threads hold it): stop listening for
    // a moment rather than spin on a listener that stays readable.
    PauseAccepting();
    return std::nullopt;
  }
  // Room for this connection and every spare again: the limit rose (an
  // operator's prlimit) since the failed accept, so it is served.
  if (RefillSpares()) return ipc::Channel(fd);
  // No room: the spares are free again while the peer is told (what that
  // opens, e.g. a sanitizer runtime's pipe, needs them), then taken back.
  for (int& spare : spare_fds_) {
    if (spare >= 0) close(spare);
    spare = -1;
  }
  TellOutOfFds(fd);
  close(fd);
  (void)RefillSpares();
  ++shed_connections_;
  // Once per 1000, so a storm does not flood the log.
  if (shed_connections_ % 1000 == 1) {
    spdlog::error("kvd: out of file descriptors: closed a new connection at once ({} so far); "
                  "raise kvd's open-file limit (LimitNOFILE) or lower max_connections",
                  shed_connections_);
  }
  return std::nullopt;
}

void NodeServer::PauseAccepting() {
  epoll_event ev{};
  ev.events = 0;
  ev.data.u64 = kListenerTag | static_cast<uint32_t>(listener_.fd());
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listener_.fd(), &ev) != 0) return;
  // Once per 1000, as for sheds: a pause is retried every kAcceptPause.
  if (accept_pauses_++ % 1000 == 0) {
    spdlog::error(
        "kvd: out of file descriptors, with none spare to turn a connection away: "
        "not accepting for {} ms at a time ({} so far); raise kvd's open-file limit "
        "(LimitNOFILE)",
        kAcceptPause.count(), accept_pauses_);
  }
  accepting_paused_ = true;
  accepting_resumes_ = std::chrono::steady_clock::now() + kAcceptPause;
}

int NodeServer::ResumeAcceptingIfDue(int timeout_ms) {
  if (!accepting_paused_) return timeout_ms;
  auto now = std::chrono::steady_clock::now();
  if (now < accepting_resumes_) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(accepting_resumes_ - now).count();
    return std::min(timeout_ms, static_cast<int>(left));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag | static_cast<uint32_t>(listener_.fd());
  if (listener_.fd() >= 0 && epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listener_.fd(), &ev) != 0) {
    spdlog::warn("kvd: epoll_ctl: {}", Status::FromErrno("epoll_ctl", errno, "listener").ToString());
  }
  accepting_paused_ = false;
  return timeout_ms;
}

}  // namespace nanokv::kvd
