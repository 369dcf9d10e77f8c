#include "ipc/uds/channel_transport.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>

namespace nanokv::ipc {
namespace {

// poll's timeout for `deadline`: -1 for none, else the milliseconds left,
// rounded up so a wait never wakes just short of the deadline and spins.
int PollTimeoutMs(Transport::Clock::time_point deadline) {
  if (deadline == Transport::kNoDeadline) return -1;
  auto left = deadline - Transport::Clock::now();
  if (left <= Transport::Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

}  // namespace

Status ChannelTransport::Send(std::span<const std::byte> message, std::span<const int> fds) {
  return channel_.Send(message, fds);
}

Result<Transport::Received> ChannelTransport::Receive(std::vector<std::byte>* message,
                                                      std::vector<int>* fds,
                                                      Clock::time_point deadline) {
  if (!channel_.valid()) return Status::FailedPrecondition("Receive on a closed channel");
  for (;;) {
    pollfd ready{channel_.fd(), POLLIN, 0};
    int n = poll(&ready, 1, PollTimeoutMs(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;  // the deadline still holds: recomputed above
      return Status::FromErrno("poll", errno, "waiting for a datagram");
    }
    if (n == 0) return Received::kTimedOut;
    NANOKV_ASSIGN_OR_RETURN(Channel::Received received, channel_.Receive(message, fds));
    switch (received) {
      case Channel::Received::kMessage:
        return Received::kMessage;
      case Channel::Received::kClosed:
        return Received::kClosed;
      case Channel::Received::kWouldBlock:
        break;  // another reader took it, or a spurious wake-up: wait again
    }
  }
}

}  // namespace nanokv::ipc
