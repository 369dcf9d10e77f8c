#include "ipc/ring/request_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace nanokv::ipc {
namespace {

constexpr uint64_t kCap = kRingDataBytes;
constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

uint64_t Padded(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

template <typename T>
std::atomic_ref<T> Atomic(T& word) {
  return std::atomic_ref<T>(word);
}

// Copies `n` bytes at ring position `at` (wrapping at kCap) out of / into
// the ring's bytes.
void CopyOut(const std::byte* data, uint64_t at, std::byte* to, size_t n) {
  const size_t start = at % kCap;
  const size_t first = std::min<size_t>(n, kCap - start);
  std::memcpy(to, data + start, first);
  std::memcpy(to + first, data, n - first);
}

void CopyIn(std::byte* data, uint64_t at, const std::byte* from, size_t n) {
  const size_t start = at % kCap;
  const size_t first = std::min<size_t>(n, kCap - start);
  std::memcpy(data + start, from, first);
  std::memcpy(data, from + first, n - first);
}

long Futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

Result<void*> MapRing(int fd) {
  void* base = mmap(nullptr, kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::FromErrno("mmap", errno, "request ring");
  return base;
}

}  // namespace

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
      out_tail_(other.out_tail_),
      out_head_seen_(other.out_head_seen_),
      in_head_(other.in_head_) {}

RequestRing& RequestRing::operator=(RequestRing&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, kRingFileBytes);
    base_ = std::exchange(other.base_, nullptr);
    side_ = other.side_;
    out_tail_ = other.out_tail_;
    out_head_seen_ = other.out_head_seen_;
    in_head_ = other.in_head_;
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

std::byte* RequestRing::OutData() const {
  auto* bytes = static_cast<std::byte*>(base_) + kRingHeaderBytes;
  return side_ == Side::kKvd ? bytes + kRingDataBytes : bytes;
}

std::byte* RequestRing::InData() const {
  auto* bytes = static_cast<std::byte*>(base_) + kRingHeaderBytes;
  return side_ == Side::kKvd ? bytes : bytes + kRingDataBytes;
}

Status RequestRing::Push(std::span<const std::byte> message) {
  if (message.empty() || message.size() > kMaxRingMessageBytes) {
    return Status::InvalidArgument("request ring: a message of " + std::to_string(message.size()) +
                                   " bytes (1 to " + std::to_string(kMaxRingMessageBytes) + ")");
  }
  const uint64_t need = Padded(4 + message.size());
  // The reader's index is read only when the copy of it this side keeps
  // says there is no room: reading it each time would pull its cache line
  // over from the reader for every message.
  if (need > kCap - (out_tail_ - out_head_seen_)) {
    const uint64_t head = Atomic(Out().head).load(std::memory_order_acquire);
    if (head - out_head_seen_ > out_tail_ - out_head_seen_) {
      return Status::ProtocolError("request ring: the reader's index is impossible");
    }
    out_head_seen_ = head;
    if (need > kCap - (out_tail_ - head)) return Status::ResourceExhausted("request ring: full");
  }
  const auto length = static_cast<uint32_t>(message.size());
  CopyIn(OutData(), out_tail_, reinterpret_cast<const std::byte*>(&length), 4);
  CopyIn(OutData(), out_tail_ + 4, message.data(), message.size());
  out_tail_ += need;
  Atomic(Out().tail).store(out_tail_, std::memory_order_seq_cst);
  return Status::OK();
}

Result<bool> RequestRing::Pop(std::vector<std::byte>* message) {
  const uint64_t tail = Atomic(In().tail).load(std::memory_order_acquire);
  const uint64_t avail = tail - in_head_;
  if (avail == 0) return false;
  if (avail > kCap || avail % 8 != 0) {
    return Status::ProtocolError("request ring: the writer's index is impossible");
  }
  uint32_t length = 0;  // read once: the peer may change the ring under us
  CopyOut(InData(), in_head_, reinterpret_cast<std::byte*>(&length), 4);
  if (length == 0 || length > kMaxRingMessageBytes || Padded(4 + uint64_t{length}) > avail) {
    return Status::ProtocolError("request ring: an entry of " + std::to_string(length) +
                                 " bytes with " + std::to_string(avail) + " written");
  }
  message->resize(length);
  CopyOut(InData(), in_head_ + 4, message->data(), length);
  in_head_ += Padded(4 + uint64_t{length});
  Atomic(In().head).store(in_head_, std::memory_order_release);
  return true;
}

bool RequestRing::HasIncoming() const {
  return Atomic(In().tail).load(std::memory_order_seq_cst) != in_head_;
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
