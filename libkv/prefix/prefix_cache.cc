// PrefixCache (nanokv/prefix_cache.h): the bounds every call checks first,
// then lookups, stores, loads and views as one batch each over the backend.
#include "nanokv/prefix_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>

#include "libkv/prefix/prefix_backend.h"
#include "libkv/prefix/prefix_keys.h"

namespace nanokv {
namespace {

Status CheckName(const char* field, const std::string& value) {
  if (value.size() > kMaxPrefixNameBytes) {
    return Status::InvalidArgument(std::string("prefix cache: namespace ") + field + " of " +
                                   std::to_string(value.size()) + " bytes (at most " +
                                   std::to_string(kMaxPrefixNameBytes) + ")");
  }
  return Status::OK();
}

Status CheckOptions(const PrefixCacheOptions& o) {
  NANOKV_RETURN_IF_ERROR(CheckName("model", o.space.model));
  NANOKV_RETURN_IF_ERROR(CheckName("dtype", o.space.dtype));
  NANOKV_RETURN_IF_ERROR(CheckName("layout", o.space.layout));
  NANOKV_RETURN_IF_ERROR(CheckName("salt", o.space.salt));
  if (o.space.model.empty()) {
    return Status::InvalidArgument("prefix cache: the namespace names no model (K/V of different models must not mix)");
  }
  if (o.chunk_tokens == 0 || o.chunk_tokens > kMaxPrefixChunkTokens) {
    return Status::InvalidArgument("prefix cache: chunk_tokens " + std::to_string(o.chunk_tokens) + " (1-" +
                                   std::to_string(kMaxPrefixChunkTokens) + ")");
  }
  const uint64_t planes = uint64_t{o.layout.layers} * o.layout.planes_per_layer;
  if (planes == 0 || planes > kMaxPrefixPlanes) {
    return Status::InvalidArgument("prefix cache: " + std::to_string(o.layout.layers) + " layers of " +
                                   std::to_string(o.layout.planes_per_layer) + " planes (1-" +
                                   std::to_string(kMaxPrefixPlanes) + " planes in all)");
  }
  if (o.layout.token_bytes == 0 || o.layout.token_bytes > kMaxPrefixTokenBytes) {
    return Status::InvalidArgument("prefix cache: token_bytes " + std::to_string(o.layout.token_bytes) + " (1-" +
                                   std::to_string(kMaxPrefixTokenBytes) + ")");
  }
  return Status::OK();
}

}  // namespace

PrefixCache::PrefixCache(std::unique_ptr<PrefixBackend> backend, const PrefixCacheOptions& options, std::string seed)
    : backend_(std::move(backend)), options_(options), seed_(std::move(seed)) {}

PrefixCache::~PrefixCache() = default;

Result<std::unique_ptr<PrefixCache>> PrefixCache::Make(std::unique_ptr<PrefixBackend> backend,
                                                       const PrefixCacheOptions& options) {
  NANOKV_RETURN_IF_ERROR(CheckOptions(options));
  std::string seed = prefix::ChainSeed(options.space, options.layout, options.chunk_tokens);
  return std::unique_ptr<PrefixCache>(new PrefixCache(std::move(backend), options, std::move(seed)));
}

Result<std::unique_ptr<PrefixCache>> PrefixCache::OnNode(ObjectStore* store, const PrefixCacheOptions& options) {
  if (store == nullptr) return Status::InvalidArgument("prefix cache: no object store");
  return Make(NodePrefixBackend(store, options.preferred_device), options);
}

Result<std::unique_ptr<PrefixCache>> PrefixCache::OnCluster(ClusterClient* cluster, const PrefixCacheOptions& options) {
  if (cluster == nullptr) return Status::InvalidArgument("prefix cache: no cluster client");
  return Make(ClusterPrefixBackend(cluster, options.cluster_write), options);
}

Status PrefixCache::CheckTokens(const char* what, std::span<const int32_t> tokens) const {
  if (tokens.empty()) return Status::InvalidArgument(std::string("prefix cache ") + what + ": no tokens");
  if (tokens.size() > kMaxPrefixTokens) {
    return Status::InvalidArgument(std::string("prefix cache ") + what + ": " + std::to_string(tokens.size()) +
                                   " tokens (at most " + std::to_string(kMaxPrefixTokens) + ")");
  }
  if (tokens.data() == nullptr) return Status::InvalidArgument(std::string("prefix cache ") + what + ": null tokens");
  return Status::OK();
}

Status PrefixCache::CheckPlanes(const char* what, std::span<const PrefixPlane> planes, uint64_t tokens) const {
  if (planes.size() != this->planes()) {
    return Status::InvalidArgument(std::string("prefix cache ") + what + ": " + std::to_string(planes.size()) +
                                   " planes given, the layout has " + std::to_string(this->planes()) + " (" +
                                   std::to_string(options_.layout.layers) + " layers of " +
                                   std::to_string(options_.layout.planes_per_layer) + ")");
  }
  for (size_t i = 0; i < planes.size(); ++i) {
    if (planes[i].base == nullptr) {
      return Status::InvalidArgument(std::string("prefix cache ") + what + ": plane " + std::to_string(i) +
                                     " has no memory");
    }
    if (planes[i].capacity_tokens < tokens) {
      return Status::InvalidArgument(std::string("prefix cache ") + what + ": plane " + std::to_string(i) + " holds " +
                                     std::to_string(planes[i].capacity_tokens) + " tokens, " + std::to_string(tokens) +
                                     " needed");
    }
  }
  return Status::OK();
}

Result<std::vector<std::string>> PrefixCache::ChunkKeys(std::span<const int32_t> tokens) const {
  NANOKV_RETURN_IF_ERROR(CheckTokens("keys", tokens));
  return prefix::ChainKeys(seed_, tokens, options_.chunk_tokens);
}

std::string PrefixCache::ObjectKey(const std::string& chunk_key, uint32_t plane) {
  return "kvp:" + chunk_key + ":" + std::to_string(plane);
}

std::vector<std::string> PrefixCache::ObjectKeys(const std::vector<std::string>& chunks, size_t first,
                                                 size_t last) const {
  std::vector<std::string> keys;
  keys.reserve((last - first) * planes());
  for (size_t c = first; c < last; ++c) {
    for (uint32_t p = 0; p < planes(); ++p) keys.push_back(ObjectKey(chunks[c], p));
  }
  return keys;
}

Result<uint64_t> PrefixCache::Lookup(std::span<const int32_t> tokens) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  if (chunks.empty()) return uint64_t{0};
  NANOKV_ASSIGN_OR_RETURN(std::vector<bool> present, backend_->Exists(ObjectKeys(chunks, 0, chunks.size())));
  uint64_t hit = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const auto first = present.begin() + static_cast<ptrdiff_t>(c * planes());
    if (!std::all_of(first, first + planes(), [](bool p) { return p; })) break;
    ++hit;
  }
  return hit * options_.chunk_tokens;
}

Result<uint64_t> PrefixCache::Store(std::span<const int32_t> tokens, std::span<const PrefixPlane> kv, uint64_t start,
                                    void* stream) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  if (start > tokens.size()) {
    return Status::InvalidArgument("prefix cache store: start " + std::to_string(start) + " is past the " +
                                   std::to_string(tokens.size()) + " tokens");
  }
  const size_t first = start / options_.chunk_tokens;
  if (first >= chunks.size()) return uint64_t{0};
  NANOKV_RETURN_IF_ERROR(CheckPlanes("store", kv, chunks.size() * uint64_t{options_.chunk_tokens}));
  const uint64_t chunk_bytes = options_.chunk_tokens * options_.layout.token_bytes;
  std::vector<PrefixPut> puts;
  puts.reserve((chunks.size() - first) * planes());
  for (size_t c = first; c < chunks.size(); ++c) {
    for (uint32_t p = 0; p < planes(); ++p) {
      const auto* base = static_cast<const std::byte*>(kv[p].base);
      puts.push_back({ObjectKey(chunks[c], p), base + c * chunk_bytes, chunk_bytes});
    }
  }
  std::vector<Status> done = backend_->Put(puts, stream);
  uint64_t written = 0;
  Status first_error;
  for (size_t c = 0; c * planes() < done.size(); ++c) {
    const auto from = done.begin() + static_cast<ptrdiff_t>(c * planes());
    // Written: some plane new, and every other one there already.
    const bool stands =
        std::all_of(from, from + planes(), [](const Status& s) { return s.ok() || s.code() == Code::kAlreadyExists; });
    if (stands && std::any_of(from, from + planes(), [](const Status& s) { return s.ok(); })) ++written;
  }
  for (size_t i = 0; i < done.size(); ++i) {
    // Stored already (another engine computed the same prefix): it stands.
    if (done[i].ok() || done[i].code() == Code::kAlreadyExists) continue;
    if (first_error.ok()) {
      first_error =
          Status(done[i].code(), "prefix cache store: chunk " + std::to_string(first + i / planes()) + " plane " +
                                     std::to_string(i % planes()) + ": " + std::string(done[i].message()));
    }
  }
  if (!first_error.ok()) return first_error;
  return written;
}

Result<uint64_t> PrefixCache::Load(std::span<const int32_t> tokens, uint64_t n, std::span<const PrefixPlane> into,
                                   void* stream) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  if (n % options_.chunk_tokens != 0 || n / options_.chunk_tokens > chunks.size()) {
    return Status::InvalidArgument("prefix cache load: " + std::to_string(n) + " tokens is not a whole number of " +
                                   std::to_string(options_.chunk_tokens) + "-token chunks of the " +
                                   std::to_string(tokens.size()) + " tokens given");
  }
  const size_t count = n / options_.chunk_tokens;
  if (count == 0) return uint64_t{0};
  NANOKV_RETURN_IF_ERROR(CheckPlanes("load", into, n));
  const uint64_t chunk_bytes = options_.chunk_tokens * options_.layout.token_bytes;
  std::vector<PrefixGet> gets;
  gets.reserve(count * planes());
  for (size_t c = 0; c < count; ++c) {
    for (uint32_t p = 0; p < planes(); ++p) {
      auto* base = static_cast<std::byte*>(into[p].base);
      gets.push_back({ObjectKey(chunks[c], p), base + c * chunk_bytes, chunk_bytes});
    }
  }
  std::vector<Result<uint64_t>> got = backend_->Get(gets, stream);
  // The prefix ends at the first chunk a plane of which is gone (evicted
  // since the lookup) or is not a whole chunk.
  size_t loaded = 0;
  for (; loaded < count; ++loaded) {
    bool whole = true;
    for (uint32_t p = 0; p < planes() && whole; ++p) {
      const Result<uint64_t>& item = got[loaded * planes() + p];
      whole = item.ok() && *item == chunk_bytes;
    }
    if (!whole) break;
  }
  if (loaded < count) spdlog::debug("prefix cache: {} of {} chunks loaded (the rest went)", loaded, count);
  return loaded * uint64_t{options_.chunk_tokens};
}

Result<std::vector<ObjectView>> PrefixCache::Views(std::span<const int32_t> tokens, uint64_t n) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  if (n % options_.chunk_tokens != 0 || n / options_.chunk_tokens > chunks.size()) {
    return Status::InvalidArgument("prefix cache views: " + std::to_string(n) + " tokens is not a whole number of " +
                                   std::to_string(options_.chunk_tokens) + "-token chunks of the " +
                                   std::to_string(tokens.size()) + " tokens given");
  }
  std::vector<std::string> keys = ObjectKeys(chunks, 0, n / options_.chunk_tokens);
  std::vector<Result<ObjectView>> got = backend_->Views(keys);
  std::vector<ObjectView> views;
  views.reserve(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].ok()) {
      return Status(got[i].status().code(), "prefix cache views: chunk " + std::to_string(i / planes()) + " plane " +
                                                std::to_string(i % planes()) + ": " +
                                                std::string(got[i].status().message()));
    }
    views.push_back(std::move(got[i]).value());
  }
  return views;
}

}  // namespace nanokv
