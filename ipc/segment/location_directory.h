// The location directory: where kvd's READY store copies lie, by key, in
// the memfd that holds its read table (daemon/objects/read_table.h;
// ARCHITECTURE.md, "Reads without a lease"), so that a reader on the host
// finds a copy it never read before without a request to kvd. The reader
// still checks its copy against the read table's word afterwards, as it does
// for a location kvd answered: the directory only saves the asking.
//
// Layout, all of it 64-bit words (seqlock.h says why words):
//   the read table's 32-bit epoch words, devices x entries, padded to 64 bytes;
//   buckets x kDirectoryBucketWords: a seq word, then kDirectorySlots slots,
//     each 0 or (device index << 32 | record + 1);
//   devices x entries x kDirectoryRecordWords: a record per object record:
//     payload offset, bytes, epoch | key length << 32, then the key's bytes.
// A key hashes to bucket key_hash & (buckets - 1) (xxhash64, seed 0, as
// ObjectHeader::key_hash). kvd fills a record while no bucket names it,
// then adds it to its bucket under the bucket's seq (odd while it changes),
// and takes it out under the seq before the record can change: a reader
// that finds the seq unchanged across its reads read a record as one
// publish wrote it. A key longer than kDirectoryKeyBytes, or one whose
// bucket is full, is not in the directory (its reader asks kvd).
#ifndef NANOKV_IPC_SEGMENT_LOCATION_DIRECTORY_H_
#define NANOKV_IPC_SEGMENT_LOCATION_DIRECTORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace nanokv::ipc {

inline constexpr size_t kDirectoryBucketWords = 8;
inline constexpr size_t kDirectorySlots = kDirectoryBucketWords - 1;
inline constexpr size_t kDirectoryRecordWords = 16;
inline constexpr size_t kDirectoryKeyWords = kDirectoryRecordWords - 3;
inline constexpr size_t kDirectoryKeyBytes = kDirectoryKeyWords * sizeof(uint64_t);

// Where each part starts, in words from the start of the file.
struct DirectoryLayout {
  size_t devices = 0;
  uint32_t entries = 0;  // records per device
  uint32_t buckets = 0;  // a power of two; 0: no directory (an older kvd)

  size_t BucketsWord() const { return (devices * entries * sizeof(uint32_t) + 63) / 64 * 8; }
  size_t RecordsWord() const { return BucketsWord() + size_t{buckets} * kDirectoryBucketWords; }
  size_t Words() const { return RecordsWord() + devices * entries * kDirectoryRecordWords; }
  size_t Bytes() const { return Words() * sizeof(uint64_t); }
  size_t Bucket(uint64_t key_hash) const { return BucketsWord() + (key_hash & (buckets - 1)) * kDirectoryBucketWords; }
  size_t Record(size_t d, uint32_t record) const {
    return RecordsWord() + (d * entries + record) * kDirectoryRecordWords;
  }
};

// Buckets for `records` in all: about four records a bucket of seven slots.
inline uint32_t DirectoryBucketsFor(size_t records) {
  uint32_t buckets = 1;
  while (buckets < records / 4 && buckets < (1u << 30)) buckets <<= 1;
  return buckets;
}

inline std::atomic_ref<uint64_t> DirectoryWord(const uint64_t* base, size_t index) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t*>(base)[index]);
}

// A record's words, from its first (DirectoryLayout::Record): the writer's
// stores and the readers' loads, so the format is written down once.
inline constexpr size_t kRecordOffsetWord = 0, kRecordBytesWord = 1, kRecordEpochWord = 2, kRecordKeyWord = 3;
inline uint64_t PackEpochAndKeyLength(uint32_t epoch, size_t key_length) { return uint64_t{key_length} << 32 | epoch; }
inline uint32_t EpochOf(uint64_t packed) { return static_cast<uint32_t>(packed); }
inline size_t KeyLengthOf(uint64_t packed) { return static_cast<size_t>(packed >> 32); }
// The first `length` bytes (at most kDirectoryKeyBytes) of the key at word
// `record` into `out`.
inline void LoadDirectoryKey(const uint64_t* base, size_t record, size_t length, char* out, std::memory_order order) {
  for (size_t i = 0; i < length; i += 8) {
    const uint64_t word = DirectoryWord(base, record + kRecordKeyWord + i / 8).load(order);
    std::memcpy(out + i, &word, length - i < 8 ? length - i : 8);
  }
}
// The key (at most kDirectoryKeyBytes) into the record at word `record`,
// zero-padded to its last word.
inline void StoreDirectoryKey(uint64_t* base, size_t record, std::string_view key) {
  for (size_t w = 0; w < kDirectoryKeyWords; ++w) {
    uint64_t word = 0;
    if (w * 8 < key.size()) std::memcpy(&word, key.data() + w * 8, key.size() - w * 8 < 8 ? key.size() - w * 8 : 8);
    DirectoryWord(base, record + kRecordKeyWord + w).store(word, std::memory_order_release);
  }
}

struct DirectoryEntry {
  size_t device_index = 0;  // into the table's devices
  uint32_t read_entry = 0;  // record + 1
  uint64_t payload_offset = 0;
  uint64_t bytes = 0;
  uint32_t epoch = 0;
};

// The directory's record of `key` as one publish wrote it, or nothing (not
// there, or kvd changed its bucket through every try). Every index read is
// range-checked: a torn read names no word outside the file.
inline std::optional<DirectoryEntry> DirectoryFind(const uint64_t* base, const DirectoryLayout& layout,
                                                   std::string_view key, uint64_t key_hash) {
  if (layout.buckets == 0 || key.size() > kDirectoryKeyBytes || key.empty()) return std::nullopt;
  const size_t bucket = layout.Bucket(key_hash);
  for (int attempt = 0; attempt < 16; ++attempt) {
    const uint64_t s1 = DirectoryWord(base, bucket).load(std::memory_order_acquire);
    if (s1 & 1) continue;
    std::optional<DirectoryEntry> found;
    for (size_t slot = 1; slot <= kDirectorySlots && !found; ++slot) {
      const uint64_t named = DirectoryWord(base, bucket + slot).load(std::memory_order_acquire);
      const size_t d = named >> 32;
      const uint32_t read_entry = static_cast<uint32_t>(named);
      if (named == 0 || d >= layout.devices || read_entry == 0 || read_entry > layout.entries) continue;
      const size_t at = layout.Record(d, read_entry - 1);
      const uint64_t packed = DirectoryWord(base, at + kRecordEpochWord).load(std::memory_order_acquire);
      if (KeyLengthOf(packed) != key.size()) continue;
      char stored[kDirectoryKeyBytes];
      LoadDirectoryKey(base, at, key.size(), stored, std::memory_order_acquire);
      if (std::memcmp(stored, key.data(), key.size()) != 0) continue;
      found =
          DirectoryEntry{d, read_entry, DirectoryWord(base, at + kRecordOffsetWord).load(std::memory_order_acquire),
                         DirectoryWord(base, at + kRecordBytesWord).load(std::memory_order_acquire), EpochOf(packed)};
    }
    if (DirectoryWord(base, bucket).load(std::memory_order_relaxed) == s1) return found;
  }
  return std::nullopt;
}

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_LOCATION_DIRECTORY_H_
