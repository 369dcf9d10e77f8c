#include "ipc/ring/announce_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>

#include <xxhash.h>

#include "nanokv/object_header.h"

namespace nanokv::ipc {
namespace {

constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

bool PowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

Result<void*> MapAnnounceRing(int fd, size_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::FromErrno("mmap", errno, "announce ring");
  return base;
}

std::string Where(uint64_t at) { return "announce ring: record " + std::to_string(at) + ": "; }

}  // namespace

size_t AnnounceRing::FileBytes(uint32_t records) {
  return sizeof(device::AnnounceRingHeader) + size_t{records} * sizeof(device::AnnounceRecord);
}

Result<AnnounceRing> AnnounceRing::Create(uint32_t records, const SlabBounds& bounds, int* fd) {
  if (!PowerOfTwo(records) || records < kMinRecords || records > kMaxRecords) {
    return Status::InvalidArgument("announce ring: " + std::to_string(records) + " records (a power of two, " +
                                   std::to_string(kMinRecords) + "-" + std::to_string(kMaxRecords) + ")");
  }
  int memfd = memfd_create("nanokv-announce", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return Status::FromErrno("memfd_create", errno, "announce ring");
  auto fail = [memfd](const char* call) {
    Status s = Status::FromErrno(call, errno, "announce ring");
    close(memfd);
    return s;
  };
  const size_t bytes = FileBytes(records);
  if (ftruncate(memfd, static_cast<off_t>(bytes)) != 0) return fail("ftruncate");
  if (fcntl(memfd, F_ADD_SEALS, kSeals) != 0) return fail("fcntl(F_ADD_SEALS)");
  auto base = MapAnnounceRing(memfd, bytes);
  if (!base.ok()) {
    close(memfd);
    return base.status();
  }
  auto* header = static_cast<device::AnnounceRingHeader*>(*base);
  header->magic = device::kAnnounceMagic;
  header->version = device::kAnnounceVersion;
  header->records = records;
  AnnounceRing ring(*base, bytes, records);
  ring.bounds_ = bounds;
  ring.slots_.assign(bounds.header_slots, false);
  *fd = memfd;
  return ring;
}

Result<AnnounceRing> AnnounceRing::Attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Status::FromErrno("fstat", errno, "announce ring");
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (static_cast<unsigned>(seals) & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return Status::ProtocolError("announce ring: its size is not sealed");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  if (bytes < FileBytes(kMinRecords) || bytes > FileBytes(kMaxRecords)) {
    return Status::ProtocolError("announce ring: " + std::to_string(bytes) + " bytes is no ring's size");
  }
  NANOKV_ASSIGN_OR_RETURN(void* base, MapAnnounceRing(fd, bytes));
  const auto* header = static_cast<const device::AnnounceRingHeader*>(base);
  const uint32_t records = header->records;
  if (header->magic != device::kAnnounceMagic || header->version != device::kAnnounceVersion || !PowerOfTwo(records) ||
      FileBytes(records) != bytes) {
    munmap(base, bytes);
    return Status::ProtocolError("announce ring: not a version " + std::to_string(device::kAnnounceVersion) +
                                 " ring of its size");
  }
  return AnnounceRing(base, bytes, records);
}

AnnounceRing::AnnounceRing(void* base, size_t bytes, uint32_t records)
    : base_(base), bytes_(bytes), records_(records) {}

AnnounceRing::AnnounceRing(AnnounceRing&& other) noexcept { *this = std::move(other); }

AnnounceRing& AnnounceRing::operator=(AnnounceRing&& other) noexcept {
  if (this != &other) {
    Unmap();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    records_ = std::exchange(other.records_, 0);
    bounds_ = other.bounds_;
    next_ = other.next_;
    dropped_ = other.dropped_;
    ranges_ = std::move(other.ranges_);
    slots_ = std::move(other.slots_);
    poisoned_ = std::move(other.poisoned_);
  }
  return *this;
}

AnnounceRing::~AnnounceRing() { Unmap(); }

void AnnounceRing::Unmap() {
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
}

device::AnnounceRecord* AnnounceRing::records() const {
  return reinterpret_cast<device::AnnounceRecord*>(static_cast<std::byte*>(base_) + sizeof(device::AnnounceRingHeader));
}

void AnnounceRing::Publish() {
  if (base_ == nullptr) return;
  std::atomic_ref<uint64_t>(header()->consumed).store(next_, std::memory_order_release);
}

void AnnounceRing::NoteDropped() {
  if (base_ == nullptr) return;
  std::atomic_ref<uint64_t>(header()->dropped).store(++dropped_, std::memory_order_release);
}

Result<std::vector<AnnouncedObject>> AnnounceRing::Poll(size_t max, bool publish) {
  if (!poisoned_.ok()) return poisoned_;
  if (base_ == nullptr) return Status::FailedPrecondition("announce ring: not mapped");
  std::vector<AnnouncedObject> out;
  const uint64_t before = next_;
  for (size_t n = 0; n < max; ++n) {
    const uint64_t at = next_;
    device::AnnounceRecord& cell = records()[at & (records_ - 1)];
    const uint64_t stamp = std::atomic_ref<uint64_t>(cell.stamp).load(std::memory_order_acquire);
    if (stamp != at + 1) {
      const bool unwritten = (at >= records_ && stamp == at + 1 - records_) || (at < records_ && stamp == 0);
      if (unwritten) break;
      poisoned_ = Status::ProtocolError(Where(at) + "its stamp " + std::to_string(stamp) + " is no lap's");
      break;
    }
    // A copy first: the producer may write the cell while it is checked.
    device::AnnounceRecord record;
    std::memcpy(&record, &cell, sizeof(record));
    ++next_;
    if (record.kind == static_cast<uint32_t>(device::AnnounceKind::kVoid)) continue;
    Result<AnnouncedObject> object = Check(record, at);
    if (!object.ok()) {
      poisoned_ = object.status();
      break;
    }
    out.push_back(std::move(*object));
  }
  if (publish && next_ != before) Publish();
  if (!poisoned_.ok()) return poisoned_;
  return out;
}

Result<AnnouncedObject> AnnounceRing::Check(const device::AnnounceRecord& r, uint64_t at) {
  if (r.kind != static_cast<uint32_t>(device::AnnounceKind::kObject)) {
    return Status::ProtocolError(Where(at) + "kind " + std::to_string(r.kind) + " is no record's");
  }
  if (r.header_slot >= bounds_.header_slots) {
    return Status::ProtocolError(Where(at) + "header slot " + std::to_string(r.header_slot) +
                                 " is outside the slab's " + std::to_string(bounds_.header_slots));
  }
  if (slots_[r.header_slot]) {
    return Status::ProtocolError(Where(at) + "header slot " + std::to_string(r.header_slot) + " was announced before");
  }
  if (r.bytes == 0 || r.payload_offset > bounds_.payload_bytes || r.bytes > bounds_.payload_bytes - r.payload_offset) {
    return Status::ProtocolError(Where(at) + std::to_string(r.bytes) + " bytes at " + std::to_string(r.payload_offset) +
                                 " are outside the slab's " + std::to_string(bounds_.payload_bytes) + " bytes");
  }
  const uint64_t end = r.payload_offset + r.bytes;
  auto after = ranges_.upper_bound(r.payload_offset);
  const bool overlaps_before = after != ranges_.begin() && std::prev(after)->second > r.payload_offset;
  if (overlaps_before || (after != ranges_.end() && after->first < end)) {
    return Status::ProtocolError(Where(at) + "bytes [" + std::to_string(r.payload_offset) + ", " + std::to_string(end) +
                                 ") overlap an object announced before");
  }
  if (r.key_bytes == 0 || r.key_bytes > device::kMaxAnnouncedKeyBytes) {
    return Status::ProtocolError(Where(at) + "a key of " + std::to_string(r.key_bytes) + " bytes (1-" +
                                 std::to_string(device::kMaxAnnouncedKeyBytes) + ")");
  }
  std::string key(r.key, r.key_bytes);
  for (char c : key) {
    if (!IsObjectKeyByte(c)) return Status::ProtocolError(Where(at) + "its key has a byte no key may have");
  }
  if (XXH64(key.data(), key.size(), 0) != r.key_hash) {
    return Status::ProtocolError(Where(at) + "the key's hash is not the one announced");
  }
  slots_[r.header_slot] = true;
  ranges_[r.payload_offset] = end;
  return AnnouncedObject{r.header_slot, r.payload_offset, r.bytes, r.key_hash, r.epoch, std::move(key)};
}

}  // namespace nanokv::ipc
