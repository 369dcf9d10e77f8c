// The block allocator: hands out contiguous runs of KV blocks, numbered
// 0..total_blocks-1, and takes them back. It knows nothing of pages, layers
// or sequences (libkv/cache/ maps blocks onto pages); it only keeps the books.
//
// Algorithm: an ordered index of the free runs, two views of one set:
//   free_by_start_  start -> length      (find the neighbours to coalesce with)
//   free_by_size_   (length, start)      (best fit: the shortest run that is
//                                          long enough, the lowest such start)
// and the allocated runs, start -> length (so Free can refuse what it never
// handed out). Allocate and Free are O(log r), r the number of runs; nothing
// scans the blocks. A run is carved from the front of the chosen free run; a
// freed run merges with the free runs touching it, so no two free runs are
// ever adjacent.
//
// Fragmentation, a figure in [0, 1]:
//   fragmentation = 1 - largest_free_run / free_blocks   (0 when nothing is free)
// 0 means every free block lies in one run (any request up to free_blocks
// fits); near 1 means the free blocks are scattered in many short runs, so a
// long run may fail although enough blocks are free in total.
//
// Invariants (CheckInvariants() walks the state and verifies each; tests call it):
//   1. The free runs and the allocated runs tile [0, total_blocks) exactly:
//      no gap, no overlap, every run of length >= 1.
//   2. No two free runs are adjacent (Free coalesces).
//   3. free_by_size_ holds exactly the runs of free_by_start_.
//   4. free_blocks_ + used_blocks == total_blocks, each the sum of its runs.
//
// Threads: not thread-safe; its owner (KVCache) holds a lock around it.
// Bad input (a zero or oversized request, a double free, a run it never
// handed out) answers a Status error; nothing here aborts.
#ifndef NANOKV_LIBKV_CACHE_BLOCK_ALLOCATOR_H_
#define NANOKV_LIBKV_CACHE_BLOCK_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::cache {

using BlockId = uint32_t;

// `count` blocks from `first` on: [first, first + count).
struct BlockRun {
  BlockId first = 0;
  uint32_t count = 0;
  friend bool operator==(const BlockRun&, const BlockRun&) = default;
};

class BlockAllocator {
 public:
  // The most blocks one allocator keeps: ids fit int32, as block tables in
  // kernels hold them.
  static constexpr uint32_t kMaxBlocks = uint32_t{1} << 31;

  // All `total_blocks` blocks free. kInvalidArgument for 0 or more than kMaxBlocks.
  static Result<BlockAllocator> Create(size_t total_blocks);

  BlockAllocator(BlockAllocator&&) = default;
  BlockAllocator& operator=(BlockAllocator&&) = default;

  // A run of exactly `count` contiguous blocks, best fit. O(log r).
  // kInvalidArgument for 0 or more than total_blocks(); kResourceExhausted
  // when no free run is long enough (the message says whether enough blocks
  // are free in total, i.e. whether fragmentation is the cause).
  Result<BlockRun> Allocate(uint32_t count);
  // Gives back a run exactly as Allocate returned it. O(log r).
  // kInvalidArgument for an empty run or one outside the allocator;
  // kNotFound when no allocated run starts at run.first (a double free, or
  // never allocated); kInvalidArgument when one does but its length differs.
  Status Free(BlockRun run);
  // Splits an allocated run in two allocated runs, [first, first + at) and
  // [first + at, first + count), each then freed on its own: how KVCache
  // hands part of a reserved run to a sequence. O(log r). kNotFound when no
  // allocated run is exactly `run`; kInvalidArgument unless 0 < at < count.
  Status Split(BlockRun run, uint32_t at);

  size_t total_blocks() const { return total_blocks_; }
  size_t free_blocks() const { return free_blocks_; }
  size_t used_blocks() const { return total_blocks_ - free_blocks_; }
  // The longest run Allocate can give now; 0 when nothing is free.
  size_t largest_free_run() const;
  size_t free_run_count() const { return free_by_start_.size(); }
  size_t allocated_run_count() const { return used_by_start_.size(); }
  // 1 - largest_free_run / free_blocks; 0 when nothing is free (see above).
  double fragmentation() const;
  // True if [run.first, run.first + run.count) was handed out as one run.
  bool IsAllocated(BlockRun run) const;

  // A readable picture: the counts, the fragmentation, a map of `width`
  // characters a line ('.' free, 'X' used; beyond 4096 blocks one character
  // stands for several blocks and ':' marks a mix) and the first free runs.
  std::string DumpBlockMap(size_t width = 64) const;

  // OK, or kInternal naming the first invariant found broken. O(r log r).
  Status CheckInvariants() const;

 private:
  using RunMap = std::map<BlockId, uint32_t>;            // start -> length
  using SizeSet = std::set<std::pair<uint32_t, BlockId>>;  // (length, start)
  // Spare tree nodes: a run that leaves one tree gives its node to the next
  // run that enters one, so a steady allocate/free pattern calls no malloc.
  static constexpr size_t kSpareNodes = 4;

  explicit BlockAllocator(uint32_t total_blocks);
  // Tree edits through the spare nodes. Put* allocate only when no spare is
  // left; Drop* keep the node as a spare when there is room.
  void PutRun(RunMap& map, BlockId first, uint32_t count);
  void DropRun(RunMap& map, RunMap::iterator it);
  void PutSize(uint32_t count, BlockId first);
  void DropSize(uint32_t count, BlockId first);
  void InsertFree(BlockId first, uint32_t count);
  void EraseFree(RunMap::iterator it);
  // Gives the free run at `it` a new start and length in both indexes, in
  // place (no allocation).
  void ReshapeFree(RunMap::iterator it, BlockId first, uint32_t count);

  uint32_t total_blocks_ = 0;
  size_t free_blocks_ = 0;
  RunMap free_by_start_;
  SizeSet free_by_size_;
  RunMap used_by_start_;
  std::vector<RunMap::node_type> spare_runs_;
  std::vector<SizeSet::node_type> spare_sizes_;
};

}  // namespace nanokv::cache

#endif  // NANOKV_LIBKV_CACHE_BLOCK_ALLOCATOR_H_
