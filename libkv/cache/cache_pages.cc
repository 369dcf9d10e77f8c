// KVCache's page groups: blocks are taken with their pages mapped (a group
// at a time, in every layer of K and V) and given back with the groups that
// no live block touches any more returned to kvd, or kept mapped up to
// keep_free_groups. Reclaim unmaps kept groups, then the reserve's
// (cache_reserve.cc); a group holding a live block is never unmapped.
#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

#include "libkv/cache/kv_cache_impl.h"

namespace nanokv {
namespace {

// Calls f(first, count) for each run of consecutive values in `sorted`.
template <typename F>
Status ForEachRun(const std::vector<uint32_t>& sorted, F&& f) {
  Status first_error;
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i + 1;
    while (end < sorted.size() && sorted[end] == sorted[end - 1] + 1) ++end;
    Status s = f(size_t{sorted[i]}, end - i);
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
    i = end;
  }
  return first_error;
}

}  // namespace

Result<std::vector<cache::BlockRun>> KVCache::Impl::AllocateRunsLocked(size_t count) {
  if (count > blocks_.free_blocks()) {
    return Status::ResourceExhausted("KVCache: out of blocks: " + std::to_string(count) +
                                     " needed, " + std::to_string(blocks_.free_blocks()) + " of " +
                                     std::to_string(blocks_.total_blocks()) + " free");
  }
  std::vector<cache::BlockRun> runs;
  // One run when one is long enough; else the longest runs first, so a
  // fragmented cache still serves a request it has the blocks for.
  size_t left = count;
  while (left > 0) {
    auto take = static_cast<uint32_t>(std::min(left, blocks_.largest_free_run()));
    Result<cache::BlockRun> run = blocks_.Allocate(take);
    if (!run.ok()) {  // cannot happen with count <= free_blocks; undo anyway
      for (cache::BlockRun r : runs) (void)blocks_.Free(r);
      return run.status();
    }
    runs.push_back(*run);
    left -= take;
  }
  return runs;
}

void KVCache::Impl::CountRefsLocked(const std::vector<cache::BlockRun>& runs, int delta,
                                    std::vector<uint32_t>* crossed) {
  for (cache::BlockRun run : runs) {
    for (size_t block = run.first; block < size_t{run.first} + run.count; ++block) {
      g_.ForEachGroupRange(block, [&](size_t first, size_t count) {
        for (size_t group = first; group < first + count; ++group) {
          uint32_t& refs = group_refs_[group];
          if (delta > 0) {
            if (refs++ == 0) crossed->push_back(static_cast<uint32_t>(group));
          } else {
            if (--refs == 0) crossed->push_back(static_cast<uint32_t>(group));
          }
        }
      });
    }
  }
  std::sort(crossed->begin(), crossed->end());
}

Result<std::vector<cache::BlockRun>> KVCache::Impl::TakeBlocksLocked(size_t count) {
  if (count == 0) return std::vector<cache::BlockRun>{};
  Result<std::vector<cache::BlockRun>> runs =
      count <= reserve_blocks_ ? TakeReserveLocked(count) : TakeFreshBlocksLocked(count);
  if (ReserveWantsRefillLocked()) refill_cv_.notify_one();
  return runs;
}

Result<std::vector<cache::BlockRun>> KVCache::Impl::TakeFreshBlocksLocked(size_t count) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<cache::BlockRun> runs, AllocateRunsLocked(count));
  std::vector<uint32_t> first_use;
  CountRefsLocked(runs, +1, &first_use);
  std::vector<uint32_t> to_map, revived;
  for (uint32_t group : first_use) {
    if (group_mapped_[group]) {
      revived.push_back(group);  // kept free and mapped: no request to kvd
      kept_free_.erase(group);
    } else {
      to_map.push_back(group);
    }
  }
  Status mapped = MapGroupsLocked(to_map);
  if (mapped.ok()) return runs;

  // Undo: nothing of this call stays (references, kept groups, mappings, runs).
  ++map_failures_;
  std::vector<uint32_t> unused;
  CountRefsLocked(runs, -1, &unused);
  for (uint32_t group : revived) kept_free_.insert(group);
  (void)ForEachRun(to_map, [&](size_t first, size_t n) {
    for (size_t layer = 0; layer < g_.config.layers; ++layer) {
      size_t at = layer * g_.groups_per_layer + first;
      for (KVTensor* tensor : {k_.get(), v_.get()}) {
        Status undone = tensor->Unmap(at, n);
        if (!undone.ok()) spdlog::warn("nanokv: KVCache: undoing a map: {}", undone.ToString());
      }
    }
    return Status::OK();
  });
  for (cache::BlockRun run : runs) (void)blocks_.Free(run);
  return mapped;
}

Status KVCache::Impl::MapGroupsLocked(const std::vector<uint32_t>& groups) {
  const size_t layers = g_.config.layers;
  const size_t per_layer = g_.groups_per_layer;
  Status status;
  if (groups.size() == per_layer) {
    // Every group of a layer: the same index range in every layer is one
    // contiguous range of the tensor, so one grant per tensor.
    for (KVTensor* tensor : {k_.get(), v_.get()}) {
      status = tensor->Map(0, layers * per_layer);
      if (!status.ok()) return status;
    }
  } else {
    // Map stops at the first failure: each run's maps are tried only while
    // every earlier one succeeded.
    for (size_t i = 0; i < groups.size() && status.ok();) {
      size_t end = i + 1;
      while (end < groups.size() && groups[end] == groups[end - 1] + 1) ++end;
      for (size_t layer = 0; layer < layers && status.ok(); ++layer) {
        for (KVTensor* tensor : {k_.get(), v_.get()}) {
          status = tensor->Map(layer * per_layer + groups[i], end - i);
          if (!status.ok()) break;
        }
      }
      i = end;
    }
    if (!status.ok()) return status;
  }
  for (uint32_t group : groups) group_mapped_[group] = 1;
  groups_mapped_ += groups.size();
  return Status::OK();
}

Status KVCache::Impl::UnmapGroupsLocked(const std::vector<uint32_t>& groups) {
  const size_t per_layer = g_.groups_per_layer;
  Status status = ForEachRun(groups, [&](size_t first, size_t n) {
    Status first_error;
    for (size_t layer = 0; layer < g_.config.layers; ++layer) {
      for (KVTensor* tensor : {k_.get(), v_.get()}) {
        // The tensor unmaps even when kvd cannot take the pages back (gone);
        // a page it could not unmap stays mapped in the tensor, which a later
        // Map skips and the tensor's teardown returns.
        Status s = tensor->Unmap(layer * per_layer + first, n);
        if (!s.ok() && first_error.ok()) first_error = std::move(s);
      }
    }
    return first_error;
  });
  for (uint32_t group : groups) group_mapped_[group] = 0;
  groups_returned_ += groups.size();
  return status;
}

Status KVCache::Impl::GiveBackLocked(const std::vector<cache::BlockRun>& given) {
  // Freed blocks refill the reserve first: their pages stay mapped, so
  // that refill costs nothing.
  std::vector<cache::BlockRun> runs = given;
  KeepInReserveLocked(&runs);
  refill_blocked_ = false;  // blocks came free: a refused refill may fit now
  std::vector<uint32_t> to_unmap;
  for (uint32_t group : FreeRunsLocked(runs)) {
    if (kept_free_.size() < g_.config.keep_free_groups) {
      kept_free_.insert(group);
    } else {
      to_unmap.push_back(group);
    }
  }
  return UnmapGroupsLocked(to_unmap);
}

std::vector<uint32_t> KVCache::Impl::FreeRunsLocked(const std::vector<cache::BlockRun>& runs) {
  std::vector<uint32_t> now_free;
  CountRefsLocked(runs, -1, &now_free);
  for (cache::BlockRun run : runs) {
    Status freed = blocks_.Free(run);
    if (!freed.ok()) spdlog::error("nanokv: KVCache: {}", freed.ToString());  // a bug of ours
  }
  return now_free;
}

Result<size_t> KVCache::Impl::ReleaseFreePages(size_t max_pages) {
  std::lock_guard<std::mutex> lock(mu_);
  return ReleaseFreePagesLocked(max_pages);
}

Result<size_t> KVCache::Impl::ReleaseFreePagesLocked(size_t max_pages) {
  std::vector<uint32_t> groups;
  size_t pages = 0;
  for (auto it = kept_free_.begin(); it != kept_free_.end() && pages < max_pages;) {
    groups.push_back(*it);
    pages += pages_per_group();
    it = kept_free_.erase(it);
  }
  NANOKV_RETURN_IF_ERROR(UnmapGroupsLocked(groups));
  if (pages >= max_pages) return pages;
  NANOKV_ASSIGN_OR_RETURN(size_t from_reserve, DropReserveLocked(max_pages - pages));
  return pages + from_reserve;
}

Result<size_t> KVCache::Impl::ReleasePendingReclaim() {
  uint32_t pending = client_.pending_reclaim_pages();
  if (pending == 0) return size_t{0};
  return ReleaseFreePages(pending);
}

Status KVCache::Impl::CheckInvariants() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto broken = [](const std::string& what) {
    return Status::Internal("KVCache invariant broken: " + what);
  };
  NANOKV_RETURN_IF_ERROR(blocks_.CheckInvariants());
  std::vector<uint32_t> refs(g_.groups_per_layer, 0);
  size_t blocks = 0, runs = 0;
  for (const auto& [id, seq] : sequences_) {
    size_t capacity = seq.table.size() * g_.config.block_size;
    if (seq.tokens > capacity || (seq.tokens == 0 ? capacity != 0
                                                  : capacity >= seq.tokens + g_.config.block_size))
      return broken("4: request " + std::to_string(id) + " has " + std::to_string(seq.tokens) +
                    " tokens in " + std::to_string(seq.table.size()) + " blocks");
    size_t in_runs = 0;
    for (cache::BlockRun run : seq.runs) {
      if (!blocks_.IsAllocated(run)) return broken("4: a run the allocator does not hold");
      for (size_t b = run.first; b < size_t{run.first} + run.count; ++b) {
        if (seq.table[in_runs++] != b) return broken("4: a table that is not its runs");
        g_.ForEachGroupRange(b, [&](size_t first, size_t n) {
          for (size_t g = first; g < first + n; ++g) ++refs[g];
        });
      }
    }
    if (in_runs != seq.table.size()) return broken("4: a table longer than its runs");
    blocks += in_runs;
    runs += seq.runs.size();
  }
  size_t in_reserve = 0;
  for (cache::BlockRun run : reserve_) {
    if (!blocks_.IsAllocated(run)) return broken("4: a reserve run the allocator does not hold");
    for (size_t b = run.first; b < size_t{run.first} + run.count; ++b) {
      g_.ForEachGroupRange(b, [&](size_t first, size_t n) {
        for (size_t g = first; g < first + n; ++g) ++refs[g];
      });
    }
    in_reserve += run.count;
  }
  if (in_reserve != reserve_blocks_ || in_reserve > g_.config.reserve_high_blocks)
    return broken("5: the reserve holds " + std::to_string(in_reserve) + " blocks, counted " +
                  std::to_string(reserve_blocks_));
  blocks += in_reserve;
  runs += reserve_.size();
  if (blocks != blocks_.used_blocks() || runs != blocks_.allocated_run_count())
    return broken("4: sequences and the reserve hold other blocks than the allocator's used ones");
  size_t kept = 0;
  for (size_t g = 0; g < refs.size(); ++g) {
    if (refs[g] != group_refs_[g]) return broken("1: group " + std::to_string(g) + "'s count");
    if (refs[g] > 0 && !group_mapped_[g]) return broken("2: group " + std::to_string(g));
    bool kept_here = group_mapped_[g] && refs[g] == 0;
    if (kept_here != (kept_free_.count(static_cast<uint32_t>(g)) == 1))
      return broken("3: group " + std::to_string(g));
    kept += kept_here;
  }
  if (kept > g_.config.keep_free_groups) return broken("3: too many kept groups");
  return Status::OK();
}

}  // namespace nanokv
