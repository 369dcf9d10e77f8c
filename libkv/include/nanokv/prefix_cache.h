// A token-prefix KV cache over the object store: a prompt whose prefix was
// computed before (a system prompt, a document, a previous turn) loads that
// prefix's K/V instead of recomputing it, on any engine of the node (the
// node's ObjectStore) or of the cluster (ClusterClient), with one API.
//
//   auto cache = nanokv::PrefixCache::OnNode(store.get(), {
//       .space = {.model = "llama-3-8b", .dtype = "bf16", .layout = "thd", .salt = tenant},
//       .layout = {.layers = 32, .planes_per_layer = 2, .token_bytes = 8 * 128 * 2}});
//   uint64_t hit = *(*cache)->Lookup(tokens);           // leading tokens stored
//   (*cache)->Load(tokens, hit, planes, stream);        // into the engine's K/V
//   ... prefill tokens [hit, n) ...
//   (*cache)->Store(tokens, planes, hit, stream);       // the new full chunks
//
// Tokens are cut in chunks of chunk_tokens. A chunk's key is a SHA-256 chain
// over every token before and in it, seeded with the namespace (model,
// dtype, layout, salt) and the K/V layout, so two models, layouts or
// tenants never share K/V by accident, and a key names the same chunk in
// every process, run and machine. Each chunk is one object, "kvc:<64 hex>",
// holding every plane's part of it (each layer's K and V) end to end, plane
// p at p * chunk_tokens * token_bytes: a prompt of 7k tokens on a model of
// 32 layers is 28 objects, not 1,792 (each object costs requests to kvd
// and the master, which per plane made a load 20x slower than its copies).
// A store gathers the planes into device scratch and puts that; a load gets
// into scratch and scatters (staging_bytes of it, kept by the cache).
// Eviction is the store's; a chunk whose predecessor is gone is no hit (the
// prefix stops there).
//
// The engine's K/V memory is given as planes (layers * planes_per_layer of
// them, layer-major): token t of a plane at base + t * token_bytes, so a
// chunk of a plane is contiguous. On cuda they are device addresses (the
// store's kernels move them); on the host backend, host memory.
//
// Anyone who knows a namespace (its salt included) can write chunks into it:
// the salt isolates tenants, it does not authenticate writers.
#ifndef NANOKV_PREFIX_CACHE_H_
#define NANOKV_PREFIX_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nanokv/cluster_client.h"
#include "nanokv/object_store.h"
#include "nanokv/status.h"

namespace nanokv {

// Hostile sizes are refused before anything is hashed or allocated.
inline constexpr uint64_t kMaxPrefixTokens = uint64_t{1} << 22;  // 4M tokens a prompt
inline constexpr uint32_t kMaxPrefixChunkTokens = 1u << 16;
inline constexpr uint32_t kMaxPrefixPlanes = 4096;          // layers * planes_per_layer
inline constexpr uint64_t kMaxPrefixTokenBytes = 1u << 20;  // one token of one plane
inline constexpr size_t kMaxPrefixNameBytes = 256;          // each namespace field

// Who may share K/V: equal namespaces (and layouts) share, any difference
// isolates. salt: the tenant's secret or id, "" for none.
struct PrefixNamespace {
  std::string model;
  std::string dtype;
  std::string layout;
  std::string salt;
};

// The shape of one token's K/V: planes_per_layer planes per layer (2: K and
// V; 1: an MLA latent, or K and V interleaved), token_bytes each.
struct PrefixLayout {
  uint32_t layers = 0;
  uint32_t planes_per_layer = 2;
  uint64_t token_bytes = 0;
};

struct PrefixCacheOptions {
  PrefixNamespace space;
  PrefixLayout layout;
  uint32_t chunk_tokens = 256;
  int preferred_device = -1;   // the node store's device for new chunks
  // Device scratch a store or load moves its chunks through, that many
  // bytes at a time (at least one chunk's object): memory of the planes'
  // device, kept by the cache between calls.
  uint64_t staging_bytes = uint64_t{256} << 20;
  WriteOptions cluster_write;  // the cluster's segment and replicas for new chunks
};

// One plane of the engine's K/V memory: token t at base + t * token_bytes,
// room for capacity_tokens tokens.
struct PrefixPlane {
  void* base = nullptr;
  uint64_t capacity_tokens = 0;
};

// What the cache needs of a store (prefix/prefix_backend.h has the two).
class PrefixBackend;
namespace prefix {
class Staging;  // its device scratch (prefix/prefix_staging.h)
}  // namespace prefix

class PrefixCache {
 public:
  // The store (or cluster) must outlive the cache. kInvalidArgument for a
  // namespace or layout out of bounds.
  static Result<std::unique_ptr<PrefixCache>> OnNode(ObjectStore* store, const PrefixCacheOptions& options);
  static Result<std::unique_ptr<PrefixCache>> OnCluster(ClusterClient* cluster, const PrefixCacheOptions& options);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The chain's hex digest of each full chunk of `tokens`, in order.
  Result<std::vector<std::string>> ChunkKeys(std::span<const int32_t> tokens) const;
  // The object key of a chunk (a ChunkKeys digest): every plane of it.
  static std::string ObjectKey(const std::string& chunk_key);

  // How many leading tokens are stored (a multiple of chunk_tokens): the
  // chunks READY, up to the first one that is not. One batched location
  // call.
  Result<uint64_t> Lookup(std::span<const int32_t> tokens);
  // Stores the full chunks of `tokens` from chunk start / chunk_tokens on
  // (those before were loaded, so they are stored), every plane, as one
  // batch per staging_bytes; a chunk already stored (by anyone) is left as
  // it is. Answers the chunks written. A failed chunk is the call's error
  // (naming it) after the others of its batch were tried: what was written
  // stays, the batches after it are not tried.
  Result<uint64_t> Store(std::span<const int32_t> tokens, std::span<const PrefixPlane> kv, uint64_t start,
                         void* stream = nullptr);
  // Loads the first n tokens' chunks (n a multiple of chunk_tokens, at most
  // Lookup's answer) into `into`, as one batch. Answers the tokens loaded:
  // n, or fewer where a chunk went since the lookup (the prefix up to it).
  Result<uint64_t> Load(std::span<const int32_t> tokens, uint64_t n, std::span<const PrefixPlane> into,
                        void* stream = nullptr);
  // Paged engines (a block table): Store and Load with one address per
  // (chunk, plane) instead of a plane's base. blocks[c * planes() + p]
  // holds chunk c of plane p (chunk_tokens tokens, token-major, as a plane's
  // chunk is): for every full chunk of `tokens` (StoreBlocks; the entries of
  // chunks before start's are not read and may be null) or for the first
  // n / chunk_tokens chunks (LoadBlocks). With chunk_tokens the engine's
  // block size, a block of each layer's K and V is one piece.
  Result<uint64_t> StoreBlocks(std::span<const int32_t> tokens, std::span<void* const> blocks, uint64_t start,
                               void* stream = nullptr);
  Result<uint64_t> LoadBlocks(std::span<const int32_t> tokens, uint64_t n, std::span<void* const> blocks,
                              void* stream = nullptr);
  // The first n tokens' chunks read in place, read-only (ObjectView, each
  // under a lease until it goes): a view per chunk, plane p of it at
  // data() + p * chunk_tokens * token_bytes.
  Result<std::vector<ObjectView>> Views(std::span<const int32_t> tokens, uint64_t n);

  uint32_t chunk_tokens() const { return options_.chunk_tokens; }
  uint32_t planes() const { return options_.layout.layers * options_.layout.planes_per_layer; }
  const PrefixCacheOptions& options() const { return options_; }
  // The bytes of a chunk's object: every plane's part of it.
  uint64_t chunk_object_bytes() const;
  // Where chunk `chunk` of plane `plane` lies in the engine's memory.
  using PieceAddress = std::function<std::byte*(size_t chunk, uint32_t plane)>;

 private:
  PrefixCache(std::unique_ptr<PrefixBackend> backend, const PrefixCacheOptions& options, std::string seed,
              std::string device_backend);
  static Result<std::unique_ptr<PrefixCache>> Make(std::unique_ptr<PrefixBackend> backend,
                                                   const PrefixCacheOptions& options);
  Status CheckTokens(const char* what, std::span<const int32_t> tokens) const;
  Status CheckPlanes(const char* what, std::span<const PrefixPlane> planes, uint64_t tokens) const;
  // Chunks a round of a store or load moves through the scratch.
  size_t ChunksPerRound() const;

  PieceAddress PlanePieces(std::span<const PrefixPlane> planes) const;
  PieceAddress BlockPieces(std::span<void* const> blocks) const;
  Status CheckBlocks(const char* what, std::span<void* const> blocks, size_t first, size_t chunks) const;
  // The chunk a store from token `start` begins at.
  Result<size_t> FirstToStore(std::span<const int32_t> tokens, uint64_t start) const;
  // The chunks of a load or views of the first n tokens (*chunks: every full
  // chunk's key).
  Result<size_t> ChunksToLoad(const char* what, std::span<const int32_t> tokens, uint64_t n,
                              std::vector<std::string>* chunks) const;
  // The moves: `near` is memory of the pieces' device, for the scratch.
  Result<uint64_t> StoreChunks(const std::vector<std::string>& chunks, size_t first, const PieceAddress& at,
                               const void* near, void* stream);
  Result<uint64_t> LoadChunks(const std::vector<std::string>& chunks, size_t count, const PieceAddress& at,
                              const void* near, void* stream);

  std::unique_ptr<PrefixBackend> backend_;
  PrefixCacheOptions options_;
  std::string seed_;  // the chain's seed: the namespace and the layout, hashed
  std::unique_ptr<prefix::Staging> staging_;
};

}  // namespace nanokv

#endif  // NANOKV_PREFIX_CACHE_H_
