// A pair of shared-memory rings between one client connection and kvd
// (issue 15 item 2): requests that carry no fd travel here instead of the
// socket, at the cost of memory writes and, only when the other side
// sleeps, one wake-up. The socket stays for fds, liveness and notices.
//
// kvd makes the memory (a sealed memfd: its size can never change, so no
// truncation can fault kvd) and hands it to the client over the socket
// with an eventfd. Layout: a 4 KiB header, then the to-kvd ring's bytes,
// then the to-client ring's. Each ring is single-producer single-consumer:
//   tail  bytes ever written (the producer's), head  bytes ever read (the
//   consumer's); an entry is a 4-byte length and the message, padded to 8
//   bytes, and may wrap around the end.
// Each side keeps its own index privately and only publishes it; the peer's
// index is read, range-checked and never trusted: a client that scribbles
// over its ring makes kvd close that connection, nothing more.
//
// Waking: a consumer about to sleep sets its ring's `sleeping` word, then
// looks once more (the producer stores tail, then loads `sleeping`, both
// sequentially consistent: one of the two sees the other). kvd sleeps in
// epoll: a client that finds it sleeping writes the eventfd. A client
// sleeps on a futex on its reply ring's `seq`, which kvd bumps per reply.
#ifndef NANOKV_IPC_RING_REQUEST_RING_H_
#define NANOKV_IPC_RING_REQUEST_RING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::ipc {

inline constexpr uint64_t kRingMagic = 0x31474E49524B564EULL;  // "NVKRING1"
inline constexpr uint32_t kRingVersion = 1;
inline constexpr size_t kRingHeaderBytes = 4096;
inline constexpr size_t kRingDataBytes = 64 * 1024;  // each direction
// Larger messages take the socket (an object list, an adopt): the ring is
// for the small requests of the hot path, and stays small per connection.
inline constexpr size_t kMaxRingMessageBytes = 16 * 1024;
inline constexpr size_t kRingFileBytes = kRingHeaderBytes + 2 * kRingDataBytes;

struct RingIndex {
  alignas(64) uint64_t tail;
  alignas(64) uint64_t head;
  alignas(64) uint32_t seq;  // bumped per message; the consumer's futex word
  uint32_t sleeping;         // the consumer sleeps (or is about to)
};

struct RingHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t data_bytes;
  RingIndex to_kvd;
  RingIndex to_client;
};
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);

class RequestRing {
 public:
  enum class Side { kKvd, kClient };

  // kvd: a fresh ring pair in a sealed memfd, mapped; *fd gets the memfd
  // (the caller sends it, then closes it).
  static Result<RequestRing> Create(int* fd);
  // The client: maps a memfd kvd sent. kProtocolError when its size,
  // seals, magic or version are not a ring's.
  static Result<RequestRing> Attach(int fd);

  RequestRing() = default;
  RequestRing(RequestRing&& other) noexcept;
  RequestRing& operator=(RequestRing&& other) noexcept;
  RequestRing(const RequestRing&) = delete;
  RequestRing& operator=(const RequestRing&) = delete;
  ~RequestRing();

  bool valid() const { return base_ != nullptr; }
  Side side() const { return side_; }

  // Appends one message to this side's outgoing ring. kResourceExhausted
  // when it does not fit now (the caller takes the socket), kInvalidArgument
  // over kMaxRingMessageBytes, kProtocolError when the peer's index is
  // impossible (a scribbled ring).
  Status Push(std::span<const std::byte> message);
  // Takes the next incoming message into *message: true, or false when
  // there is none. kProtocolError for a corrupt ring (kvd then closes the
  // connection); nothing is read past the ring's bytes either way.
  Result<bool> Pop(std::vector<std::byte>* message);
  // Whether an incoming message is waiting (an impossible index counts as
  // one, so that Pop reports it).
  bool HasIncoming() const;

  // The consumer's sleep protocol for the incoming ring: mark asleep, look
  // again (HasIncoming), then sleep; Awake clears the mark.
  void MarkAsleep();
  void MarkAwake();
  // Whether the peer marked itself asleep on the ring this side feeds.
  bool PeerAsleep() const;
  // kvd: bumps the client's futex word and wakes it when it sleeps.
  void WakeClient();
  // The client: sleeps on its reply ring's futex until a message may be
  // there or `timeout` passes. Spurious returns are allowed.
  void WaitIncoming(std::chrono::microseconds timeout);

 private:
  RequestRing(void* base, Side side);
  RingIndex& Out() const;
  RingIndex& In() const;
  std::byte* OutData() const;
  std::byte* InData() const;

  void* base_ = nullptr;
  Side side_ = Side::kKvd;
  uint64_t out_tail_ = 0;  // private copies of this side's own indices
  uint64_t out_head_seen_ = 0;  // the reader's index as last read (never ahead of it)
  uint64_t in_head_ = 0;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RING_REQUEST_RING_H_
