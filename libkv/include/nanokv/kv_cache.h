// The block KV cache: sequences (request ids) own KV blocks; K and V live in
// two KVTensors (nanokv/kv_tensor.h) reserved up front, whose pages kvd
// grants only when a block inside them is first needed and gets back when
// every block they hold is free.
//
//   KVCacheConfig config{.layers = 32, .kv_heads = 8, .head_dim = 128,
//                        .block_size = 16, .num_blocks = 4096};
//   auto cache = nanokv::KVCache::Create(*client, config);
//   (*cache)->AllocateFor(/*request_id=*/7, /*tokens=*/300);   // prefill
//   auto slot = (*cache)->AppendToken(7);                      // decode
//   auto k = (*cache)->KView(/*layer=*/3);                     // device view
//   (*cache)->FreeFor(7);
//
// Words: a *block* holds block_size tokens of every kv head, in every layer,
// for K and for V (one block id names all of them). A *slot* is one token's
// place: slot = block * block_size + offset, offset < block_size. A *page
// group* is the page at one index of every layer's region, in K and in V
// (2 * layers pages): pages are mapped and returned a group at a time,
// because one block id touches the same page index in every layer.
//
// Layout contract (what kernels, e.g. a paged K/V append, rely on). Each
// layer's K (and V) is one region at KView(layer).data; within it, in
// elements of dtype, the element of (slot s, head h, dim d) is at
//   (s / block_size) * block_stride + h * head_stride + (s % block_size) * slot_stride + d
// with slot_stride = head_dim and
//   kBlockMajor: per layer [blocks, heads, block_size, head_dim] (the whole
//     cache is [layers, blocks, heads, block_size, head_dim]):
//     block_stride = heads * block_size * head_dim, head_stride = block_size * head_dim
//   kHeadMajor:  per layer [heads, blocks, block_size, head_dim]:
//     block_stride = block_size * head_dim, head_stride = blocks * block_size * head_dim
// Layers are layer_stride_elements() apart (a whole number of pages, so each
// layer's region starts on a page). K and V have the same geometry. Only the
// blocks of live sequences are guaranteed mapped; touching any other is
// undefined (a fault on a GPU).
//
// Failures are values: out of blocks, or kvd refusing pages (over the
// tenant's quota, device full) is kResourceExhausted, and the call changes
// nothing. Nothing here aborts. All methods are thread-safe (one mutex);
// calls that need new pages wait for kvd under that mutex.
#ifndef NANOKV_KV_CACHE_H_
#define NANOKV_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nanokv/client.h"
#include "nanokv/status.h"

namespace nanokv {

enum class KVDataType : uint8_t { kFloat16, kBFloat16, kFloat32, kFloat8E4M3, kUInt8 };
size_t KVDataTypeBytes(KVDataType dtype);       // 2, 2, 4, 1, 1
const char* KVDataTypeName(KVDataType dtype);   // "float16", "bfloat16", ...

enum class KVLayout : uint8_t { kBlockMajor, kHeadMajor };
const char* KVLayoutName(KVLayout layout);  // "block_major", "head_major"

struct KVCacheConfig {
  int device = 0;  // kvd's ordinal
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t block_size = 16;  // tokens per block
  KVDataType dtype = KVDataType::kBFloat16;
  // Blocks per layer. 0: as many as max_bytes holds (K and V of all layers).
  size_t num_blocks = 0;
  size_t max_bytes = 0;
  KVLayout layout = KVLayout::kBlockMajor;
  // Page groups kept mapped when their last block is freed (a local
  // reserve: the next allocation there costs no request to kvd). 0 returns
  // each group to kvd at once. ReleaseFreePages gives them back on demand.
  size_t keep_free_groups = 0;
  // The reserve: blocks taken ahead with their pages mapped, so an
  // allocation that fits in it asks kvd for nothing, calls no driver and
  // searches no allocator (a hot grant). Freed blocks go back into it up to
  // reserve_high_blocks; when an allocation leaves fewer than
  // reserve_low_blocks (or none), a background thread refills it to
  // reserve_high_blocks with one grant. Its pages count against the
  // tenant's limit like any other; ReleaseFreePages gives up kept groups
  // first, then the reserve. reserve_high_blocks 0: no reserve, no thread.
  // low <= high <= the cache's blocks, else Create is kInvalidArgument.
  size_t reserve_low_blocks = 0;
  size_t reserve_high_blocks = 0;
};

// One layer's K or V as a kernel sees it. Strides are in elements.
struct KVCacheView {
  void* data = nullptr;  // device pointer: the layer's region
  KVDataType dtype = KVDataType::kBFloat16;
  size_t element_bytes = 0;
  KVLayout layout = KVLayout::kBlockMajor;
  // kBlockMajor: [blocks, heads, block_size, head_dim];
  // kHeadMajor:  [heads, blocks, block_size, head_dim].
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
  // The paged-append contract (see the top of this file).
  int64_t block_stride = 0;
  int64_t head_stride = 0;
  int64_t slot_stride = 0;  // = head_dim
  uint32_t block_size = 0;
};

struct KVCacheStats {
  size_t total_blocks = 0;
  size_t used_blocks = 0;      // in sequences (the reserve's are in neither count)
  size_t free_blocks = 0;
  size_t largest_free_run = 0;
  double fragmentation = 0;  // 1 - largest_free_run / free_blocks (0: none free)
  size_t sequences = 0;
  size_t used_tokens = 0;      // over all sequences
  size_t block_bytes = 0;      // one block: K + V, all layers
  size_t page_bytes = 0;
  size_t page_groups = 0;      // per layer region, K and V alike
  size_t mapped_groups = 0;    // groups whose pages are mapped now
  size_t kept_free_groups = 0; // mapped, no live block in them (the reserve)
  size_t mapped_pages = 0;     // = mapped_groups * 2 * layers: what kvd granted us
  uint64_t groups_mapped = 0;    // since creation
  uint64_t groups_returned = 0;  // unmapped and given back to kvd
  uint64_t map_failures = 0;     // kvd refused or a map failed (allocation undone)
  size_t reserve_blocks = 0;       // taken ahead, mapped, in no sequence
  uint64_t reserve_hits = 0;       // allocations served from the reserve
  uint64_t reserve_refills = 0;    // background grants that refilled it
  uint64_t reserve_refill_failures = 0;  // refused (limit, device full); retried after a free
};

class KVCache {
 public:
  // Reserves K and V (layers * layer_stride bytes each); maps nothing.
  // `client` must remain live while the cache exists. kInvalidArgument for a
  // zero dimension, no size, more than 2^31 blocks, or a device kvd does not
  // serve.
  static Result<std::unique_ptr<KVCache>> Create(Client& client, const KVCacheConfig& config);

  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;
  // Every page goes back to kvd (errors logged). Stream work on the cache
  // must have finished (KVTensor's rule).
  ~KVCache();

  // A new sequence with room for `tokens` tokens (ceil(tokens / block_size)
  // blocks, one contiguous run when one is free, else several), all counted
  // as used. kAlreadyExists for a known id; kResourceExhausted when the
  // blocks or kvd's pages are not there (nothing changes then).
  Status AllocateFor(uint64_t request_id, size_t tokens);
  // One more token; a new block when the last one is full. Returns the new
  // token's slot. kNotFound for an unknown id; kResourceExhausted as above.
  Result<int64_t> AppendToken(uint64_t request_id);
  // `tokens` more tokens at once (chunked prefill); all or nothing.
  Status AppendTokens(uint64_t request_id, size_t tokens);
  // Frees the sequence's blocks; page groups left with no live block are
  // returned to kvd (or kept, up to keep_free_groups). kNotFound for an
  // unknown id. The blocks are free even when returning pages fails (kvd
  // gone): that error is returned.
  Status FreeFor(uint64_t request_id);

  Result<size_t> UsedTokens(uint64_t request_id) const;
  // The sequence's blocks in token order.
  Result<std::vector<uint32_t>> BlockTable(uint64_t request_id) const;
  // The slot of token `position` (0-based) of a sequence; kInvalidArgument
  // for a position at or past UsedTokens.
  Result<int64_t> SlotOf(uint64_t request_id, size_t position) const;
  bool Contains(uint64_t request_id) const;

  // One layer's K or V. kInvalidArgument for a layer out of range.
  Result<KVCacheView> KView(uint32_t layer) const;
  Result<KVCacheView> VView(uint32_t layer) const;

  // Unmaps kept-free page groups (no live block in them), then the
  // reserve's, until at least `max_pages` pages went back to kvd, or none
  // is left; returns the pages returned. The reserve is not refilled by a
  // grant again until blocks are freed. Answers kvd's reclaim: call it from Client::OnReclaim with the
  // notice's page count (and clear that callback before destroying the
  // cache), or poll with ReleasePendingReclaim. Pages holding live blocks
  // are never taken away.
  Result<size_t> ReleaseFreePages(size_t max_pages);
  // ReleaseFreePages(client.pending_reclaim_pages()); 0 when none is pending.
  Result<size_t> ReleasePendingReclaim();

  const KVCacheConfig& config() const;
  size_t num_blocks() const;
  size_t page_bytes() const;
  int64_t layer_stride_elements() const;  // K (and V) of layer l start l * this apart
  KVCacheStats Stats() const;
  // Configuration, counts, every sequence (the first 64), the block map.
  std::string DumpCacheStats() const;
  // OK, or kInternal naming the first broken invariant (kv_cache_impl.h
  // lists them). Walks every block: for tests and debugging.
  Status CheckInvariants() const;

  class Impl;  // libkv/cache/kv_cache_impl.h

 private:
  friend class LayerCacheHandle;
  explicit KVCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanokv

#endif  // NANOKV_KV_CACHE_H_
