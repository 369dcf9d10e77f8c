// PrefixCache (nanokv/prefix_cache.h): the bounds every call checks first,
// then lookups, stores, loads and views as one batch each over the backend.
#include "nanokv/prefix_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
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

// The copies between chunk `chunk`'s pieces (`at`) and its object at
// `object`, plane p at p * chunk_bytes (into_pieces: a load's scatter, else
// a store's gather).
std::vector<kernels::Copy> PieceCopies(uint32_t planes, uint64_t chunk_bytes, const PrefixCache::PieceAddress& at,
                                       size_t chunk, std::byte* object, bool into_pieces) {
  std::vector<kernels::Copy> copies;
  copies.reserve(planes);
  for (uint32_t p = 0; p < planes; ++p) {
    std::byte* piece = at(chunk, p);
    std::byte* part = object + p * chunk_bytes;
    if (into_pieces)
      copies.push_back({piece, part, chunk_bytes});
    else
      copies.push_back({part, piece, chunk_bytes});
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

PrefixCache::PieceAddress PrefixCache::PlanePieces(std::span<const PrefixPlane> planes) const {
  const uint64_t chunk_bytes = uint64_t{options_.chunk_tokens} * options_.layout.token_bytes;
  return [planes, chunk_bytes](size_t chunk, uint32_t plane) {
    return static_cast<std::byte*>(planes[plane].base) + chunk * chunk_bytes;
  };
}

PrefixCache::PieceAddress PrefixCache::BlockPieces(std::span<void* const> blocks) const {
  const uint32_t n = planes();
  return [blocks, n](size_t chunk, uint32_t plane) { return static_cast<std::byte*>(blocks[chunk * n + plane]); };
}

Status PrefixCache::CheckBlocks(const char* what, std::span<void* const> blocks, size_t first, size_t chunks) const {
  if (blocks.size() != chunks * planes()) {
    return Status::InvalidArgument(std::string("prefix cache ") + what + ": " + std::to_string(blocks.size()) +
                                   " blocks given, " + std::to_string(chunks) + " chunks of " +
                                   std::to_string(planes()) + " planes need " + std::to_string(chunks * planes()));
  }
  for (size_t i = first * planes(); i < blocks.size(); ++i) {
    if (blocks[i] == nullptr) {
      return Status::InvalidArgument(std::string("prefix cache ") + what + ": block " + std::to_string(i) + " (chunk " +
                                     std::to_string(i / planes()) + ", plane " + std::to_string(i % planes()) +
                                     ") has no memory");
    }
  }
  return Status::OK();
}

Result<uint64_t> PrefixCache::Store(std::span<const int32_t> tokens, std::span<const PrefixPlane> kv, uint64_t start,
                                    void* stream) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  NANOKV_ASSIGN_OR_RETURN(size_t first, FirstToStore(tokens, start));
  if (first >= chunks.size()) return uint64_t{0};
  NANOKV_RETURN_IF_ERROR(CheckPlanes("store", kv, chunks.size() * uint64_t{options_.chunk_tokens}));
  return StoreChunks(chunks, first, PlanePieces(kv), kv[0].base, stream);
}

Result<uint64_t> PrefixCache::StoreBlocks(std::span<const int32_t> tokens, std::span<void* const> blocks,
                                          uint64_t start, void* stream) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<std::string> chunks, ChunkKeys(tokens));
  NANOKV_ASSIGN_OR_RETURN(size_t first, FirstToStore(tokens, start));
  if (first >= chunks.size()) return uint64_t{0};
  NANOKV_RETURN_IF_ERROR(CheckBlocks("store", blocks, first, chunks.size()));
  return StoreChunks(chunks, first, BlockPieces(blocks), blocks[first * planes()], stream);
}

Result<size_t> PrefixCache::FirstToStore(std::span<const int32_t> tokens, uint64_t start) const {
  if (start > tokens.size()) {
    return Status::InvalidArgument("prefix cache store: start " + std::to_string(start) + " is past the " +
                                   std::to_string(tokens.size()) + " tokens");
  }
  return static_cast<size_t>(start / options_.chunk_tokens);
}

Result<uint64_t> PrefixCache::StoreChunks(const std::vector<std::string>& chunks, size_t first, const PieceAddress& at,
                                          const void* near, void* stream) {
  const uint64_t object_bytes = chunk_object_bytes();
  const uint64_t chunk_bytes = uint64_t{options_.chunk_tokens} * options_.layout.token_bytes;
  std::lock_guard lock(staging_->lock());
  NANOKV_ASSIGN_OR_RETURN(std::byte * scratch,
                          staging_->Reserve(near, std::min(chunks.size() - first, ChunksPerRound()) * object_bytes));
  uint64_t written = 0;
  // A round: its chunks' pieces gathered into the scratch (waited for: the
  // put of another host reads it outside the stream), then put as one batch.
  for (size_t round = first; round < chunks.size(); round += ChunksPerRound()) {
    const size_t end = std::min(chunks.size(), round + ChunksPerRound());
    std::vector<kernels::Copy> gather;
    std::vector<PrefixPut> puts;
    for (size_t c = round; c < end; ++c) {
      std::byte* object = scratch + (c - round) * object_bytes;
      std::vector<kernels::Copy> pieces = PieceCopies(planes(), chunk_bytes, at, c, object, /*into_pieces=*/false);
      gather.insert(gather.end(), pieces.begin(), pieces.end());
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

Result<size_t> PrefixCache::ChunksToLoad(const char* what, std::span<const int32_t> tokens, uint64_t n,
                                         std::vector<std::string>* chunks) const {
  NANOKV_ASSIGN_OR_RETURN(*chunks, ChunkKeys(tokens));
  if (n % options_.chunk_tokens != 0 || n / options_.chunk_tokens > chunks->size()) {
    return Status::InvalidArgument(std::string("prefix cache ") + what + ": " + std::to_string(n) +
                                   " tokens is not a whole number of " + std::to_string(options_.chunk_tokens) +
                                   "-token chunks of the " + std::to_string(tokens.size()) + " tokens given");
  }
  return static_cast<size_t>(n / options_.chunk_tokens);
}

Result<uint64_t> PrefixCache::Load(std::span<const int32_t> tokens, uint64_t n, std::span<const PrefixPlane> into,
                                   void* stream) {
  std::vector<std::string> chunks;
  NANOKV_ASSIGN_OR_RETURN(size_t count, ChunksToLoad("load", tokens, n, &chunks));
  if (count == 0) return uint64_t{0};
  NANOKV_RETURN_IF_ERROR(CheckPlanes("load", into, n));
  return LoadChunks(chunks, count, PlanePieces(into), into[0].base, stream);
}

Result<uint64_t> PrefixCache::LoadBlocks(std::span<const int32_t> tokens, uint64_t n, std::span<void* const> blocks,
                                         void* stream) {
  std::vector<std::string> chunks;
  NANOKV_ASSIGN_OR_RETURN(size_t count, ChunksToLoad("load", tokens, n, &chunks));
  if (count == 0) return uint64_t{0};
  NANOKV_RETURN_IF_ERROR(CheckBlocks("load", blocks, 0, count));
  return LoadChunks(chunks, count, BlockPieces(blocks), blocks[0], stream);
}

Result<uint64_t> PrefixCache::LoadChunks(const std::vector<std::string>& chunks, size_t count, const PieceAddress& at,
                                         const void* near, void* stream) {
  const uint64_t object_bytes = chunk_object_bytes();
  const uint64_t chunk_bytes = uint64_t{options_.chunk_tokens} * options_.layout.token_bytes;
  std::lock_guard lock(staging_->lock());
  NANOKV_ASSIGN_OR_RETURN(std::byte * scratch,
                          staging_->Reserve(near, std::min(count, ChunksPerRound()) * object_bytes));
  // A round: its chunks got into the scratch as one batch, then scattered
  // into the pieces, waited for: the next round's get writes the scratch,
  // and a chunk in the host tier is copied there outside any stream.
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
      std::vector<kernels::Copy> pieces =
          PieceCopies(planes(), chunk_bytes, at, c, scratch + (c - round) * object_bytes, /*into_pieces=*/true);
      scatter.insert(scatter.end(), pieces.begin(), pieces.end());
    }
    Status scattered = staging_->Copy(scatter, stream, /*wait=*/true);
    if (!scattered.ok()) return Status(scattered.code(), "prefix cache load: " + std::string(scattered.message()));
  }
  if (loaded < count) spdlog::debug("prefix cache: {} of {} chunks loaded (the rest went)", loaded, count);
  return loaded * uint64_t{options_.chunk_tokens};
}

Result<std::vector<ObjectView>> PrefixCache::Views(std::span<const int32_t> tokens, uint64_t n) {
  std::vector<std::string> chunks;
  NANOKV_ASSIGN_OR_RETURN(size_t count, ChunksToLoad("views", tokens, n, &chunks));
  std::vector<std::string> keys;
  for (size_t c = 0; c < count; ++c) keys.push_back(ObjectKey(chunks[c]));
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
