// A request ring's doorbell: what a client rings when it finds kvd asleep
// (request_ring.h, "Waking"). Each ring has one of its own, a connected
// pair of datagram sockets: kvd keeps one end, the client gets the other.
// So kvd reads nothing a client holds: a client cannot read (steal) kvd's
// wake-ups, kvd reads with MSG_DONTWAIT (no flag of any file decides
// whether it blocks), a client writing after kvd closed its end gets an
// error, never SIGPIPE (as from a pipe), and what its end holds queued is
// bounded by its own send buffer. A client can only hurt itself: a full
// queue drops its own bells.
#ifndef NANOKV_IPC_RING_DOORBELL_H_
#define NANOKV_IPC_RING_DOORBELL_H_

#include <cstddef>

#include "nanokv/status.h"

namespace nanokv::ipc {

// Datagrams one Drain takes at most: a client ringing in a loop cannot keep
// kvd there; what is left wakes kvd again.
inline constexpr size_t kDoorbellDrainBatch = 64;

class Doorbell {
 public:
  // A new doorbell; `*client_end` gets the client's end (non-blocking, a
  // small send buffer), which the caller sends to the client and closes.
  // kResourceExhausted when out of fds. A client rings by writing any
  // datagram (libkv writes 8 bytes: the same write rings an eventfd).
  static Result<Doorbell> Create(int* client_end);

  Doorbell() = default;
  Doorbell(Doorbell&& other) noexcept;
  Doorbell& operator=(Doorbell&& other) noexcept;
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  ~Doorbell();

  bool valid() const { return fd_ >= 0; }
  // kvd's end, for epoll: readable when rung.
  int fd() const { return fd_; }

  // Takes up to kDoorbellDrainBatch bells; never blocks. True if any came
  // (of any length, empty ones included; fds a client sent along are closed
  // unread).
  bool Drain();

 private:
  explicit Doorbell(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RING_DOORBELL_H_
