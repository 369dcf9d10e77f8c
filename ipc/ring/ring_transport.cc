#include "ipc/ring/ring_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "ipc/uds/channel_transport.h"

namespace nanokv::ipc {
namespace {

// How long one sleep on the ring lasts at most: the socket (kvd gone, a
// notice) is looked at between sleeps.
constexpr auto kSleepSlice = std::chrono::milliseconds(1);
// A spinning caller looks at the socket (a reply too large for the ring)
// once in this many looks: a recvmsg costs as much as a whole ring request.
constexpr unsigned kLooksPerSocketLook = 256;

}  // namespace

Status RingTransport::Send(std::span<const std::byte> message, std::span<const int> fds) {
  if (!channel_.valid()) return Status::FailedPrecondition("Send on a closed connection");
  if (fds.empty() && message.size() <= kMaxRingMessageBytes) {
    Status pushed = ring_.Push(message);
    if (pushed.ok()) {
      if (ring_.PeerAsleep()) {
        const uint64_t one = 1;
        ssize_t wrote = write(doorbell_, &one, sizeof(one));  // EAGAIN: rung already
        (void)wrote;
      }
      return Status::OK();
    }
    if (pushed.code() != Code::kResourceExhausted) return pushed;
  }
  return channel_.Send(message, fds);
}

Result<Transport::Received> RingTransport::LookAtSocket(std::vector<std::byte>* message,
                                                        std::vector<int>* fds) {
  ChannelTransport socket(channel_);
  // A deadline already past: one look.
  NANOKV_ASSIGN_OR_RETURN(Received received, socket.Receive(&socket_buffer_, fds, Clock::now()));
  if (received == Received::kMessage) message->assign(socket_buffer_.begin(), socket_buffer_.end());
  return received;
}

Result<Transport::Received> RingTransport::Receive(std::vector<std::byte>* message,
                                                   std::vector<int>* fds,
                                                   Clock::time_point deadline) {
  if (!channel_.valid()) return Status::FailedPrecondition("Receive on a closed connection");
  for (;;) {
    NANOKV_ASSIGN_OR_RETURN(bool popped, ring_.Pop(message));
    if (popped) return Received::kMessage;
    const bool look_once =
        deadline == kLookOnce || (deadline != kNoDeadline && deadline <= Clock::now());
    if (!look_once || ++looks_ % kLooksPerSocketLook == 0) {
      NANOKV_ASSIGN_OR_RETURN(Received on_socket, LookAtSocket(message, fds));
      if (on_socket != Received::kTimedOut) return on_socket;
    }
    if (look_once) return Received::kTimedOut;
    auto left = deadline == kNoDeadline ? Clock::duration(kSleepSlice) : deadline - Clock::now();
    if (left <= Clock::duration::zero()) return Received::kTimedOut;
    ring_.WaitIncoming(std::chrono::duration_cast<std::chrono::microseconds>(
        std::min<Clock::duration>(left, kSleepSlice)) + std::chrono::microseconds(1));
  }
}

}  // namespace nanokv::ipc
