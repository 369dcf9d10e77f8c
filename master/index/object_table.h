// The master's index of READY objects, compact: one 40-byte slot per key in
// an open-addressing table (linear probing, backward-shift deletion, at most
// 80% full), the key itself in a KeyArena, the first copy in the slot and
// any further copies (replicas) in a side block of 7. At 10 million keys
// that is 40 B / 0.6 (the fill after the last doubling) + ~8 B of arena
// record overhead per key: well under the 200 B per object the issue allows,
// key bytes aside (docs/BENCHMARKS.md has the measured figures).
//
// Words: a *copy* is one READY replica of an object on one device of one
// node (node index from NodeRegistry, kvd's device ordinal, the epoch kvd
// gave it). A key has 1..kMaxCopies copies, on distinct nodes: a kvd holds
// a key at most once, so a node has at most one copy of it.
//
// Memory follows the keys held, also down: once removals leave the table
// under 1/8 full, or its arena mostly free records, it is rebuilt at the
// size its keys need (slots, arena and copy blocks anew), so what a node
// that died had added is given back, not kept for the next peak.
//
// Not thread-safe: MasterIndex keeps one per shard, under the shard's lock.
#ifndef NANOKV_MASTER_INDEX_OBJECT_TABLE_H_
#define NANOKV_MASTER_INDEX_OBJECT_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "master/index/key_arena.h"

namespace nanokv::master {

// Where a copy's bytes are on its node (v1::CopyTier's values).
inline constexpr uint8_t kCopyInStore = 0;
inline constexpr uint8_t kCopyInHostTier = 1;

struct CopyRef {
  uint16_t node = 0;   // NodeRegistry's index
  uint8_t device = 0;  // kvd's ordinal on that node
  uint8_t tier = 0;    // kCopyInStore or kCopyInHostTier
  uint32_t epoch = 0;
};
static_assert(sizeof(CopyRef) == 8);

inline constexpr size_t kMaxCopies = 8;

class ObjectTable {
 public:
  ObjectTable();

  // Adds the copy on (copy.node, copy.device), or refreshes it (device,
  // epoch, tier) if the node has one. True for a new copy. A key at kMaxCopies copies takes no
  // more (false).
  bool AddCopy(std::string_view key, uint64_t hash, uint64_t bytes_total, CopyRef copy);
  // Removes the node's copy of `key` (epoch 0: whatever its epoch, else only
  // that epoch), into *removed; the key leaves with its last copy. True if
  // one was removed.
  bool RemoveCopy(std::string_view key, uint64_t hash, uint16_t node, uint32_t epoch, CopyRef* removed);
  // The key's size and copies; false if absent.
  bool Find(std::string_view key, uint64_t hash, uint64_t* bytes_total, std::vector<CopyRef>* copies) const;
  bool Contains(std::string_view key, uint64_t hash) const;
  // Drops every copy on `node`, telling `removed` of each. Returns how many.
  size_t RemoveNode(uint16_t node, const std::function<void(const CopyRef&)>& removed);
  // Calls `row` for up to `max` keys from slot *cursor on, and moves *cursor
  // past them; *cursor == capacity() at the end. Not a snapshot: keys that
  // move between calls may be seen twice or missed.
  void ListFrom(size_t* cursor, size_t max,
                const std::function<void(std::string_view key, uint64_t bytes_total,
                                         const std::vector<CopyRef>& copies)>& row) const;

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }
  // What the table holds in memory: slots, copy blocks, arena chunks.
  size_t MemoryBytes() const;
  // Walks every slot: probe chains intact, counts exact. Tests call it.
  bool CheckInvariants() const;

 private:
  struct Slot {
    uint64_t hash = 0;       // 0: empty (a key hashing to 0 is stored as 1)
    KeyArena::Ref key = 0;
    uint64_t bytes_total = 0;
    uint32_t extra = 0;      // copies after the first: a block index, 0 none
    uint8_t copies = 0;
    uint8_t unused[3] = {};
    CopyRef first;
  };
  static_assert(sizeof(Slot) == 40);
  using Block = std::array<CopyRef, kMaxCopies - 1>;

  static uint64_t Stored(uint64_t hash) { return hash == 0 ? 1 : hash; }
  size_t Home(uint64_t hash) const { return hash & (slots_.size() - 1); }
  // The slot of `key`, or the empty slot where it would go.
  size_t Probe(std::string_view key, uint64_t hash) const;
  void Grow();
  // Rebuilds the table when removals left it sparse (see the top).
  void ShrinkIfSparse();
  void EraseAt(size_t i);
  CopyRef& CopyAt(Slot& slot, size_t i) { return i == 0 ? slot.first : blocks_[slot.extra][i - 1]; }
  const CopyRef& CopyAt(const Slot& slot, size_t i) const {
    return i == 0 ? slot.first : blocks_[slot.extra][i - 1];
  }
  // Removes copy i of the slot at `at`; the key leaves with its last.
  void RemoveCopyAt(size_t at, size_t i);
  void Release(Slot& slot);

  std::vector<Slot> slots_;
  size_t size_ = 0;
  KeyArena keys_;
  std::vector<Block> blocks_;        // [0] unused: extra 0 means none
  std::vector<uint32_t> free_blocks_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_INDEX_OBJECT_TABLE_H_
