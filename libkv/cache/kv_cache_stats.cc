// KVCache's counts and its readable dump.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "libkv/cache/kv_cache_impl.h"

namespace nanokv {

KVCacheStats KVCache::Impl::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KVCacheStats s;
  s.total_blocks = blocks_.total_blocks();
  s.used_blocks = blocks_.used_blocks() - reserve_blocks_;  // in sequences
  s.free_blocks = blocks_.free_blocks();
  s.largest_free_run = blocks_.largest_free_run();
  s.fragmentation = blocks_.fragmentation();
  s.sequences = sequences_.size();
  s.used_tokens = used_tokens_;
  s.block_bytes = block_bytes();
  s.page_bytes = g_.page_bytes;
  s.page_groups = g_.groups_per_layer;
  s.mapped_groups = static_cast<size_t>(
      std::count(group_mapped_.begin(), group_mapped_.end(), uint8_t{1}));
  s.kept_free_groups = kept_free_.size();
  s.mapped_pages = s.mapped_groups * pages_per_group();
  s.groups_mapped = groups_mapped_;
  s.groups_returned = groups_returned_;
  s.map_failures = map_failures_;
  s.reserve_blocks = reserve_blocks_;
  s.reserve_hits = reserve_hits_;
  s.reserve_refills = reserve_refills_;
  s.reserve_refill_failures = reserve_refill_failures_;
  return s;
}

std::string KVCache::Impl::DumpCacheStats() const {
  constexpr size_t kMaxListed = 64;
  const KVCacheStats s = Stats();
  const KVCacheConfig& c = g_.config;
  char line[256];
  std::string out = "=== KVCache ===\n";
  std::snprintf(line, sizeof(line),
                "config: device %d, %u layers, %u kv heads, head_dim %u, block_size %u, %s, %s\n",
                c.device, c.layers, c.kv_heads, c.head_dim, c.block_size, KVDataTypeName(c.dtype),
                KVLayoutName(c.layout));
  out += line;
  std::snprintf(line, sizeof(line),
                "geometry: %zu blocks of %zu bytes (K+V, all layers), page %zu bytes, "
                "%zu page groups a layer\n",
                s.total_blocks, s.block_bytes, s.page_bytes, s.page_groups);
  out += line;
  std::snprintf(line, sizeof(line),
                "blocks: %zu used, %zu free (longest run %zu), fragmentation %.3f\n",
                s.used_blocks, s.free_blocks, s.largest_free_run, s.fragmentation);
  out += line;
  std::snprintf(line, sizeof(line),
                "pages: %zu groups mapped (%zu pages, %.1f MiB), %zu kept free; "
                "%llu groups mapped and %llu returned since creation, %llu map failures\n",
                s.mapped_groups, s.mapped_pages,
                static_cast<double>(s.mapped_pages * s.page_bytes) / (1 << 20), s.kept_free_groups,
                static_cast<unsigned long long>(s.groups_mapped),
                static_cast<unsigned long long>(s.groups_returned),
                static_cast<unsigned long long>(s.map_failures));
  out += line;
  std::snprintf(line, sizeof(line),
                "reserve: %zu blocks (low %zu, high %zu); %llu hits, %llu refills, "
                "%llu refused\n",
                s.reserve_blocks, g_.config.reserve_low_blocks, g_.config.reserve_high_blocks,
                static_cast<unsigned long long>(s.reserve_hits),
                static_cast<unsigned long long>(s.reserve_refills),
                static_cast<unsigned long long>(s.reserve_refill_failures));
  out += line;
  std::snprintf(line, sizeof(line), "sequences: %zu, %zu tokens\n", s.sequences, s.used_tokens);
  out += line;

  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint64_t> ids;
  ids.reserve(sequences_.size());
  for (const auto& entry : sequences_) ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size() && i < kMaxListed; ++i) {
    const Sequence& seq = sequences_.at(ids[i]);
    out += "  request " + std::to_string(ids[i]) + ": " + std::to_string(seq.tokens) + "/" +
           std::to_string(seq.table.size() * c.block_size) + " tokens, blocks";
    for (cache::BlockRun run : seq.runs) {
      out += " [" + std::to_string(run.first) + ", +" + std::to_string(run.count) + ")";
    }
    out += '\n';
  }
  if (ids.size() > kMaxListed)
    out += "  ... " + std::to_string(ids.size() - kMaxListed) + " more\n";
  out += blocks_.DumpBlockMap();
  return out;
}

}  // namespace nanokv
