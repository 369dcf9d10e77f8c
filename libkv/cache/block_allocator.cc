#include "libkv/cache/block_allocator.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <vector>

namespace nanokv::cache {
namespace {

std::string RunText(BlockRun run) {
  return "[" + std::to_string(run.first) + ", +" + std::to_string(run.count) + ")";
}

}  // namespace

Result<BlockAllocator> BlockAllocator::Create(size_t total_blocks) {
  if (total_blocks == 0 || total_blocks > kMaxBlocks) {
    return Status::InvalidArgument("a block allocator of " + std::to_string(total_blocks) +
                                   " blocks (1 to " + std::to_string(kMaxBlocks) + ")");
  }
  return BlockAllocator(static_cast<uint32_t>(total_blocks));
}

BlockAllocator::BlockAllocator(uint32_t total_blocks) : total_blocks_(total_blocks) {
  spare_runs_.reserve(kSpareNodes);
  spare_sizes_.reserve(kSpareNodes);
  InsertFree(0, total_blocks);
}

void BlockAllocator::PutRun(RunMap& map, BlockId first, uint32_t count) {
  if (spare_runs_.empty()) {
    map.emplace(first, count);
    return;
  }
  RunMap::node_type node = std::move(spare_runs_.back());
  spare_runs_.pop_back();
  node.key() = first;
  node.mapped() = count;
  map.insert(std::move(node));
}

void BlockAllocator::DropRun(RunMap& map, RunMap::iterator it) {
  if (spare_runs_.size() < kSpareNodes) {
    spare_runs_.push_back(map.extract(it));
  } else {
    map.erase(it);
  }
}

void BlockAllocator::PutSize(uint32_t count, BlockId first) {
  if (spare_sizes_.empty()) {
    free_by_size_.emplace(count, first);
    return;
  }
  SizeSet::node_type node = std::move(spare_sizes_.back());
  spare_sizes_.pop_back();
  node.value() = {count, first};
  free_by_size_.insert(std::move(node));
}

void BlockAllocator::DropSize(uint32_t count, BlockId first) {
  auto it = free_by_size_.find({count, first});
  if (spare_sizes_.size() < kSpareNodes) {
    spare_sizes_.push_back(free_by_size_.extract(it));
  } else {
    free_by_size_.erase(it);
  }
}

void BlockAllocator::InsertFree(BlockId first, uint32_t count) {
  PutRun(free_by_start_, first, count);
  PutSize(count, first);
  free_blocks_ += count;
}

void BlockAllocator::EraseFree(RunMap::iterator it) {
  free_blocks_ -= it->second;
  DropSize(it->second, it->first);
  DropRun(free_by_start_, it);
}

void BlockAllocator::ReshapeFree(RunMap::iterator it, BlockId first, uint32_t count) {
  SizeSet::node_type size = free_by_size_.extract({it->second, it->first});
  size.value() = {count, first};
  free_by_size_.insert(std::move(size));
  free_blocks_ = free_blocks_ - it->second + count;
  if (it->first == first) {
    it->second = count;
    return;
  }
  // A new start keeps the run between the same neighbours: insert at the
  // old place (the hint makes it O(1)).
  auto next = std::next(it);
  RunMap::node_type node = free_by_start_.extract(it);
  node.key() = first;
  node.mapped() = count;
  free_by_start_.insert(next, std::move(node));
}

Result<BlockRun> BlockAllocator::Allocate(uint32_t count) {
  if (count == 0 || count > total_blocks_) {
    return Status::InvalidArgument("allocate " + std::to_string(count) + " blocks of " +
                                   std::to_string(total_blocks_));
  }
  // Best fit: the shortest free run of at least `count`, the lowest start
  // among equals (so the outcome is deterministic, and the test's reference
  // model can predict it).
  auto fit = free_by_size_.lower_bound({count, 0});
  if (fit == free_by_size_.end()) {
    return Status::ResourceExhausted(
        "no run of " + std::to_string(count) + " free blocks: " + std::to_string(free_blocks_) +
        " of " + std::to_string(total_blocks_) + " free, the longest run " +
        std::to_string(largest_free_run()) +
        (free_blocks_ >= count ? " (fragmented)" : " (not enough free blocks)"));
  }
  const auto [length, first] = *fit;
  auto run = free_by_start_.find(first);
  if (length == count) {
    EraseFree(run);
  } else {
    ReshapeFree(run, first + count, length - count);  // carve from the front
  }
  PutRun(used_by_start_, first, count);
  return BlockRun{first, count};
}

Status BlockAllocator::Free(BlockRun run) {
  if (run.count == 0 || run.first >= total_blocks_ || run.count > total_blocks_ - run.first) {
    return Status::InvalidArgument("free " + RunText(run) + ": outside the allocator's " +
                                   std::to_string(total_blocks_) + " blocks");
  }
  auto used = used_by_start_.find(run.first);
  if (used == used_by_start_.end()) {
    return Status::NotFound("free " + RunText(run) +
                            ": no allocated run starts there (double free, or never allocated)");
  }
  if (used->second != run.count) {
    return Status::InvalidArgument("free " + RunText(run) + ": the run allocated there is " +
                                   RunText({run.first, used->second}));
  }
  DropRun(used_by_start_, used);

  // Merge with the free run right after and the one right before, if any:
  // the surviving run's nodes are reshaped in place.
  auto next = free_by_start_.lower_bound(run.first);
  const bool touches_next = next != free_by_start_.end() && next->first == run.first + run.count;
  auto prev = next == free_by_start_.begin() ? free_by_start_.end() : std::prev(next);
  const bool touches_prev =
      prev != free_by_start_.end() && prev->first + prev->second == run.first;
  if (touches_prev && touches_next) {
    const uint32_t count = prev->second + run.count + next->second;
    EraseFree(next);
    ReshapeFree(prev, prev->first, count);
  } else if (touches_prev) {
    ReshapeFree(prev, prev->first, prev->second + run.count);
  } else if (touches_next) {
    ReshapeFree(next, run.first, run.count + next->second);
  } else {
    InsertFree(run.first, run.count);
  }
  return Status::OK();
}

Status BlockAllocator::Split(BlockRun run, uint32_t at) {
  auto used = used_by_start_.find(run.first);
  if (used == used_by_start_.end() || used->second != run.count) {
    return Status::NotFound("split " + RunText(run) + ": no allocated run is exactly that");
  }
  if (at == 0 || at >= run.count) {
    return Status::InvalidArgument("split " + RunText(run) + " at " + std::to_string(at) +
                                   ": each part needs a block");
  }
  used->second = at;
  PutRun(used_by_start_, run.first + at, run.count - at);
  return Status::OK();
}

size_t BlockAllocator::largest_free_run() const {
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

double BlockAllocator::fragmentation() const {
  if (free_blocks_ == 0) return 0;
  return 1.0 - static_cast<double>(largest_free_run()) / static_cast<double>(free_blocks_);
}

bool BlockAllocator::IsAllocated(BlockRun run) const {
  auto used = used_by_start_.find(run.first);
  return used != used_by_start_.end() && used->second == run.count;
}

std::string BlockAllocator::DumpBlockMap(size_t width) const {
  constexpr size_t kMaxCells = 4096;
  constexpr size_t kMaxListedRuns = 16;
  width = std::max<size_t>(width, 8);
  char line[256];
  std::snprintf(line, sizeof(line),
                "BlockAllocator: %u blocks, %zu used, %zu free in %zu runs (longest %zu), "
                "%zu allocated runs, fragmentation %.3f\n",
                total_blocks_, used_blocks(), free_blocks_, free_run_count(), largest_free_run(),
                allocated_run_count(), fragmentation());
  std::string out = line;

  const size_t per_cell = (total_blocks_ + kMaxCells - 1) / kMaxCells;
  const size_t cells = (total_blocks_ + per_cell - 1) / per_cell;
  // How many blocks of each cell are free, from the free runs alone.
  std::string map(cells, 'X');
  std::vector<size_t> free_in_cell(cells, 0);
  for (const auto& [first, count] : free_by_start_) {
    for (size_t b = first; b < size_t{first} + count;) {
      size_t cell = b / per_cell;
      size_t cell_end = std::min((cell + 1) * per_cell, size_t{first} + count);
      free_in_cell[cell] += cell_end - b;
      b = cell_end;
    }
  }
  for (size_t cell = 0; cell < cells; ++cell) {
    size_t in_cell = std::min(per_cell, size_t{total_blocks_} - cell * per_cell);
    if (free_in_cell[cell] == in_cell) {
      map[cell] = '.';
    } else if (free_in_cell[cell] > 0) {
      map[cell] = ':';
    }
  }
  out += "  map (. free, X used";
  out += per_cell > 1 ? ", : mixed; one character = " + std::to_string(per_cell) + " blocks):\n"
                      : "):\n";
  for (size_t at = 0; at < cells; at += width) {
    std::snprintf(line, sizeof(line), "  %8zu ", at * per_cell);
    out += line;
    out.append(map, at, std::min(width, cells - at));
    out += '\n';
  }
  out += "  free runs:";
  size_t listed = 0;
  for (const auto& [first, count] : free_by_start_) {
    if (listed++ == kMaxListedRuns) {
      out += " ... (" + std::to_string(free_by_start_.size() - kMaxListedRuns) + " more)";
      break;
    }
    out += " " + RunText({first, count});
  }
  if (free_by_start_.empty()) out += " none";
  out += '\n';
  return out;
}

Status BlockAllocator::CheckInvariants() const {
  auto broken = [](const std::string& what) {
    return Status::Internal("BlockAllocator invariant broken: " + what);
  };
  if (free_by_size_.size() != free_by_start_.size()) {
    return broken("3: " + std::to_string(free_by_size_.size()) + " runs by size, " +
                  std::to_string(free_by_start_.size()) + " by start");
  }
  auto free_it = free_by_start_.begin();
  auto used_it = used_by_start_.begin();
  size_t at = 0, free_sum = 0, used_sum = 0;
  bool last_was_free = false;
  while (free_it != free_by_start_.end() || used_it != used_by_start_.end()) {
    bool take_free = used_it == used_by_start_.end() ||
                     (free_it != free_by_start_.end() && free_it->first < used_it->first);
    auto [first, count] = take_free ? *free_it : *used_it;
    if (count == 0) return broken("1: an empty run at " + std::to_string(first));
    if (first != at) {
      return broken("1: a run starts at " + std::to_string(first) + ", expected " +
                    std::to_string(at));
    }
    if (take_free) {
      if (last_was_free) return broken("2: free runs touch at " + std::to_string(first));
      if (free_by_size_.count({count, first}) == 0) {
        return broken("3: free run " + RunText({first, count}) + " missing by size");
      }
      free_sum += count;
      ++free_it;
    } else {
      used_sum += count;
      ++used_it;
    }
    last_was_free = take_free;
    at = size_t{first} + count;
  }
  if (at != total_blocks_) {
    return broken("1: runs end at " + std::to_string(at) + " of " +
                  std::to_string(total_blocks_));
  }
  if (free_sum != free_blocks_ || free_sum + used_sum != total_blocks_) {
    return broken("4: free " + std::to_string(free_sum) + " (counted " +
                  std::to_string(free_blocks_) + ") + used " + std::to_string(used_sum) +
                  " != " + std::to_string(total_blocks_));
  }
  return Status::OK();
}

}  // namespace nanokv::cache
