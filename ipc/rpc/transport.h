// The seam under ipc::Call (call.h): what a request/reply call needs of a
// connection, and nothing more: send one encoded message, receive one with
// its fds before a deadline, end the connection. ipc/uds/channel_transport.h
// is the first implementation (a SOCK_SEQPACKET socket); a shared-memory
// ring is meant to be the second, under the same call.
//
// Contract for every implementation:
//   - a message is whole or absent: never half sent, never half received;
//   - a received fd belongs to the caller from then on (close-on-exec);
//   - nothing is retried or reordered: messages arrive in the peer's order;
//   - errors are Status values, never aborts; EINTR is the transport's to
//     retry, not the caller's.
#ifndef NANOKV_IPC_RPC_TRANSPORT_H_
#define NANOKV_IPC_RPC_TRANSPORT_H_

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::ipc {

class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  // A deadline that never comes: wait until a message arrives or the peer goes.
  static constexpr Clock::time_point kNoDeadline = Clock::time_point::max();
  // A deadline long past (the clock's epoch, not min(): a transport may
  // subtract now from it): one look, and the transport need not read the
  // clock to know it (a spinning caller looks thousands of times).
  static constexpr Clock::time_point kLookOnce{};

  virtual ~Transport() = default;

  // Sends one encoded message with `fds` attached; the caller keeps its fds
  // (the peer gets copies). kInvalidArgument for a message over the
  // transport's size limit, kUnsupported from a transport that cannot carry
  // fds when given some; a peer that is gone is an error too (EPIPE).
  virtual Status Send(std::span<const std::byte> message, std::span<const int> fds) = 0;

  enum class Received {
    kMessage,   // *message holds one whole message; its fds were appended
    kClosed,    // the peer closed the connection: nothing more will come
    kTimedOut,  // nothing arrived by the deadline
  };
  // Waits until `deadline` for one message: *message is resized to it and its
  // fds are appended to *fds. A deadline already past looks once without
  // blocking, which is how a caller spins before it sleeps. A malformed
  // message (over the size limit, its fds truncated) is kProtocolError, with
  // any fds that came with it closed.
  virtual Result<Received> Receive(std::vector<std::byte>* message, std::vector<int>* fds,
                                   Clock::time_point deadline) = 0;

  // Ends the connection from this side; Send and Receive fail afterwards.
  // Idempotent.
  virtual void Close() = 0;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RPC_TRANSPORT_H_
