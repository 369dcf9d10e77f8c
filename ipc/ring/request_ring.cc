#include "ipc/ring/request_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace nanokv::ipc {
namespace {

constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

template <typename T>
std::atomic_ref<T> Atomic(T& word) {
  return std::atomic_ref<T>(word);
}

uint64_t CellsFor(uint64_t bytes) { return (bytes + kRingCellDataBytes - 1) / kRingCellDataBytes; }

long Futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

Result<void*> MapRing(int fd) {
  void* base = mmap(nullptr, kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::FromErrno("mmap", errno, "request ring");
  return base;
}

}  // namespace

uint32_t RingStampAt(uint64_t at) { return static_cast<uint32_t>(at + 1); }

bool RingCellHoldsNothing(uint64_t at, uint32_t stamp) {
  const auto last_lap = static_cast<uint32_t>(at + 1 - kRingCells);
  // Neither is ever the cell's own stamp: the last lap's differs from it by
  // kRingCells, and 0 is its own only past the first lap.
  return stamp == last_lap || (stamp == 0 && at < kRingCells);
}

Result<RequestRing> RequestRing::Create(int* fd) {
  int memfd = memfd_create("nanokv-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return Status::FromErrno("memfd_create", errno, "request ring");
  auto fail = [memfd](const char* call) {
    Status s = Status::FromErrno(call, errno, "request ring");
    close(memfd);
    return s;
  };
  if (ftruncate(memfd, kRingFileBytes) != 0) return fail("ftruncate");
  if (fcntl(memfd, F_ADD_SEALS, kSeals) != 0) return fail("fcntl(F_ADD_SEALS)");
  auto base = MapRing(memfd);
  if (!base.ok()) {
    close(memfd);
    return base.status();
  }
  auto* header = static_cast<RingHeader*>(*base);
  header->magic = kRingMagic;
  header->version = kRingVersion;
  header->data_bytes = kRingDataBytes;
  *fd = memfd;
  return RequestRing(*base, Side::kKvd);
}

Result<RequestRing> RequestRing::Attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::FromErrno("fstat", errno, "request ring");
  if (static_cast<uint64_t>(st.st_size) != kRingFileBytes) {
    return Status::ProtocolError("request ring: " + std::to_string(st.st_size) + " bytes, not " +
                                 std::to_string(kRingFileBytes));
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
                       (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return Status::ProtocolError("request ring: its size is not sealed");
  }
  NANOKV_ASSIGN_OR_RETURN(void* base, MapRing(fd));
  const auto* header = static_cast<const RingHeader*>(base);
  if (header->magic != kRingMagic || header->version != kRingVersion ||
      header->data_bytes != kRingDataBytes) {
    munmap(base, kRingFileBytes);
    return Status::ProtocolError("request ring: not a version " + std::to_string(kRingVersion) +
                                 " ring");
  }
  return RequestRing(base, Side::kClient);
}

RequestRing::RequestRing(void* base, Side side) : base_(base), side_(side) {}

RequestRing::RequestRing(RequestRing&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      side_(other.side_),
      out_cell_(other.out_cell_),
      out_head_seen_(other.out_head_seen_),
      in_cell_(other.in_cell_) {}

RequestRing& RequestRing::operator=(RequestRing&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, kRingFileBytes);
    base_ = std::exchange(other.base_, nullptr);
    side_ = other.side_;
    out_cell_ = other.out_cell_;
    out_head_seen_ = other.out_head_seen_;
    in_cell_ = other.in_cell_;
  }
  return *this;
}

RequestRing::~RequestRing() {
  if (base_ != nullptr) munmap(base_, kRingFileBytes);
}

RingIndex& RequestRing::Out() const {
  auto* header = static_cast<RingHeader*>(base_);
  return side_ == Side::kKvd ? header->to_client : header->to_kvd;
}

RingIndex& RequestRing::In() const {
  auto* header = static_cast<RingHeader*>(base_);
  return side_ == Side::kKvd ? header->to_kvd : header->to_client;
}

RingCell* RequestRing::OutCells() const {
  auto* cells = reinterpret_cast<RingCell*>(static_cast<std::byte*>(base_) + kRingHeaderBytes);
  return side_ == Side::kKvd ? cells + kRingCells : cells;
}

RingCell* RequestRing::InCells() const {
  auto* cells = reinterpret_cast<RingCell*>(static_cast<std::byte*>(base_) + kRingHeaderBytes);
  return side_ == Side::kKvd ? cells : cells + kRingCells;
}

Status RequestRing::Push(std::span<const std::byte> message) {
  if (message.empty() || message.size() > kMaxRingMessageBytes) {
    return Status::InvalidArgument("request ring: a message of " + std::to_string(message.size()) +
                                   " bytes (1 to " + std::to_string(kMaxRingMessageBytes) + ")");
  }
  const uint64_t need = CellsFor(message.size());
  // The reader's head is read only when the copy of it this side keeps says
  // there is no room: reading it each time would pull its cache line over
  // from the reader for every message.
  if (need > kRingCells - (out_cell_ - out_head_seen_)) {
    const uint64_t head = Atomic(Out().head).load(std::memory_order_acquire);
    if (head - out_head_seen_ > out_cell_ - out_head_seen_) {
      return Status::ProtocolError("request ring: the reader's index is impossible");
    }
    out_head_seen_ = head;
    if (need > kRingCells - (out_cell_ - head)) return Status::ResourceExhausted("request ring: full");
  }
  RingCell* cells = OutCells();
  // The other cells first, the first cell's stamp last: its store releases
  // them all to a reader that sees it.
  for (uint64_t i = need; i-- > 0;) {
    RingCell& cell = cells[(out_cell_ + i) % kRingCells];
    const size_t from = i * kRingCellDataBytes;
    std::memcpy(cell.data, message.data() + from, std::min(kRingCellDataBytes, message.size() - from));
    cell.length = i == 0 ? static_cast<uint32_t>(message.size()) : 0;
    Atomic(cell.stamp).store(RingStampAt(out_cell_ + i),
                             i == 0 ? std::memory_order_seq_cst : std::memory_order_relaxed);
  }
  out_cell_ += need;
  return Status::OK();
}

Result<bool> RequestRing::Pop(std::vector<std::byte>* message) {
  RingCell* cells = InCells();
  RingCell& first = cells[in_cell_ % kRingCells];
  const uint32_t stamp = Atomic(first.stamp).load(std::memory_order_acquire);
  if (stamp != RingStampAt(in_cell_)) {
    if (RingCellHoldsNothing(in_cell_, stamp)) return false;
    return Status::ProtocolError("request ring: cell " + std::to_string(in_cell_) + " has stamp " +
                                 std::to_string(stamp) + ", of no lap");
  }
  const uint32_t length = first.length;  // read once: the peer may change the ring under us
  if (length == 0 || length > kMaxRingMessageBytes) {
    return Status::ProtocolError("request ring: a message of " + std::to_string(length) + " bytes");
  }
  const uint64_t n = CellsFor(length);
  message->resize(length);
  for (uint64_t i = 0; i < n; ++i) {
    RingCell& cell = cells[(in_cell_ + i) % kRingCells];
    if (i > 0 && (Atomic(cell.stamp).load(std::memory_order_relaxed) != RingStampAt(in_cell_ + i) ||
                  cell.length != 0)) {
      return Status::ProtocolError("request ring: a message of " + std::to_string(length) +
                                   " bytes whose cell " + std::to_string(i) + " is not its");
    }
    const size_t from = i * kRingCellDataBytes;
    std::memcpy(message->data() + from, cell.data, std::min<size_t>(kRingCellDataBytes, length - from));
  }
  in_cell_ += n;
  Atomic(In().head).store(in_cell_, std::memory_order_release);
  return true;
}

bool RequestRing::HasIncoming() const {
  const uint32_t stamp = Atomic(InCells()[in_cell_ % kRingCells].stamp).load(std::memory_order_seq_cst);
  return !RingCellHoldsNothing(in_cell_, stamp);
}

void RequestRing::MarkAsleep() { Atomic(In().sleeping).store(1, std::memory_order_seq_cst); }
void RequestRing::MarkAwake() { Atomic(In().sleeping).store(0, std::memory_order_relaxed); }

bool RequestRing::PeerAsleep() const {
  return Atomic(Out().sleeping).load(std::memory_order_seq_cst) != 0;
}

void RequestRing::WakeClient() {
  Atomic(Out().seq).fetch_add(1, std::memory_order_seq_cst);
  if (PeerAsleep()) Futex(&Out().seq, FUTEX_WAKE, 1, nullptr);
}

void RequestRing::WaitIncoming(std::chrono::microseconds timeout) {
  const uint32_t seen = Atomic(In().seq).load(std::memory_order_seq_cst);
  MarkAsleep();
  if (!HasIncoming()) {
    const auto us = timeout.count();
    timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>(us % 1'000'000) * 1000};
    Futex(&In().seq, FUTEX_WAIT, seen, &ts);  // EAGAIN (seq moved), ETIMEDOUT, EINTR: all fine
  }
  MarkAwake();
}

}  // namespace nanokv::ipc
