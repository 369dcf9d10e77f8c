// The master's index: every READY copy of every object on the live nodes
// (ObjectTable, compact), the writes in progress (per-key serialisation), the
// removals in progress, and per node and device the count of copies. Sharded
// by key hash, one lock per shard, so plans for different keys rarely meet.
//
// Per-key serialisation (nano_mooncake seed, section 9): a key is in at most
// one of three places: READY in the table (a new open is kAlreadyExists),
// being written (an open is kFailedPrecondition until commit or revoke), or
// being removed (likewise, until the nodes answered). A node's events may add
// READY copies of a key being written (its commit landed first): the table
// is checked first, so the key is READY as soon as one copy is.
//
// Invariants (CheckInvariants, run by the tests):
//   1. each shard's table is well formed (ObjectTable::CheckInvariants);
//   2. the per node+device counts equal the copies in the tables, and the
//      host-tier counts the copies there in the host tier (CopyRef::tier);
//   3. a write's copies are on distinct nodes.
#ifndef NANOKV_MASTER_INDEX_MASTER_INDEX_H_
#define NANOKV_MASTER_INDEX_MASTER_INDEX_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "master/index/object_table.h"
#include "nanokv/status.h"

namespace nanokv::master {

inline constexpr size_t kMaxNodes = 4096;           // node indexes 0..kMaxNodes-1
inline constexpr size_t kMaxNodeDevices = 16;       // kvd's ordinals 0..15

// xxhash64 of the key, seed 0: the same as kvd's ObjectHeader::key_hash.
uint64_t KeyHash(std::string_view key);

class MasterIndex {
 public:
  MasterIndex();
  MasterIndex(const MasterIndex&) = delete;
  MasterIndex& operator=(const MasterIndex&) = delete;

  // ---- Writes ----
  // A new write of `key`: its id (never 0, never reused). kAlreadyExists if
  // READY, kFailedPrecondition while being written or removed.
  Result<uint64_t> BeginWrite(std::string_view key, uint64_t bytes_total);
  // A node planned a copy for the write. False if the write is gone (revoked,
  // or all of it reclaimed): the caller revokes that plan on the node.
  bool AddPlanned(std::string_view key, uint64_t write_id, CopyRef copy);
  // Every plan of the write has been asked for and answered. Until then the
  // write stays even with no copy (its orders are in flight); from then on
  // it goes once its last copy does (reclaimed or lost with its node).
  void EndPlanning(std::string_view key, uint64_t write_id);
  // The write's planned copies, for a commit or revoke; the write is then
  // finishing (a second commit is kFailedPrecondition). kNotFound when no
  // such write is in progress (finished, revoked, reclaimed on its nodes).
  Result<std::vector<CopyRef>> StartFinish(std::string_view key, uint64_t write_id, bool commit);
  // A copy of the write committed on its node: READY from now on.
  void AddCommitted(std::string_view key, uint64_t write_id, CopyRef copy);
  // The write is over (committed, revoked, or failed).
  void EndWrite(std::string_view key, uint64_t write_id);

  // ---- What nodes report ----
  // A READY copy (an event, a commit, a node's snapshot), or one the node
  // moved between its tiers (copy.tier, and a promotion's epoch). False, and
  // nothing added, when it would be a new copy on a node that holds
  // `node_limit` copies already (a copy it has is refreshed still).
  bool AddCopy(std::string_view key, uint64_t bytes_total, CopyRef copy, uint64_t node_limit = UINT64_MAX);
  // A copy gone (removed, evicted, reclaimed, revoked on its node): from the
  // table, or from a write in progress (epoch 0: any epoch).
  void RemoveCopy(std::string_view key, uint16_t node, uint32_t epoch);
  // A node is dead: every copy it held leaves, READY or planned. Returns the
  // READY copies removed.
  size_t RemoveNode(uint16_t node);

  // ---- Removals ----
  // The copies to remove; kNotFound, or kFailedPrecondition while the key is
  // being written or removed.
  Result<std::vector<CopyRef>> StartRemove(std::string_view key);
  // The removal is over; `removed` left their nodes (the rest stay).
  void EndRemove(std::string_view key, const std::vector<CopyRef>& removed);

  // ---- Reads ----
  struct Found {
    uint64_t bytes_total = 0;
    std::vector<CopyRef> copies;
  };
  // kNotFound (or kFailedPrecondition while only being written).
  Result<Found> Find(std::string_view key) const;
  // Up to `max` keys of shard `shard` from *cursor on (ObjectTable::ListFrom).
  // Returns false once the shard is done.
  bool ListFrom(size_t shard, size_t* cursor, size_t max,
                const std::function<void(std::string_view, uint64_t, const std::vector<CopyRef>&)>& row) const;
  static constexpr size_t kShards = 16;

  size_t objects() const;
  size_t writes_in_progress() const;
  uint64_t copies_on(uint16_t node, uint8_t device) const {
    return counts_[node * kMaxNodeDevices + device].load(std::memory_order_relaxed);
  }
  // Of those, the copies in the device's host tier (the node's last word).
  uint64_t host_copies_on(uint16_t node, uint8_t device) const {
    return host_counts_[node * kMaxNodeDevices + device].load(std::memory_order_relaxed);
  }
  // The copies on `node`, every device.
  uint64_t copies_of(uint16_t node) const;
  size_t MemoryBytes() const;
  // Drops everything (a master that stops leading forgets what it knew).
  void Clear();
  Status CheckInvariants() const;

 private:
  struct Write {
    uint64_t id = 0;
    uint64_t bytes_total = 0;
    bool planning = true;   // open orders in flight
    bool finishing = false;
    std::vector<CopyRef> copies;
  };
  struct Shard {
    mutable std::mutex mu;
    ObjectTable table;
    std::unordered_map<std::string, Write> writes;
    std::unordered_set<std::string> removing;
  };

  Shard& ShardOf(uint64_t hash) { return *shards_[hash >> 60]; }
  const Shard& ShardOf(uint64_t hash) const { return *shards_[hash >> 60]; }
  void Count(const CopyRef& copy, int delta);
  // REQUIRES: shard.mu held.
  void AddCopyLocked(Shard& shard, std::string_view key, uint64_t hash, uint64_t bytes_total, CopyRef copy);

  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> next_write_id_{1};
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;       // [node * kMaxNodeDevices + device]
  std::unique_ptr<std::atomic<uint64_t>[]> host_counts_;  // the same, host-tier copies only
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_INDEX_MASTER_INDEX_H_
