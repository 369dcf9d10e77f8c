// A connection's request ring as an ipc::Transport (rpc/transport.h), so
// ipc::Call runs over it unchanged: messages without fds go through the
// ring (ipc/ring/request_ring.h), anything else, and whatever does not fit,
// through the socket beside it; a message is looked for on both.
#ifndef NANOKV_IPC_RING_RING_TRANSPORT_H_
#define NANOKV_IPC_RING_RING_TRANSPORT_H_

#include <cstddef>
#include <span>
#include <vector>

#include "ipc/ring/request_ring.h"
#include "ipc/rpc/transport.h"
#include "ipc/uds/channel.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// Borrows the ring, the socket and the doorbell (the write end of the
// ring's own, doorbell.h, written when kvd sleeps); all must remain live
// while this is in use.
class RingTransport final : public Transport {
 public:
  RingTransport(RequestRing& ring, Channel& channel, int doorbell)
      : ring_(ring), channel_(channel), doorbell_(doorbell) {}

  Status Send(std::span<const std::byte> message, std::span<const int> fds) override;
  Result<Received> Receive(std::vector<std::byte>* message, std::vector<int>* fds,
                           Clock::time_point deadline) override;
  void Close() override { channel_.Close(); }

 private:
  // One look at the socket without waiting: kMessage, kClosed, or
  // kTimedOut for nothing there.
  Result<Received> LookAtSocket(std::vector<std::byte>* message, std::vector<int>* fds);

  RequestRing& ring_;
  Channel& channel_;
  int doorbell_;
  unsigned looks_ = 0;  // a spinning caller looks at the socket now and then
  // The socket's receive buffer (a datagram's limit), kept between looks:
  // a fresh one per call was a 64 KiB allocation and fill in every reply's wait.
  std::vector<std::byte> socket_buffer_;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RING_RING_TRANSPORT_H_
