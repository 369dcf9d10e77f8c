/* The prefix cache's C ABI (nanokv::PrefixCache, nanokv/prefix_cache.h):
 * tokens to stored K/V chunks over the node's object store or the cluster.
 *
 *   nanokv_prefix_options_t o;
 *   nanokv_prefix_options_init(&o);
 *   o.model = "llama-3-8b"; o.dtype = "bf16"; o.layout = "thd"; o.salt = tenant;
 *   o.layers = 32; o.planes_per_layer = 2; o.token_bytes = 8 * 128 * 2;
 *   nanokv_prefix_t* cache;
 *   nanokv_prefix_open_objects(store, &o, &cache);   // or _open_cluster
 *   nanokv_prefix_lookup(cache, tokens, n, &hit);
 *   nanokv_prefix_load(cache, tokens, n, hit, planes, 64, stream, &loaded);
 *   nanokv_prefix_store(cache, tokens, n, planes, 64, loaded, stream, &written);
 *   nanokv_prefix_close(cache);
 *
 * A prefix cache is a child of its store or cluster handle: close it first. */
#ifndef NANOKV_NANOKV_PREFIX_H_
#define NANOKV_NANOKV_PREFIX_H_

#include "nanokv/nanokv.h"
#include "nanokv/nanokv_objects.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nanokv_prefix nanokv_prefix_t;

/* nanokv::PrefixCacheOptions; fill with nanokv_prefix_options_init first. */
typedef struct nanokv_prefix_options {
  const char* model;     /* required: K/V of different models never mix */
  const char* dtype;     /* NULL: "" */
  const char* layout;    /* NULL: "" */
  const char* salt;      /* NULL: "" (the tenant's) */
  uint32_t chunk_tokens; /* 256 */
  uint32_t layers;
  uint32_t planes_per_layer;     /* 2: K and V */
  uint64_t token_bytes;          /* one token of one plane */
  int preferred_device;          /* node store: the device new chunks go to (-1: kvd's choice) */
  const char* preferred_segment; /* cluster: NULL or "": the master's choice */
  uint32_t replica_num;          /* cluster: 1 */
  uint64_t staging_bytes;        /* device scratch a store or load moves chunks through; 0: 256 MiB */
} nanokv_prefix_options_t;

/* One plane of the engine's K/V: token t at base + t * token_bytes. */
typedef struct nanokv_prefix_plane {
  void* base;
  uint64_t capacity_tokens;
} nanokv_prefix_plane_t;

NANOKV_API int nanokv_prefix_options_init(nanokv_prefix_options_t* options);
NANOKV_API int nanokv_prefix_open_objects(nanokv_objects_t* store, const nanokv_prefix_options_t* options,
                                          nanokv_prefix_t** out);
NANOKV_API int nanokv_prefix_open_cluster(nanokv_cluster_t* cluster, const nanokv_prefix_options_t* options,
                                          nanokv_prefix_t** out);
NANOKV_API int nanokv_prefix_close(nanokv_prefix_t* cache);

/* The object key (NUL-terminated, at most 128 bytes with it) of chunk
 * `chunk` of tokens[0, count): one object holds every plane of a chunk. */
NANOKV_API int nanokv_prefix_object_key(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, size_t chunk,
                                        char* out, size_t capacity);
/* The leading tokens stored (whole chunks), one batched location call. */
NANOKV_API int nanokv_prefix_lookup(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t* hit_out);
/* The full chunks from chunk start / chunk_tokens on, every plane, as one
 * batch; *written_out: the chunks written (those already stored stand). */
NANOKV_API int nanokv_prefix_store(nanokv_prefix_t* cache, const int32_t* tokens, size_t count,
                                   const nanokv_prefix_plane_t* planes, size_t plane_count, uint64_t start,
                                   void* stream, uint64_t* written_out);
/* The first n tokens' chunks into the planes; *loaded_out: the tokens
 * loaded (n, or fewer where a chunk went since the lookup). */
NANOKV_API int nanokv_prefix_load(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t n,
                                  const nanokv_prefix_plane_t* planes, size_t plane_count, void* stream,
                                  uint64_t* loaded_out);
/* Paged engines: store and load with a block table, blocks[c * planes + p]
 * holding chunk c of plane p (nanokv::PrefixCache::StoreBlocks/LoadBlocks):
 * every full chunk of the tokens for a store, the first n / chunk_tokens
 * chunks for a load; block_count must be that many times planes. */
NANOKV_API int nanokv_prefix_store_blocks(nanokv_prefix_t* cache, const int32_t* tokens, size_t count,
                                          void* const* blocks, size_t block_count, uint64_t start, void* stream,
                                          uint64_t* written_out);
NANOKV_API int nanokv_prefix_load_blocks(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t n,
                                         void* const* blocks, size_t block_count, void* stream, uint64_t* loaded_out);
/* The first n tokens' chunks read in place: views[i], one per chunk (plane
 * p of it at p * chunk_tokens * token_bytes), capacity of them at least
 * n / chunk_tokens; free each with nanokv_view_free. *count_out: the views
 * made. */
NANOKV_API int nanokv_prefix_views(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t n,
                                   nanokv_view_t** views, size_t capacity, size_t* count_out);

#ifdef __cplusplus
}
#endif

#endif /* NANOKV_NANOKV_PREFIX_H_ */
