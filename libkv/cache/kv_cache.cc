// KVCache: creation, the sequence calls and the views. The page groups
// behind the blocks are cache_pages.cc's; stats and the dump kv_cache_stats.cc's.
#include "nanokv/kv_cache.h"

#include <algorithm>
#include <string>

#include "libkv/cache/kv_cache_impl.h"

namespace nanokv {
namespace {

Status UnknownRequest(uint64_t request_id) {
  return Status::NotFound("KVCache: no sequence for request " + std::to_string(request_id));
}

size_t BlocksFor(size_t tokens, size_t block_size) {
  return tokens / block_size + (tokens % block_size != 0);
}

}  // namespace

Result<std::unique_ptr<KVCache>> KVCache::Create(Client& client, const KVCacheConfig& config) {
  NANOKV_ASSIGN_OR_RETURN(cache::CacheGeometry geometry,
                          cache::CacheGeometry::Make(config, client.page_bytes()));
  const size_t bytes = geometry.layer_stride_bytes * config.layers;
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<KVTensor> k,
                          KVTensor::Create(client, config.device, bytes));
  NANOKV_ASSIGN_OR_RETURN(std::unique_ptr<KVTensor> v,
                          KVTensor::Create(client, config.device, bytes));
  NANOKV_ASSIGN_OR_RETURN(cache::BlockAllocator blocks, cache::BlockAllocator::Create(geometry.num_blocks));
  auto impl = std::make_unique<Impl>(client, std::move(geometry), std::move(k), std::move(v),
                                     std::move(blocks));
  return std::unique_ptr<KVCache>(new KVCache(std::move(impl)));
}

KVCache::KVCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KVCache::~KVCache() = default;

Status KVCache::AllocateFor(uint64_t request_id, size_t tokens) {
  return impl_->AllocateFor(request_id, tokens);
}
Result<int64_t> KVCache::AppendToken(uint64_t request_id) {
  return impl_->AppendToken(request_id);
}
Status KVCache::AppendTokens(uint64_t request_id, size_t tokens) {
  return impl_->AppendTokens(request_id, tokens);
}
Status KVCache::FreeFor(uint64_t request_id) { return impl_->FreeFor(request_id); }
Result<size_t> KVCache::UsedTokens(uint64_t request_id) const {
  return impl_->UsedTokens(request_id);
}
Result<std::vector<uint32_t>> KVCache::BlockTable(uint64_t request_id) const {
  return impl_->BlockTable(request_id);
}
Result<int64_t> KVCache::SlotOf(uint64_t request_id, size_t position) const {
  return impl_->SlotOf(request_id, position);
}
bool KVCache::Contains(uint64_t request_id) const { return impl_->Contains(request_id); }
Result<KVCacheView> KVCache::KView(uint32_t layer) const { return impl_->View(impl_->k(), layer); }
Result<KVCacheView> KVCache::VView(uint32_t layer) const { return impl_->View(impl_->v(), layer); }
Result<size_t> KVCache::ReleaseFreePages(size_t max_pages) {
  return impl_->ReleaseFreePages(max_pages);
}
Result<size_t> KVCache::ReleasePendingReclaim() { return impl_->ReleasePendingReclaim(); }
const KVCacheConfig& KVCache::config() const { return impl_->geometry().config; }
size_t KVCache::num_blocks() const { return impl_->geometry().num_blocks; }
size_t KVCache::page_bytes() const { return impl_->geometry().page_bytes; }
int64_t KVCache::layer_stride_elements() const {
  const cache::CacheGeometry& g = impl_->geometry();
  return static_cast<int64_t>(g.layer_stride_bytes / g.element_bytes);
}
KVCacheStats KVCache::Stats() const { return impl_->Stats(); }
std::string KVCache::DumpCacheStats() const { return impl_->DumpCacheStats(); }
Status KVCache::CheckInvariants() const { return impl_->CheckInvariants(); }

KVCache::Impl::Impl(Client& client, cache::CacheGeometry geometry, std::unique_ptr<KVTensor> k,
                    std::unique_ptr<KVTensor> v, cache::BlockAllocator blocks)
    : client_(client),
      g_(std::move(geometry)),
      k_(std::move(k)),
      v_(std::move(v)),
      blocks_(std::move(blocks)),
      group_refs_(g_.groups_per_layer, 0),
      group_mapped_(g_.groups_per_layer, 0) {
  if (g_.config.reserve_high_blocks > 0) refill_thread_ = std::thread([this] { RefillLoop(); });
}

Status KVCache::Impl::GrowLocked(Sequence& seq, size_t tokens) {
  const size_t block_size = g_.config.block_size;
  const size_t have = seq.table.size();
  const size_t need = BlocksFor(seq.tokens + tokens, block_size);
  if (need > have) {
    NANOKV_ASSIGN_OR_RETURN(std::vector<cache::BlockRun> runs, TakeBlocksLocked(need - have));
    for (cache::BlockRun run : runs) {
      seq.runs.push_back(run);
      for (uint32_t i = 0; i < run.count; ++i) seq.table.push_back(run.first + i);
    }
  }
  seq.tokens += tokens;
  used_tokens_ += tokens;
  return Status::OK();
}

Status KVCache::Impl::AllocateFor(uint64_t request_id, size_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sequences_.count(request_id) != 0) {
    return Status::AlreadyExists("KVCache: request " + std::to_string(request_id) +
                                 " already has a sequence");
  }
  if (tokens > g_.num_blocks * g_.config.block_size) {
    return Status::ResourceExhausted("KVCache: " + std::to_string(tokens) +
                                     " tokens exceed the cache's " +
                                     std::to_string(g_.num_blocks * g_.config.block_size));
  }
  Sequence seq;
  NANOKV_RETURN_IF_ERROR(GrowLocked(seq, tokens));
  sequences_.emplace(request_id, std::move(seq));
  return Status::OK();
}

Status KVCache::Impl::AppendTokens(uint64_t request_id, size_t tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return UnknownRequest(request_id);
  if (tokens > g_.num_blocks * g_.config.block_size) {
    return Status::ResourceExhausted("KVCache: " + std::to_string(tokens) +
                                     " tokens exceed the cache");
  }
  return GrowLocked(it->second, tokens);
}

Result<int64_t> KVCache::Impl::AppendToken(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return UnknownRequest(request_id);
  Sequence& seq = it->second;
  NANOKV_RETURN_IF_ERROR(GrowLocked(seq, 1));
  const size_t position = seq.tokens - 1;
  const size_t block_size = g_.config.block_size;
  return static_cast<int64_t>(seq.table[position / block_size] * block_size +
                              position % block_size);
}

Status KVCache::Impl::FreeFor(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return UnknownRequest(request_id);
  std::vector<cache::BlockRun> runs = std::move(it->second.runs);
  used_tokens_ -= it->second.tokens;
  sequences_.erase(it);
  return GiveBackLocked(runs);
}

Result<size_t> KVCache::Impl::UsedTokens(uint64_t request_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return UnknownRequest(request_id);
  return it->second.tokens;
}

Result<std::vector<uint32_t>> KVCache::Impl::BlockTable(uint64_t request_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return UnknownRequest(request_id);
  return it->second.table;
}

Result<int64_t> KVCache::Impl::SlotOf(uint64_t request_id, size_t position) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sequences_.find(request_id);
  if (it == sequences_.end()) return UnknownRequest(request_id);
  const Sequence& seq = it->second;
  if (position >= seq.tokens) {
    return Status::InvalidArgument("KVCache: token " + std::to_string(position) + " of request " +
                                   std::to_string(request_id) + ", which has " +
                                   std::to_string(seq.tokens));
  }
  const size_t block_size = g_.config.block_size;
  return static_cast<int64_t>(seq.table[position / block_size] * block_size +
                              position % block_size);
}

bool KVCache::Impl::Contains(uint64_t request_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return sequences_.count(request_id) != 0;
}

Result<KVCacheView> KVCache::Impl::View(const KVTensor& tensor, uint32_t layer) const {
  if (layer >= g_.config.layers) {
    return Status::InvalidArgument("KVCache: layer " + std::to_string(layer) + " of " +
                                   std::to_string(g_.config.layers));
  }
  return g_.View(static_cast<char*>(tensor.data()) + layer * g_.layer_stride_bytes);
}

Status KVCache::Impl::FillBatch(std::span<const uint64_t> request_ids,
                                std::span<const uint32_t> new_tokens, BatchOut& out) const {
  if (!new_tokens.empty() && new_tokens.size() != request_ids.size()) {
    return Status::InvalidArgument("LayerCacheHandle: " + std::to_string(new_tokens.size()) +
                                   " new-token counts for " + std::to_string(request_ids.size()) +
                                   " requests");
  }
  const size_t block_size = g_.config.block_size;
  std::lock_guard<std::mutex> lock(mu_);
  out.new_tokens = 0;
  out.max_blocks = 0;
  out.max_context_len = 0;
  out.query_start[0] = 0;
  for (size_t i = 0; i < request_ids.size(); ++i) {
    auto it = sequences_.find(request_ids[i]);
    if (it == sequences_.end()) return UnknownRequest(request_ids[i]);
    const Sequence& seq = it->second;
    const size_t fresh = new_tokens.empty() ? 1 : new_tokens[i];
    if (seq.table.size() > out.table_stride || fresh > seq.tokens ||
        out.new_tokens + fresh > out.slot_capacity || seq.tokens > INT32_MAX) {
      return Status::InvalidArgument(
          "LayerCacheHandle: request " + std::to_string(request_ids[i]) + " (" +
          std::to_string(seq.tokens) + " tokens in " + std::to_string(seq.table.size()) +
          " blocks, " + std::to_string(fresh) + " new) does not fit the handle's limits (" +
          std::to_string(out.table_stride) + " blocks a row, " +
          std::to_string(out.slot_capacity) + " new tokens a batch)");
    }
    int32_t* row = out.block_table + i * out.table_stride;
    for (size_t b = 0; b < seq.table.size(); ++b) row[b] = static_cast<int32_t>(seq.table[b]);
    std::fill(row + seq.table.size(), row + out.table_stride, -1);
    out.context_lens[i] = static_cast<int32_t>(seq.tokens);
    for (size_t position = seq.tokens - fresh; position < seq.tokens; ++position) {
      out.slot_mapping[out.new_tokens++] =
          static_cast<int64_t>(seq.table[position / block_size] * block_size +
                               position % block_size);
    }
    out.query_start[i + 1] = static_cast<int32_t>(out.new_tokens);
    out.max_blocks = std::max(out.max_blocks, seq.table.size());
    out.max_context_len = std::max(out.max_context_len, static_cast<uint32_t>(seq.tokens));
  }
  return Status::OK();
}

}  // namespace nanokv
