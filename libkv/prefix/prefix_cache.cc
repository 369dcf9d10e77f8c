// PrefixCache (nanokv/prefix_cache.h): the bounds every call checks first,
// then lookups, stores, loads and views as one batch each over the backend.
#include "nanokv/prefix_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>

#include "libkv/prefix/prefix_backend.h"
#include "libkv/prefix/prefix_keys.h"
#include "libkv/prefix/prefix_staging.h"

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

// The copies between chunk `chunk` of each plane and its part of a chunk's
// object at `object` (into_planes: a load's scatter, else a store's gather).
std::vector<kernels::Copy> PlaneCopies(const PrefixCacheOptions& options, std::span<const PrefixPlane> planes,
                                       size_t chunk, std::byte* object, bool into_planes) {
  const uint64_t chunk_bytes = uint64_t{options.chunk_tokens} * options.layout.token_bytes;
  std::vector<kernels::Copy> copies;
  copies.reserve(planes.size());
  for (size_t p = 0; p < planes.size(); ++p) {
    std::byte* plane = static_cast<std::byte*>(planes[p].base) + chunk * chunk_bytes;
    std::byte* part = object + p * chunk_bytes;
    if (into_planes)
      copies.push_back({plane, part, chunk_bytes});
    else
      copies.push_back({part, plane, chunk_bytes});
  }
  return copies;
}

}  // namespace

PrefixCache::PrefixCache(std::unique_ptr<PrefixBackend> backend, const PrefixCacheOptions& options, std::string seed,
                         std::string device_backend)
    : backend_(std::move(backend)),
      options_(options),
      seed_(std::move(seed)),
      staging_(std::make_unique<prefix::Staging>(std::move(device_backend))) {}

PrefixCache::~PrefixCache() = default;

Result<std::unique_ptr<PrefixCache>> PrefixCache::Make(std::unique_ptr<PrefixBackend> backend,
                                                       const PrefixCacheOptions& options) {
  NANOKV_RETURN_IF_ERROR(CheckOptions(options));
  std::string seed = prefix::ChainSeed(options.space, options.layout, options.chunk_tokens);
  NANOKV_ASSIGN_OR_RETURN(std::string device_backend, backend->DeviceBackendName());
  return std::unique_ptr<PrefixCache>(
      new PrefixCache(std::move(backend), options, std::move(seed), std::move(device_backend)));
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

std::string PrefixCache::ObjectKey(const std::string& chunk_key) { return "kvc:" + chunk_key; }

uint64_t PrefixCache::chunk_object_bytes() const {
  return uint64_t{planes()} * options_.chunk_tokens * options_.layout.token_bytes;
}

size_t PrefixCache::ChunksPerRound() const {
  const uint64_t object = chunk_object_bytes();
  return static_cast<size_t>(std::max<uint64_t>(1, options_.staging_bytes / object));
}

Result<uint64_t> PrefixCache::Lookup(std::span<const int32_t> tokens) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  if (chunks.empty()) return uint64_t{0};
  std::vector<std::string> keys;
  keys.reserve(chunks.size());
  for (const std::string& chunk : chunks) keys.push_back(ObjectKey(chunk));
  NANOKV_ASSIGN_OR_RETURN(std::vector<bool> present, backend_->Exists(keys));
  const auto hit = std::find(present.begin(), present.end(), false) - present.begin();
  return static_cast<uint64_t>(hit) * options_.chunk_tokens;
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
  const uint64_t object_bytes = chunk_object_bytes();
  std::lock_guard lock(staging_->lock());
  NANOKV_ASSIGN_OR_RETURN(
      std::byte * scratch,
      staging_->Reserve(kv[0].base, std::min(chunks.size() - first, ChunksPerRound()) * object_bytes));
  uint64_t written = 0;
  // A round: its chunks' planes gathered into the scratch (waited for: the
  // put of another host reads it outside the stream), then put as one batch.
  for (size_t round = first; round < chunks.size(); round += ChunksPerRound()) {
    const size_t end = std::min(chunks.size(), round + ChunksPerRound());
    std::vector<kernels::Copy> gather;
    std::vector<PrefixPut> puts;
    for (size_t c = round; c < end; ++c) {
      std::byte* object = scratch + (c - round) * object_bytes;
      std::vector<kernels::Copy> planes = PlaneCopies(options_, kv, c, object, /*into_planes=*/false);
      gather.insert(gather.end(), planes.begin(), planes.end());
      puts.push_back({ObjectKey(chunks[c]), object, object_bytes});
    }
    Status gathered = staging_->Copy(gather, stream, /*wait=*/true);
    if (!gathered.ok()) return Status(gathered.code(), "prefix cache store: " + std::string(gathered.message()));
    std::vector<Status> done = backend_->Put(puts, stream);
    Status failed;
    for (size_t i = 0; i < done.size(); ++i) {
      if (done[i].ok()) ++written;
      // Stored already (another engine computed the same prefix): it stands.
      if (done[i].ok() || done[i].code() == Code::kAlreadyExists || !failed.ok()) continue;
      failed = Status(done[i].code(),
                      "prefix cache store: chunk " + std::to_string(round + i) + ": " + std::string(done[i].message()));
    }
    // What was written stays; the rounds after are not tried.
    if (!failed.ok()) return failed;
  }
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
  const uint64_t object_bytes = chunk_object_bytes();
  std::lock_guard lock(staging_->lock());
  NANOKV_ASSIGN_OR_RETURN(std::byte * scratch,
                          staging_->Reserve(into[0].base, std::min(count, ChunksPerRound()) * object_bytes));
  // A round: its chunks got into the scratch as one batch, then scattered
  // into the planes on the same stream (the next round's get is queued
  // after the scatter, which the last round waits for).
  size_t loaded = 0;
  for (size_t round = 0; round < count && loaded == round; round += ChunksPerRound()) {
    const size_t end = std::min(count, round + ChunksPerRound());
    std::vector<PrefixGet> gets;
    for (size_t c = round; c < end; ++c) {
      gets.push_back({ObjectKey(chunks[c]), scratch + (c - round) * object_bytes, object_bytes});
    }
    std::vector<Result<uint64_t>> got = backend_->Get(gets, stream);
    // The prefix ends at the first chunk gone since the lookup (or not whole).
    std::vector<kernels::Copy> scatter;
    for (size_t c = round; c < end && got[c - round].ok() && *got[c - round] == object_bytes; ++c, ++loaded) {
      std::vector<kernels::Copy> planes = PlaneCopies(options_, into, c, scratch + (c - round) * object_bytes, true);
      scatter.insert(scatter.end(), planes.begin(), planes.end());
    }
    const bool last = loaded < end || end == count;
    Status scattered = staging_->Copy(scatter, stream, /*wait=*/last);
    if (!scattered.ok()) return Status(scattered.code(), "prefix cache load: " + std::string(scattered.message()));
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
  std::vector<std::string> keys;
  for (size_t c = 0; c < n / options_.chunk_tokens; ++c) keys.push_back(ObjectKey(chunks[c]));
  std::vector<Result<ObjectView>> got = backend_->Views(keys);
  std::vector<ObjectView> views;
  views.reserve(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].ok()) {
      return Status(got[i].status().code(),
                    "prefix cache views: chunk " + std::to_string(i) + ": " + std::string(got[i].status().message()));
    }
    views.push_back(std::move(got[i]).value());
  }
  return views;
}

}  // namespace nanokv
