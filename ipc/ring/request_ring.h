// A pair of shared-memory rings between one client connection and kvd:
// requests that carry no fd travel here instead of the
// socket, at the cost of memory writes and, only when the other side
// sleeps, one wake-up. The socket stays for fds, liveness and notices.
//
// kvd makes the memory (a sealed memfd: its size can never change, so no
// truncation can fault kvd) and hands it to the client over the socket
// with the write end of its own doorbell (doorbell.h). Layout: a 4 KiB header, then the to-kvd ring's cells,
// then the to-client ring's. Each ring is single-producer single-consumer,
// 1024 cells of 64 bytes (one cache line):
//   a cell    {stamp, length, 56 bytes of the message}; a message takes
//             ceil(length / 56) cells in a row (wrapping at the end);
//   stamp     the cell's position ever (its index counting every cell
//             written before it) + 1, as 32 bits: which lap wrote the cell;
//   length    the message's bytes in its first cell, 0 in the others;
//   head      cells ever read (the consumer's, in the header).
// The producer writes a message's other cells, then its first cell's stamp
// last; the consumer polls the stamp of the cell it reads next. So a small
// message and its "it is there" travel in one cache line, where an index
// beside the bytes took two (one more line handed over each way: on an
// H200 host a ping-pong of 0.69 µs, 0.45 with cells; BENCHMARKS.md
// 2026-11-26 fourth session). Every cell is written every lap, so a cell
// holds this lap's stamp, the last lap's, or (never written, first lap
// only) 0: anything else is a scribble.
// Each side keeps its own index privately and only publishes it; the peer's
// cells and index are read, range-checked and never trusted: a client that
// scribbles over its ring makes kvd close that connection, nothing more.
//
// Waking: a consumer about to sleep sets its ring's `sleeping` word, then
// looks once more (the producer stores the stamp, then loads `sleeping`,
// both sequentially consistent: one of the two sees the other). kvd sleeps
// in epoll: a client that finds it sleeping rings its doorbell. A client
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
inline constexpr uint32_t kRingVersion = 2;                      // 2: cells
inline constexpr size_t kRingHeaderBytes = 4096;
inline constexpr size_t kRingCellBytes = 64;
inline constexpr size_t kRingCellDataBytes = 56;
inline constexpr size_t kRingCells = 1024;                                // each direction
inline constexpr size_t kRingDataBytes = kRingCells * kRingCellBytes;    // 64 KiB
// Larger messages take the socket (an object list, an adopt): the ring is
// for the small requests of the hot path, and stays small per connection.
inline constexpr size_t kMaxRingMessageBytes = 16 * 1024;
inline constexpr size_t kRingFileBytes = kRingHeaderBytes + 2 * kRingDataBytes;

struct RingCell {
  uint32_t stamp;
  uint32_t length;
  std::byte data[kRingCellDataBytes];
};
static_assert(sizeof(RingCell) == kRingCellBytes);

struct RingIndex {
  alignas(64) uint64_t head;  // cells ever read: the consumer's
  alignas(64) uint32_t seq;   // bumped per message; the consumer's futex word
  uint32_t sleeping;          // the consumer sleeps (or is about to)
};

struct RingHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t data_bytes;
  RingIndex to_kvd;
  RingIndex to_client;
};
static_assert(sizeof(RingHeader) <= kRingHeaderBytes);

// The stamp of the cell at position `at` ever (its index counting every
// cell written before it, + 1, as 32 bits), and whether a cell at `at`
// holding `stamp` has nothing new for its reader: the last lap's stamp, or
// 0 in the first lap (never written). 0 is the lap's own stamp once every
// 2^32 cells, so it means "nothing" only in the first lap.
uint32_t RingStampAt(uint64_t at);
bool RingCellHoldsNothing(uint64_t at, uint32_t stamp);

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
  // impossible (a scribbled ring; read only when this side's copy of it
  // says the ring is full).
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
  RingCell* OutCells() const;
  RingCell* InCells() const;

  void* base_ = nullptr;
  Side side_ = Side::kKvd;
  uint64_t out_cell_ = 0;       // cells this side wrote: private, never read back
  uint64_t out_head_seen_ = 0;  // the reader's head as last read (never ahead of it)
  uint64_t in_cell_ = 0;        // cells this side read
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_RING_REQUEST_RING_H_
