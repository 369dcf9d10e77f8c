#include "ipc/ring/doorbell.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <utility>

namespace nanokv::ipc {

Result<Doorbell> Doorbell::Create(int* client_end) {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0) {
    return Status::FromErrno("socketpair", errno, "ring doorbell");
  }
  // An honest client has one bell in flight at most; the kernel raises this
  // to its floor. (A client may raise it again: its own buffer.)
  const int small = 4096;
  (void)setsockopt(ends[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  *client_end = ends[1];
  return Doorbell(ends[0]);
}

Doorbell::Doorbell(Doorbell&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Doorbell& Doorbell::operator=(Doorbell&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

Doorbell::~Doorbell() {
  if (fd_ >= 0) close(fd_);
}

bool Doorbell::Drain() {
  if (fd_ < 0) return false;
  // One recvmmsg for the batch; contents are not looked at (truncated into
  // 8 bytes each), and no control buffer: SCM_RIGHTS fds are closed by the
  // kernel, never installed in kvd.
  std::array<uint64_t, kDoorbellDrainBatch> bells{};
  std::array<iovec, kDoorbellDrainBatch> iov{};
  std::array<mmsghdr, kDoorbellDrainBatch> headers{};
  for (size_t i = 0; i < kDoorbellDrainBatch; ++i) {
    iov[i] = {&bells[i], sizeof(bells[i])};
    headers[i].msg_hdr.msg_iov = &iov[i];
    headers[i].msg_hdr.msg_iovlen = 1;
  }
  for (;;) {
    const int got = recvmmsg(fd_, headers.data(), kDoorbellDrainBatch, MSG_DONTWAIT, nullptr);
    if (got < 0 && errno == EINTR) continue;
    return got > 0;
  }
}

}  // namespace nanokv::ipc
