// The master index's keys, packed: each key is a record of a 2-byte length
// and its bytes, rounded up to 8 bytes, in 1 MiB chunks, named by a 64-bit
// Ref. A freed record goes on the free list of its size class (8..264 bytes)
// and the next key of that class reuses it, so the arena's memory follows
// the peak of live keys per class, not every key ever stored: under churn it
// stays flat (Mooncake's metadata memory grows without bound; this must not).
//
// Not thread-safe: its owner (one shard of the index) holds a lock.
#ifndef NANOKV_MASTER_INDEX_KEY_ARENA_H_
#define NANOKV_MASTER_INDEX_KEY_ARENA_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace nanokv::master {

class KeyArena {
 public:
  using Ref = uint64_t;
  static constexpr size_t kChunkBytes = 1u << 20;
  static constexpr size_t kMaxKeyBytes = 256;

  KeyArena() { free_.fill(kNone); }
  KeyArena(const KeyArena&) = delete;
  KeyArena& operator=(const KeyArena&) = delete;
  KeyArena(KeyArena&&) = default;
  KeyArena& operator=(KeyArena&&) = default;

  // REQUIRES: 1 <= key.size() <= kMaxKeyBytes.
  Ref Add(std::string_view key);
  // REQUIRES: `ref` came from Add and was not freed.
  std::string_view Get(Ref ref) const;
  void Free(Ref ref);

  // Memory the arena holds (chunks), and the bytes of live records in it.
  size_t bytes() const { return chunks_.size() * kChunkBytes; }
  size_t live_bytes() const { return live_bytes_; }

 private:
  static constexpr size_t kClasses = (2 + kMaxKeyBytes + 7) / 8 + 1;
  static constexpr Ref kNone = ~Ref{0};

  static size_t RecordBytes(size_t key_bytes) { return (2 + key_bytes + 7) & ~size_t{7}; }
  char* At(Ref ref) const { return chunks_[ref >> 20].get() + (ref & (kChunkBytes - 1)); }

  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t used_in_last_ = kChunkBytes;  // bytes taken in the last chunk
  std::array<Ref, kClasses> free_;  // per class: the first free record, or kNone
  size_t live_bytes_ = 0;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_INDEX_KEY_ARENA_H_
