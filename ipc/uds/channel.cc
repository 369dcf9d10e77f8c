#include "ipc/uds/channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ipc/uds/fd_passing.h"

namespace nanokv::ipc {
namespace {

Result<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("socket path '" + path + "' is empty or longer than " +
                                   std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace

Channel& Channel::operator=(Channel&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Channel::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Result<Channel> Channel::Connect(const std::string& path) {
  NANOKV_ASSIGN_OR_RETURN(sockaddr_un addr, Address(path));
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  Channel channel(fd);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int error = errno;
    if (error == ENOENT || error == ECONNREFUSED) {
      return Status(Code::kUnavailable, "nothing listens at " + path + " (is kvd running?)",
                    "connect", strerrorname_np(error));
    }
    return Status::FromErrno("connect", error, path);
  }
  return channel;
}

Result<std::pair<Channel, Channel>> Channel::Pair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return Status::FromErrno("socketpair", errno);
  }
  return std::make_pair(Channel(fds[0]), Channel(fds[1]));
}

Status Channel::SetNonBlocking(bool on) {
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0) return Status::FromErrno("fcntl(F_GETFL)", errno);
  flags = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
  if (fcntl(fd_, F_SETFL, flags) != 0) return Status::FromErrno("fcntl(F_SETFL)", errno);
  return Status::OK();
}

Status Channel::Send(std::span<const std::byte> data, std::span<const int> fds) {
  if (!valid()) return Status::FailedPrecondition("Send on a closed channel");
  if (data.size() > kMaxDatagramBytes) {
    return Status::InvalidArgument("message of " + std::to_string(data.size()) +
                                   " bytes is over the " + std::to_string(kMaxDatagramBytes) +
                                   "-byte datagram limit");
  }
  return SendWithFds(fd_, data, fds);
}

Result<Channel::Received> Channel::Receive(std::vector<std::byte>* data, std::vector<int>* fds) {
  if (!valid()) return Status::FailedPrecondition("Receive on a closed channel");
  // One byte over the limit, so an oversized datagram shows as truncated.
  data->resize(kMaxDatagramBytes + 1);
  const size_t fds_before = fds->size();
  auto n = ReceiveWithFds(fd_, *data, fds);
  if (!n.ok()) {
    data->clear();
    if (n.status().code() == Code::kUnavailable) return Received::kWouldBlock;
    if (n.status().error_name() == "ECONNRESET") return Received::kClosed;
    return n.status();
  }
  if (*n > kMaxDatagramBytes) {
    // The buffer holds one byte more than the limit, so a datagram of exactly
    // kMaxDatagramBytes + 1 arrives whole; it is over the limit all the same.
    data->clear();
    for (size_t i = fds_before; i < fds->size(); ++i) close((*fds)[i]);
    fds->resize(fds_before);
    return Status::ProtocolError("Receive: a datagram of " + std::to_string(*n) +
                                 " bytes or more is over the " +
                                 std::to_string(kMaxDatagramBytes) + "-byte limit");
  }
  data->resize(*n);
  return *n == 0 ? Received::kClosed : Received::kMessage;
}

Result<PeerCredentials> Channel::Peer() const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::FromErrno("getsockopt(SO_PEERCRED)", errno);
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

Listener::Listener(Listener&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

Listener::~Listener() { Close(); }

void Listener::Close() {
  if (fd_ < 0) return;
  close(fd_);
  fd_ = -1;
  unlink(path_.c_str());
}

Result<Listener> Listener::Bind(const std::string& path, mode_t mode, std::optional<gid_t> gid) {
  NANOKV_RETURN_IF_ERROR(Address(path).status());  // the path must fit sun_path
  // A socket file left by a dead kvd is replaced; a live one is not stolen.
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Status::FailedPrecondition(path + " exists and is not a socket");
    }
    auto probe = Channel::Connect(path);
    if (probe.ok()) {
      return Status::FailedPrecondition("another kvd is listening at " + path);
    }
    unlink(path.c_str());
  }
  // Bound, moded and listening under a private name first, then renamed into
  // place: whoever sees the path can connect (no window between bind and
  // listen where a client would be refused), and never with the wrong mode.
  std::string staging = path + ".new" + std::to_string(getpid());
  NANOKV_ASSIGN_OR_RETURN(sockaddr_un staging_addr, Address(staging));
  unlink(staging.c_str());
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  Listener listener;
  listener.fd_ = fd;
  if (bind(fd, reinterpret_cast<sockaddr*>(&staging_addr), sizeof(staging_addr)) != 0) {
    return Status::FromErrno("bind", errno, staging);
  }
  listener.path_ = staging;  // removed by Close() if a step below fails
  if (chmod(staging.c_str(), mode) != 0) return Status::FromErrno("chmod", errno, staging);
  if (gid && chown(staging.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    return Status::FromErrno("chown", errno, staging);
  }
  if (listen(fd, 128) != 0) return Status::FromErrno("listen", errno, staging);
  if (rename(staging.c_str(), path.c_str()) != 0) {
    return Status::FromErrno("rename", errno, staging + " -> " + path);
  }
  listener.path_ = path;
  return listener;
}

Result<std::optional<Channel>> Listener::Accept() {
  int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return std::optional<Channel>();
    return Status::FromErrno("accept4", errno);
  }
  return std::optional<Channel>(Channel(fd));
}

}  // namespace nanokv::ipc
