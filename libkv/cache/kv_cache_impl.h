// KVCache's state: the block allocator, the sequences, and one reference
// count per page group. kv_cache.cc holds the sequence calls, cache_pages.cc
// the page groups (map on first use, return or keep when free, reclaim).
//
// Invariants (CheckInvariants() verifies each; tests call it):
//   1. group_refs_[g] is the number of (live block, head range) pairs whose
//      bytes touch page group g (ForEachGroupRange); a block is live when a
//      sequence holds it.
//   2. group_refs_[g] > 0 implies group_mapped_[g]: a live block's pages are
//      mapped in every layer of K and V.
//   3. kept_free_ holds exactly the mapped groups with no reference, and at
//      most keep_free_groups of them.
//   4. The sequences' runs and the reserve's are exactly the allocator's
//      allocated runs, and each sequence has room for its tokens: tokens <=
//      table.size() * block_size < tokens + block_size (or no block for no
//      token).
//   5. reserve_blocks_ is the sum of the reserve's runs, at most
//      reserve_high_blocks; a reserve block counts in group_refs_ like a
//      live one (its groups stay mapped).
//
// The reserve (cache_reserve.cc) is a queue of allocated runs in no
// sequence. A background thread refills it, holding mu_ while kvd answers
// its grant: callers wait for that once per refill, not per allocation.
#ifndef NANOKV_LIBKV_CACHE_KV_CACHE_IMPL_H_
#define NANOKV_LIBKV_CACHE_KV_CACHE_IMPL_H_

#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "libkv/cache/block_allocator.h"
#include "libkv/cache/cache_geometry.h"
#include "nanokv/kv_cache.h"
#include "nanokv/kv_tensor.h"

namespace nanokv {

class KVCache::Impl {
 public:
  // Where FillBatch writes; all buffers belong to the caller.
  struct BatchOut {
    int32_t* block_table = nullptr;  // [batch, table_stride], -1 past each row's blocks
    size_t table_stride = 0;
    int32_t* context_lens = nullptr;  // [batch]
    int32_t* query_start = nullptr;   // [batch + 1]: prefix sums of the new tokens
    int64_t* slot_mapping = nullptr;  // [slot_capacity]
    size_t slot_capacity = 0;
    // Written by FillBatch:
    size_t new_tokens = 0;
    size_t max_blocks = 0;
    uint32_t max_context_len = 0;
  };

  Impl(Client& client, cache::CacheGeometry geometry, std::unique_ptr<KVTensor> k, std::unique_ptr<KVTensor> v,
       cache::BlockAllocator blocks);
  // Stops the reserve's thread before the tensors go.
  ~Impl();

  Status AllocateFor(uint64_t request_id, size_t tokens);
  Result<int64_t> AppendToken(uint64_t request_id);
  Status AppendTokens(uint64_t request_id, size_t tokens);
  Status FreeFor(uint64_t request_id);
  Result<size_t> UsedTokens(uint64_t request_id) const;
  Result<std::vector<uint32_t>> BlockTable(uint64_t request_id) const;
  Result<int64_t> SlotOf(uint64_t request_id, size_t position) const;
  bool Contains(uint64_t request_id) const;
  Result<KVCacheView> View(const KVTensor& tensor, uint32_t layer) const;
  const KVTensor& k() const { return *k_; }
  const KVTensor& v() const { return *v_; }
  Result<size_t> ReleaseFreePages(size_t max_pages);
  Result<size_t> ReleasePendingReclaim();
  const cache::CacheGeometry& geometry() const { return g_; }
  KVCacheStats Stats() const;
  std::string DumpCacheStats() const;
  Status CheckInvariants() const;

  // The handle's fill: for each request, its block table row, its context
  // length and the slots of its last new_tokens[i] tokens (1 each when
  // new_tokens is empty). Allocates nothing on success. kNotFound for an
  // unknown id; kInvalidArgument when a row or the slots do not fit.
  Status FillBatch(std::span<const uint64_t> request_ids, std::span<const uint32_t> new_tokens,
                   BatchOut& out) const;

 private:
  struct Sequence {
    std::vector<cache::BlockRun> runs;
    std::vector<uint32_t> table;  // the blocks of runs, in order
    size_t tokens = 0;
  };

  // REQUIRES (all *Locked): mu_ held.
  // Makes room for `tokens` more tokens in `seq`; all or nothing.
  Status GrowLocked(Sequence& seq, size_t tokens);
  // `count` blocks (one run if one is free, else several) with their page
  // groups mapped; all or nothing. kResourceExhausted when out of blocks.
  // From the reserve when it holds `count` blocks (no request), else fresh.
  Result<std::vector<cache::BlockRun>> TakeBlocksLocked(size_t count);
  Result<std::vector<cache::BlockRun>> TakeFreshBlocksLocked(size_t count);
  // The reserve (cache_reserve.cc). Take: its first `count` blocks (REQUIRES
  // count <= reserve_blocks_). Keep: as much of `runs` as fits under
  // reserve_high_blocks goes into it; the rest is left in `runs`. Drop:
  // gives its runs back, newest first, until `max_pages` pages were
  // returned; returns the pages.
  Result<std::vector<cache::BlockRun>> TakeReserveLocked(size_t count);
  void KeepInReserveLocked(std::vector<cache::BlockRun>* runs);
  Result<size_t> DropReserveLocked(size_t max_pages);
  bool ReserveWantsRefillLocked() const;
  void RefillLocked();
  // The reserve's thread: refills, and reports the reserve to kvd (kvctl).
  void RefillLoop();
  Result<std::vector<cache::BlockRun>> AllocateRunsLocked(size_t count);
  // Drops the runs' group references, frees the runs, and returns or keeps
  // the groups left with none. The first unmap error is returned.
  Status GiveBackLocked(const std::vector<cache::BlockRun>& runs);
  // Drops the runs' group references and frees the runs; returns the groups
  // left with none (sorted), for the caller to keep or unmap.
  std::vector<uint32_t> FreeRunsLocked(const std::vector<cache::BlockRun>& runs);
  // Adds `delta` (+1/-1) to each group the runs' blocks touch; collects the
  // groups that went 0 -> 1 (delta +1) or 1 -> 0 (delta -1).
  void CountRefsLocked(const std::vector<cache::BlockRun>& runs, int delta, std::vector<uint32_t>* crossed);
  // Map / unmap `groups` (sorted, unique) in every layer of K and V. Map
  // stops at the first failure (the caller undoes); unmap goes on and marks
  // every group unmapped, returning the first error.
  Status MapGroupsLocked(const std::vector<uint32_t>& groups);
  Status UnmapGroupsLocked(const std::vector<uint32_t>& groups);
  Result<size_t> ReleaseFreePagesLocked(size_t max_pages);
  size_t pages_per_group() const { return 2 * size_t{g_.config.layers}; }
  // One block: K and V of every layer.
  size_t block_bytes() const { return g_.layer_block_bytes * pages_per_group(); }

  Client& client_;  // must remain live while the cache exists
  const cache::CacheGeometry g_;
  const std::unique_ptr<KVTensor> k_;
  const std::unique_ptr<KVTensor> v_;

  mutable std::mutex mu_;
  cache::BlockAllocator blocks_;                      // guarded by mu_
  std::unordered_map<uint64_t, Sequence> sequences_;  // guarded by mu_
  std::vector<uint32_t> group_refs_;                  // guarded by mu_
  std::vector<uint8_t> group_mapped_;                 // guarded by mu_
  std::set<uint32_t> kept_free_;                      // guarded by mu_
  size_t used_tokens_ = 0;                            // guarded by mu_
  uint64_t groups_mapped_ = 0;                        // guarded by mu_
  uint64_t groups_returned_ = 0;                      // guarded by mu_
  uint64_t map_failures_ = 0;                         // guarded by mu_
  std::deque<cache::BlockRun> reserve_;               // guarded by mu_
  size_t reserve_blocks_ = 0;                         // guarded by mu_
  uint64_t reserve_hits_ = 0;                         // guarded by mu_
  uint64_t reserve_refills_ = 0;                      // guarded by mu_
  uint64_t reserve_refill_failures_ = 0;              // guarded by mu_
  bool refill_blocked_ = false;  // guarded by mu_: refused; a free unblocks
  bool stopping_ = false;        // guarded by mu_
  uint64_t reported_reserve_bytes_ = 0;  // the refill thread's (then ~Impl's)
  std::condition_variable refill_cv_;
  std::thread refill_thread_;  // only with a reserve; last, so it starts last
};

}  // namespace nanokv

#endif  // NANOKV_LIBKV_CACHE_KV_CACHE_IMPL_H_
