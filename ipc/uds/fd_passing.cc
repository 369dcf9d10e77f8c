#include "ipc/uds/fd_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace nanokv::ipc {
namespace {

constexpr size_t kControlBytes = CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage);

}  // namespace

Status SendWithFds(int socket, std::span<const std::byte> data, std::span<const int> fds) {
  if (data.empty()) return Status::InvalidArgument("SendWithFds: fds need at least one data byte");
  if (fds.size() > kMaxFdsPerMessage) {
    return Status::InvalidArgument("SendWithFds: " + std::to_string(fds.size()) +
                                   " fds in one message (at most " +
                                   std::to_string(kMaxFdsPerMessage) + ")");
  }
  alignas(struct cmsghdr) char control[kControlBytes];
  size_t sent = 0;
  while (sent < data.size()) {
    iovec iov{const_cast<std::byte*>(data.data() + sent), data.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {  // the fds ride with the first byte only
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("sendmsg", errno);
    }
    sent += static_cast<size_t>(n);
  }
  return Status::OK();
}

Result<size_t> ReceiveWithFds(int socket, std::span<std::byte> data, std::vector<int>* fds,
                              size_t max_fds) {
  alignas(struct cmsghdr) char control[kControlBytes];
  iovec iov{data.data(), data.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::FromErrno("recvmsg", errno);

  size_t first_new = fds->size();
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  const char* fault = nullptr;
  if ((msg.msg_flags & MSG_CTRUNC) != 0) fault = "the kernel truncated the passed fds";
  if ((msg.msg_flags & MSG_TRUNC) != 0) fault = "the datagram was larger than the buffer";
  if (fds->size() - first_new > max_fds) fault = "more fds than allowed";
  if (fault != nullptr) {
    for (size_t i = first_new; i < fds->size(); ++i) close((*fds)[i]);
    fds->resize(first_new);
    return Status::ProtocolError(std::string("ReceiveWithFds: ") + fault);
  }
  return static_cast<size_t>(n);
}

}  // namespace nanokv::ipc
