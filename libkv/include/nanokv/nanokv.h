/* nanokv's C ABI: libnanokv.so, for Python (python/nanokv, through ctypes) and
 * any language with a C FFI. A thin layer over the C++ API (nanokv/client.h,
 * nanokv/kv_tensor.h); read those for what each call does in depth.
 *
 * Rules every function follows:
 *   - It returns an int: NANOKV_OK (0) or one of the NANOKV_* codes below
 *     (the values of nanokv::Code). Results come back through out-parameters,
 *     which are written only on success.
 *   - On failure, nanokv_last_error() gives a message for this thread's last
 *     failed call ("InvalidArgument: KVTensor of 0 bytes"). Successful calls
 *     leave it as it was.
 *   - No C++ exception crosses this boundary: one caught inside answers
 *     NANOKV_INTERNAL with its what() as the message.
 *   - Handles are opaque and checked: a null, never-made or already-freed
 *     handle answers NANOKV_INVALID_ARGUMENT ("unknown client handle"), never
 *     a crash. (A freed handle's address may be reused by a new handle; do not
 *     use a handle after freeing it.) Freeing a handle while another thread
 *     still calls through it is undefined.
 *   - Strings the library returns (tenant, backend name) live as long as
 *     their handle; messages from nanokv_last_error() until this thread's
 *     next failed call.
 *
 *   nanokv_client_t* client;
 *   nanokv_tensor_t* tensor;
 *   if (nanokv_attach_from_env(&client) != NANOKV_OK) puts(nanokv_last_error());
 *   nanokv_tensor_create(client, 0, 1ull << 30, &tensor);
 *   nanokv_tensor_grow(tensor, 16);   // 16 pages mapped at nanokv_tensor_data()
 *   ...                               // synchronize GPU work on the pages, then
 *   nanokv_tensor_destroy(tensor);
 *   nanokv_detach(client);
 */
#ifndef NANOKV_NANOKV_H_
#define NANOKV_NANOKV_H_

#include <stddef.h>
#include <stdint.h>

#if defined(NANOKV_CAPI_BUILD)
#define NANOKV_API __attribute__((visibility("default")))
#else
#define NANOKV_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: the values of nanokv::Code (nanokv/status.h). */
#define NANOKV_OK 0
#define NANOKV_INVALID_ARGUMENT 1     /* the caller asked for something malformed */
#define NANOKV_NOT_FOUND 2            /* no such page, device, tenant; nanokv not enabled */
#define NANOKV_ALREADY_EXISTS 3
#define NANOKV_OUT_OF_MEMORY 4        /* the device or host has no memory for it */
#define NANOKV_RESOURCE_EXHAUSTED 5   /* a limit kvd enforces: capacity, quota */
#define NANOKV_PERMISSION_DENIED 6    /* e.g. sharing a page of another group */
#define NANOKV_FAILED_PRECONDITION 7  /* right call, wrong state */
#define NANOKV_UNAVAILABLE 8          /* kvd not running or gone; no driver */
#define NANOKV_UNSUPPORTED 9          /* not built in (e.g. kernels without CUDA) */
#define NANOKV_IO_ERROR 10
#define NANOKV_PROTOCOL_ERROR 11
#define NANOKV_INTERNAL 12            /* a driver error, or a C++ exception caught */
#define NANOKV_UNIMPLEMENTED 13       /* not built yet: the message names what would do it */

/* Bumped when a struct below or a function's meaning changes. */
#define NANOKV_ABI_VERSION                                                    \
  9 /* 2: the cache's reserve fields; 3: the object store (nanokv_objects.h); \
      4: the cluster's device bytes (nanokv_cluster_put_from_device, ...);    \
      5: the KV highway: device batches on a stream, the stream-ordered put,  \
         views; host_id and access devices in nanokv_cluster_options_t,       \
         same_host in nanokv_replica_t;                                       \
      6: the prefix cache (nanokv_prefix.h);                                  \
      7: a prefix chunk is one object of every plane (its key, its view),     \
         staging_bytes in nanokv_prefix_options_t, the block-table calls;     \
      8: tier in nanokv_object_plan_info_t (a get reads the host tier);       \
      9: v2 slabs (nanokv_objects_use_slabs, nanokv_slab_t,                   \
         nanokv_cluster_use_slabs) */

typedef struct nanokv_client nanokv_client_t;
typedef struct nanokv_tensor nanokv_tensor_t;
typedef struct nanokv_cache nanokv_cache_t;

/* ------------------------------------------------------------------------ */
/* Errors and version */

/* This thread's last failure ("" if none). Never null. */
NANOKV_API const char* nanokv_last_error(void);
/* "InvalidArgument", "NotFound", ... ("Unknown" for other values). Never null. */
NANOKV_API const char* nanokv_code_name(int code);
/* NANOKV_ABI_VERSION of the library (compare with the header's). */
NANOKV_API int nanokv_abi_version(void);

/* ------------------------------------------------------------------------ */
/* Attach (nanokv::ClientOptions; fill with nanokv_options_init first) */

typedef struct nanokv_options {
  const char* ipc_name;        /* NULL or "": "nanokv" */
  const char* tenant;          /* NULL or "": "<program>-<pid>" */
  const char* group;           /* NULL or "": the uid's own ("uid:<uid>"); see groups: in kvd.yaml */
  uint64_t limit_bytes;        /* 0 with limit_fraction 0: kvd's default */
  double limit_fraction;       /* of kvd's capacity, used when limit_bytes is 0 */
  uint64_t expect_page_bytes;  /* 0: accept kvd's page size */
  const int* devices;          /* device_count ordinals; NULL/0: all of kvd's */
  size_t device_count;
  uint32_t request_timeout_ms; /* 0: wait until kvd answers or goes away */
} nanokv_options_t;

/* The C++ defaults (ipc "nanokv", 60 s timeout, everything else empty). */
NANOKV_API int nanokv_options_init(nanokv_options_t* options);
NANOKV_API int nanokv_attach(const nanokv_options_t* options, nanokv_client_t** client_out);
/* ENABLE_NANOKV=1, NANOKV_IPC_NAME, NANOKV_LIMIT, ... (nanokv/client.h).
 * NANOKV_NOT_FOUND when nanokv is not enabled in the environment. */
NANOKV_API int nanokv_attach_from_env(nanokv_client_t** client_out);
/* Tells kvd this tenant leaves (kvd takes back its pages) and frees the
 * handle. NANOKV_FAILED_PRECONDITION (and nothing done) while tensors or
 * caches made on this client still exist: destroy them first. */
NANOKV_API int nanokv_detach(nanokv_client_t* client);

/* ------------------------------------------------------------------------ */
/* Geometry */

typedef struct nanokv_device {
  int device;               /* kvd's ordinal */
  uint64_t page_bytes;
  uint32_t capacity_pages;
} nanokv_device_t;

NANOKV_API int nanokv_client_tenant_id(const nanokv_client_t* client, uint32_t* id_out);
NANOKV_API int nanokv_client_tenant(const nanokv_client_t* client, const char** name_out);
NANOKV_API int nanokv_client_backend(const nanokv_client_t* client, const char** name_out);
NANOKV_API int nanokv_client_page_bytes(const nanokv_client_t* client, uint64_t* bytes_out);
NANOKV_API int nanokv_client_limit_bytes(const nanokv_client_t* client, uint64_t* bytes_out);
NANOKV_API int nanokv_client_connected(const nanokv_client_t* client, int* connected_out);
NANOKV_API int nanokv_client_device_count(const nanokv_client_t* client, size_t* count_out);
/* NANOKV_INVALID_ARGUMENT for index >= the device count. */
NANOKV_API int nanokv_client_device(const nanokv_client_t* client, size_t index,
                                    nanokv_device_t* device_out);

/* ------------------------------------------------------------------------ */
/* Pages (Client::Grant / Share / Return / SetLimit) */

/* Grants `pages` new pages of `device`, all or none: their ids in ids_out
 * and, if generations_out is not NULL, their generations (both arrays hold
 * `pages` entries). NANOKV_RESOURCE_EXHAUSTED over the limit or capacity. */
NANOKV_API int nanokv_grant(nanokv_client_t* client, int device, uint32_t pages,
                            uint32_t* ids_out, uint32_t* generations_out);
/* Becomes a holder of pages of this tenant's group, by id. generations_out
 * (count entries) may be NULL. */
NANOKV_API int nanokv_share(nanokv_client_t* client, int device, const uint32_t* ids,
                            size_t count, uint32_t* generations_out);
NANOKV_API int nanokv_return(nanokv_client_t* client, int device, const uint32_t* ids,
                             size_t count);
/* Sets this tenant's limit; applied_out (may be NULL) gets what kvd applied. */
NANOKV_API int nanokv_set_limit(nanokv_client_t* client, uint64_t bytes, uint64_t* applied_out);
/* Pages kvd still wants back (reclaim notices less what was returned since). */
NANOKV_API int nanokv_pending_reclaim_pages(const nanokv_client_t* client, uint32_t* pages_out);

/* ------------------------------------------------------------------------ */
/* Synchronous copies through the backend: device pointers are mapped,
 * accessible addresses (nanokv_tensor_data() and up). */

NANOKV_API int nanokv_copy_to_device(nanokv_client_t* client, void* dst, const void* src,
                                     size_t bytes);
NANOKV_API int nanokv_copy_to_host(nanokv_client_t* client, void* dst, const void* src,
                                   size_t bytes);
NANOKV_API int nanokv_fill_device(nanokv_client_t* client, void* dst, uint8_t value,
                                  size_t bytes);

/* ------------------------------------------------------------------------ */
/* KV tensors (nanokv::KVTensor): a reserved range, pages mapped on demand.
 *
 * WARNING: unmap, shrink or destroy only after every GPU kernel and copy
 * that touches those pages has finished (synchronize the streams first):
 * unmapping memory a kernel still reads is undefined behaviour. */

/* Reserves `bytes` (rounded up to whole pages) for pages of `device`. */
NANOKV_API int nanokv_tensor_create(nanokv_client_t* client, int device, uint64_t bytes,
                                    nanokv_tensor_t** tensor_out);
/* Unmaps every page, returns them to kvd and frees the range and handle. */
NANOKV_API int nanokv_tensor_destroy(nanokv_tensor_t* tensor);

NANOKV_API int nanokv_tensor_map(nanokv_tensor_t* tensor, uint64_t first, uint64_t count);
/* Maps pages of this tenant's group, by kvd id, at index, index + 1, ... */
NANOKV_API int nanokv_tensor_map_shared(nanokv_tensor_t* tensor, uint64_t index, int device,
                                        const uint32_t* ids, size_t count);
NANOKV_API int nanokv_tensor_unmap(nanokv_tensor_t* tensor, uint64_t first, uint64_t count);
NANOKV_API int nanokv_tensor_grow(nanokv_tensor_t* tensor, uint64_t pages);
NANOKV_API int nanokv_tensor_shrink(nanokv_tensor_t* tensor, uint64_t pages);

/* The device pointer of page 0. Only mapped pages may be touched. */
NANOKV_API int nanokv_tensor_data(const nanokv_tensor_t* tensor, void** data_out);
NANOKV_API int nanokv_tensor_device(const nanokv_tensor_t* tensor, int* device_out);
NANOKV_API int nanokv_tensor_page_bytes(const nanokv_tensor_t* tensor, uint64_t* bytes_out);
/* Reserved pages (the range is page_count * page_bytes). */
NANOKV_API int nanokv_tensor_page_count(const nanokv_tensor_t* tensor, uint64_t* pages_out);
NANOKV_API int nanokv_tensor_mapped_pages(const nanokv_tensor_t* tensor, uint64_t* pages_out);
/* Mapped pages from index 0 up to the first unmapped one. */
NANOKV_API int nanokv_tensor_mapped_prefix(const nanokv_tensor_t* tensor, uint64_t* pages_out);
/* kvd's page ids at indices [first, first + count) into ids_out (count
 * entries); -1 where no page is mapped. */
NANOKV_API int nanokv_tensor_page_ids(const nanokv_tensor_t* tensor, uint64_t first,
                                      uint64_t count, int64_t* ids_out);

/* ------------------------------------------------------------------------ */
/* The block KV cache (nanokv::KVCache, nanokv/kv_cache.h, which states the
 * layout contract): sequences own blocks; K and V of every layer live in
 * kvd's pages, mapped when a block in them is first needed. Same warning as
 * for tensors: free sequences and destroy the cache only after the GPU work
 * on their blocks finished. */

/* Element types (nanokv::KVDataType) and layouts (nanokv::KVLayout). */
#define NANOKV_KV_FLOAT16 0
#define NANOKV_KV_BFLOAT16 1
#define NANOKV_KV_FLOAT32 2
#define NANOKV_KV_FLOAT8_E4M3 3
#define NANOKV_KV_UINT8 4
#define NANOKV_LAYOUT_BLOCK_MAJOR 0 /* per layer [blocks, heads, block_size, head_dim] */
#define NANOKV_LAYOUT_HEAD_MAJOR 1  /* per layer [heads, blocks, block_size, head_dim] */

typedef struct nanokv_cache_config {
  int device;
  uint32_t layers;
  uint32_t kv_heads;
  uint32_t head_dim;
  uint32_t block_size;        /* tokens per block */
  uint32_t dtype;             /* NANOKV_KV_* */
  uint32_t layout;            /* NANOKV_LAYOUT_* */
  uint64_t num_blocks;        /* per layer; 0: as many as max_bytes holds */
  uint64_t max_bytes;
  uint64_t keep_free_groups;  /* page groups kept mapped when freed */
  uint64_t reserve_low_blocks;   /* the reserve (KVCacheConfig): refill below this */
  uint64_t reserve_high_blocks;  /* ... up to this; 0: no reserve */
} nanokv_cache_config_t;

/* One layer's K or V as a kernel sees it; strides in elements. */
typedef struct nanokv_cache_view {
  void* data;               /* device pointer: the layer's region */
  uint32_t dtype;           /* NANOKV_KV_* */
  uint32_t layout;          /* NANOKV_LAYOUT_* */
  uint64_t element_bytes;
  int64_t shape[4];
  int64_t strides[4];
  int64_t block_stride;     /* the paged-append contract */
  int64_t head_stride;
  int64_t slot_stride;      /* = head_dim */
  uint32_t block_size;
} nanokv_cache_view_t;

typedef struct nanokv_cache_stats {
  uint64_t total_blocks, used_blocks, free_blocks, largest_free_run;
  double fragmentation;     /* 1 - largest_free_run / free_blocks */
  uint64_t sequences, used_tokens;
  uint64_t block_bytes, page_bytes;
  uint64_t page_groups, mapped_groups, kept_free_groups, mapped_pages;
  uint64_t groups_mapped, groups_returned, map_failures;
  uint64_t reserve_blocks, reserve_hits, reserve_refills, reserve_refill_failures;
} nanokv_cache_stats_t;

/* Defaults of nanokv::KVCacheConfig (block_size 16, bfloat16, block-major). */
NANOKV_API int nanokv_cache_config_init(nanokv_cache_config_t* config);
NANOKV_API int nanokv_cache_create(nanokv_client_t* client, const nanokv_cache_config_t* config,
                                   nanokv_cache_t** cache_out);
NANOKV_API int nanokv_cache_destroy(nanokv_cache_t* cache);

/* NANOKV_ALREADY_EXISTS for a known id; NANOKV_RESOURCE_EXHAUSTED when
 * blocks or kvd's pages run out (nothing changes then). */
NANOKV_API int nanokv_cache_allocate_for(nanokv_cache_t* cache, uint64_t request_id,
                                         uint64_t tokens);
/* One more token; its slot (block * block_size + offset) in slot_out. */
NANOKV_API int nanokv_cache_append_token(nanokv_cache_t* cache, uint64_t request_id,
                                         int64_t* slot_out);
NANOKV_API int nanokv_cache_append_tokens(nanokv_cache_t* cache, uint64_t request_id,
                                          uint64_t tokens);
NANOKV_API int nanokv_cache_free_for(nanokv_cache_t* cache, uint64_t request_id);
NANOKV_API int nanokv_cache_used_tokens(const nanokv_cache_t* cache, uint64_t request_id,
                                        uint64_t* tokens_out);
/* The sequence's blocks in token order: *count_out gets their number; they
 * are written to blocks_out when it holds that many (capacity entries),
 * else NANOKV_INVALID_ARGUMENT and nothing is written but *count_out. */
NANOKV_API int nanokv_cache_block_table(const nanokv_cache_t* cache, uint64_t request_id,
                                        uint32_t* blocks_out, size_t capacity, size_t* count_out);
NANOKV_API int nanokv_cache_slot_of(const nanokv_cache_t* cache, uint64_t request_id,
                                    uint64_t position, int64_t* slot_out);
NANOKV_API int nanokv_cache_k_view(const nanokv_cache_t* cache, uint32_t layer,
                                   nanokv_cache_view_t* view_out);
NANOKV_API int nanokv_cache_v_view(const nanokv_cache_t* cache, uint32_t layer,
                                   nanokv_cache_view_t* view_out);
/* Gives kept-free page groups back to kvd (kvd's reclaim); released_out
 * (may be NULL) gets the pages returned. */
NANOKV_API int nanokv_cache_release_free_pages(nanokv_cache_t* cache, uint64_t max_pages,
                                               uint64_t* released_out);
/* release_free_pages(what kvd still wants back: nanokv_pending_reclaim_pages);
 * for engines that poll kvd's reclaim between steps. */
NANOKV_API int nanokv_cache_release_pending_reclaim(nanokv_cache_t* cache, uint64_t* released_out);
NANOKV_API int nanokv_cache_num_blocks(const nanokv_cache_t* cache, uint64_t* blocks_out);
NANOKV_API int nanokv_cache_layer_stride_elements(const nanokv_cache_t* cache,
                                                  int64_t* elements_out);
NANOKV_API int nanokv_cache_get_stats(const nanokv_cache_t* cache, nanokv_cache_stats_t* stats_out);
/* DumpCacheStats(): valid until the next dump on this cache or its end. */
NANOKV_API int nanokv_cache_dump(nanokv_cache_t* cache, const char** text_out);

/* ------------------------------------------------------------------------ */
/* Paged K/V append (vLLM's reshape_and_cache) for one layer, enqueued on
 * `stream` (a cudaStream_t, or NULL for the default stream); returns without
 * waiting. kernels/kv_kernels.h states the exact contract. Built only where
 * the CUDA kernels are (nanokv_kernels_available()); else NANOKV_UNSUPPORTED. */

#define NANOKV_DTYPE_FLOAT16 0
#define NANOKV_DTYPE_BFLOAT16 1

typedef struct nanokv_paged_layout {
  int64_t num_blocks;
  int64_t num_heads;
  int64_t block_size;   /* tokens per block */
  int64_t head_dim;
  int64_t block_stride; /* elements */
  int64_t head_stride;  /* elements */
} nanokv_paged_layout_t;

typedef struct nanokv_append_input {
  const void* key;              /* [num_tokens, num_heads, head_dim], device */
  const void* value;
  int64_t key_token_stride;     /* elements between token rows */
  int64_t value_token_stride;
  const int64_t* slot_mapping;  /* device, num_tokens entries; < 0 skips */
  int64_t num_tokens;
  uint32_t dtype;               /* NANOKV_DTYPE_* */
} nanokv_append_input_t;

/* 1 when this library was built with the device kernels, else 0. */
NANOKV_API int nanokv_kernels_available(void);
/* Element (block, head, slot, d) at cache[block * block_stride + head *
 * head_stride + slot * head_dim + d]. bad_slots (a device int, may be NULL)
 * counts tokens whose slot lies beyond the cache. */
NANOKV_API int nanokv_paged_append(const nanokv_append_input_t* input,
                                   const nanokv_paged_layout_t* layout, void* key_cache,
                                   void* value_cache, void* stream, int* bad_slots);
/* FP8 E4M3 cache with one float scale per (token, head) entry. */
NANOKV_API int nanokv_paged_append_fp8(const nanokv_append_input_t* input,
                                       const nanokv_paged_layout_t* layout, uint8_t* key_cache,
                                       uint8_t* value_cache, float* key_scale, float* value_scale,
                                       void* stream, int* bad_slots);

/* ------------------------------------------------------------------------ */
/* The object store across nodes, through the cluster master (the C++ API:
 * nanokv/cluster_client.h). A copy on this process's node moves its bytes
 * through the local kvd; one on another node of this host (the same host_id)
 * through that node's kvd socket and pages; one on another host through that
 * node's transfer agent (UCX, its master.data_address). A plan's payload
 * pointer exists only for a copy on this host (NANOKV_UNIMPLEMENTED
 * otherwise). Batches answer
 * each item in results[i] (a NANOKV_* code) and return NANOKV_OK, or the
 * whole call's failure; nanokv_last_error() then names the first failed
 * item. */

typedef struct nanokv_cluster nanokv_cluster_t;
typedef struct nanokv_cluster_plan nanokv_cluster_plan_t;
typedef struct nanokv_cluster_pending nanokv_cluster_pending_t;
/* A READY object read in place (nanokv_objects_view, nanokv_cluster_view;
 * its calls are in nanokv_objects.h). */
typedef struct nanokv_view nanokv_view_t;

typedef struct nanokv_cluster_options {
  const char* const* masters;   /* "host:port" each; NULL/0: $NANOKV_MASTERS */
  size_t master_count;
  const char* token_file;       /* NULL: $NANOKV_TOKEN_FILE, else none */
  const char* tls_ca;           /* NULL: plaintext */
  const char* tls_cert;
  const char* tls_key;
  const char* node_id;          /* NULL: $NANOKV_NODE_ID, else the host name */
  const char* ipc_name;         /* the local kvd; NULL: $NANOKV_IPC_NAME, else "nanokv" */
  const char* backend;          /* NULL: $NANOKV_BACKEND, else auto */
  uint32_t request_timeout_ms;  /* 0: 10000 */
  const char* host_id;          /* this host (kvd's master.host_id); NULL: $NANOKV_HOST_ID, else the boot id */
  const int* access_devices;    /* devices given access to store pages mapped here; NULL/0: all */
  size_t access_device_count;
} nanokv_cluster_options_t;

typedef struct nanokv_write_options {
  const char* preferred_segment;  /* NULL/"": the master chooses; "<node>" or "<node>/<device>" */
  uint32_t replica_num;           /* 0 or 1: one copy */
} nanokv_write_options_t;

/* One READY copy, or one copy of a plan. Strings are copied in. */
typedef struct nanokv_replica {
  char node_id[64];
  char data_address[256];
  char device_uuid[65];
  int device;                   /* kvd's ordinal on that node */
  uint32_t epoch;
  int local;                    /* 1: on this process's node */
  int same_host;                /* 1: on another node of this host (through its kvd's socket) */
} nanokv_replica_t;

NANOKV_API int nanokv_cluster_connect(const nanokv_cluster_options_t* options, nanokv_cluster_t** out);
/* NANOKV_FAILED_PRECONDITION while plans or pending puts made on it are alive. */
NANOKV_API int nanokv_cluster_close(nanokv_cluster_t* cluster);

/* Puts through slabs of this node's store (ClusterClient::UseSlabs): device
 * puts with one replica and preferred segment "", this node or one of its
 * devices, up to payload_bytes, ask neither the master nor kvd; the master
 * learns of them from the node's events. 0 fields: the defaults (64 MiB,
 * 1024, 1024). flush: this node's kvd has indexed them. */
NANOKV_API int nanokv_cluster_use_slabs(nanokv_cluster_t* cluster, int device, uint64_t payload_bytes,
                                        uint32_t header_slots, uint32_t ring_records);
/* The same on "<node>/<device>", a node of this host (ClusterClient::
 * UseSlabsOn): puts with preferred segment "<node>" or "<node>/<device>" go
 * into that node's store through its kvd's socket and pages. */
NANOKV_API int nanokv_cluster_use_slabs_on(nanokv_cluster_t* cluster, const char* segment, uint64_t payload_bytes,
                                           uint32_t header_slots, uint32_t ring_records);
NANOKV_API int nanokv_cluster_flush_slab_puts(nanokv_cluster_t* cluster, uint32_t timeout_ms);
NANOKV_API int nanokv_cluster_put(nanokv_cluster_t* cluster, const char* key, const void* data, uint64_t bytes,
                                  const nanokv_write_options_t* options /* NULL: defaults */);
/* The object into out[0, capacity); *bytes_out its size. NANOKV_INVALID_ARGUMENT
 * (nothing copied, *bytes_out set) when it is larger than capacity. */
NANOKV_API int nanokv_cluster_get(nanokv_cluster_t* cluster, const char* key, void* out, uint64_t capacity,
                                  uint64_t* bytes_out);
/* Device bytes (ClusterClient::PutFromDevice / GetToDevice), a copy on any
 * node: a device address of this process's backend (the options' backend;
 * on the host backend, pages mapped here such as a KV tensor's), staged
 * through host memory with the backend's synchronous copy. No stream: finish
 * the GPU work on src (or still reading dst) first; both return once the
 * bytes moved. Memory the device does not reach, or a null address:
 * NANOKV_INVALID_ARGUMENT before anything moves. get_to_device:
 * NANOKV_INVALID_ARGUMENT (nothing copied) when the object is larger than
 * capacity; *bytes_out (may be NULL) its size on success. */
NANOKV_API int nanokv_cluster_put_from_device(nanokv_cluster_t* cluster, const char* key, const void* src,
                                              uint64_t bytes, const nanokv_write_options_t* options);
NANOKV_API int nanokv_cluster_get_to_device(nanokv_cluster_t* cluster, const char* key, void* dst,
                                            uint64_t capacity, uint64_t* bytes_out);
/* That backend's name ("cuda", "hip", "host"; opened on first use), as long
 * as the handle lives. */
NANOKV_API int nanokv_cluster_backend(nanokv_cluster_t* cluster, const char** name_out);
NANOKV_API int nanokv_cluster_remove(nanokv_cluster_t* cluster, const char* key);
/* Up to `capacity` READY copies, nearest first; *count_out how many exist. */
NANOKV_API int nanokv_cluster_locate(nanokv_cluster_t* cluster, const char* key, nanokv_replica_t* replicas,
                                     size_t capacity, size_t* count_out, uint64_t* bytes_out);

/* Plans: open, write (nanokv_cluster_plan_payload for a copy on this node),
 * commit or revoke, free. */
NANOKV_API int nanokv_cluster_open(nanokv_cluster_t* cluster, const char* key, uint64_t bytes,
                                   const nanokv_write_options_t* options, nanokv_cluster_plan_t** plan_out);
NANOKV_API int nanokv_cluster_plan_replicas(const nanokv_cluster_plan_t* plan, size_t* count_out);
NANOKV_API int nanokv_cluster_plan_replica(const nanokv_cluster_plan_t* plan, size_t index, nanokv_replica_t* out);
/* The copy's payload mapped in this process (contiguous), for a copy on this node. */
NANOKV_API int nanokv_cluster_plan_payload(nanokv_cluster_plan_t* plan, size_t index, void** data_out);
NANOKV_API int nanokv_cluster_commit(nanokv_cluster_plan_t* plan, int published_on_device);
NANOKV_API int nanokv_cluster_revoke(nanokv_cluster_plan_t* plan);
NANOKV_API int nanokv_cluster_plan_free(nanokv_cluster_plan_t* plan);

/* Batches (one request to the master each). */
NANOKV_API int nanokv_cluster_put_batch(nanokv_cluster_t* cluster, const char* const* keys,
                                        const void* const* data, const uint64_t* sizes, size_t count,
                                        const nanokv_write_options_t* options, int* results);
NANOKV_API int nanokv_cluster_get_batch(nanokv_cluster_t* cluster, const char* const* keys, void* const* outs,
                                        const uint64_t* capacities, size_t count, uint64_t* sizes, int* results);
NANOKV_API int nanokv_cluster_remove_batch(nanokv_cluster_t* cluster, const char* const* keys, size_t count,
                                           int* results);
/* plans_out[i] is a new plan where results[i] is NANOKV_OK, else NULL. */
NANOKV_API int nanokv_cluster_open_batch(nanokv_cluster_t* cluster, const char* const* keys, const uint64_t* sizes,
                                         size_t count, const nanokv_write_options_t* options,
                                         nanokv_cluster_plan_t** plans_out, int* results);
NANOKV_API int nanokv_cluster_commit_batch(nanokv_cluster_plan_t* const* plans, size_t count,
                                           int published_on_device, int* results);
NANOKV_API int nanokv_cluster_revoke_batch(nanokv_cluster_plan_t* const* plans, size_t count, int* results);
/* replicas: count * capacity entries, key i's at [i * capacity]; counts[i] how many exist. */
NANOKV_API int nanokv_cluster_locate_batch(nanokv_cluster_t* cluster, const char* const* keys, size_t count,
                                           nanokv_replica_t* replicas, size_t capacity, size_t* counts,
                                           uint64_t* sizes, int* results);

/* A request's KV as one batch (ClusterClient::BatchPutFromDevice /
 * BatchGetToDevice): one round trip to the master plans every put and one
 * commits them; copies on this host are moved by the GPU (kernels enqueued
 * on `stream`, a cudaStream_t of a device that reaches the buffers; NULL:
 * each copy picks one), those of other hosts over UCX; both return once the
 * bytes moved. A failed put item is revoked (nothing of it READY); the
 * others stand. Gets read this node's copies with no question to the
 * master; sizes[i] is the object's size where results[i] is NANOKV_OK, else
 * 0 (NANOKV_INVALID_ARGUMENT, nothing copied, when over capacities[i]). A
 * null srcs[i] / dsts[i] refuses the whole call. count 0: nothing done. */
NANOKV_API int nanokv_cluster_put_from_device_batch(nanokv_cluster_t* cluster, const char* const* keys,
                                                    const void* const* srcs, const uint64_t* sizes, size_t count,
                                                    const nanokv_write_options_t* options, void* stream,
                                                    int* results);
NANOKV_API int nanokv_cluster_get_to_device_batch(nanokv_cluster_t* cluster, const char* const* keys,
                                                  void* const* dsts, const uint64_t* capacities, size_t count,
                                                  void* stream, uint64_t* sizes, int* results);
/* The same put, stream-ordered: returns once the copies are enqueued on
 * `stream`, without waiting for them; READY is published on the device
 * after each object's last byte and a thread of the library commits once
 * the stream ran past them. The sources must stay as they are until
 * nanokv_cluster_pending_wait returns. A refusal of the whole batch (no
 * backend, a null pointer, count 0) returns its code and no handle. The
 * pending handle is the cluster's child: nanokv_cluster_close refuses while
 * it lives. */
NANOKV_API int nanokv_cluster_put_from_device_async(nanokv_cluster_t* cluster, const char* const* keys,
                                                    const void* const* srcs, const uint64_t* sizes, size_t count,
                                                    const nanokv_write_options_t* options, void* stream,
                                                    nanokv_cluster_pending_t** pending_out);
/* Waits until every item is committed or failed; results[i] (capacity >=
 * the batch's count) its code, as the batch calls answer. May be called
 * again (same answer). */
NANOKV_API int nanokv_cluster_pending_wait(nanokv_cluster_pending_t* pending, int* results, size_t capacity);
/* *done_out 1 when wait would answer at once; *count_out the batch's items. */
NANOKV_API int nanokv_cluster_pending_done(const nanokv_cluster_pending_t* pending, int* done_out);
NANOKV_API int nanokv_cluster_pending_count(const nanokv_cluster_pending_t* pending, size_t* count_out);
/* A cudaEvent_t recorded on the stream after the batch's device work (for
 * cudaStreamWaitEvent on another stream), as long as the handle lives; NULL
 * where the copies ran during the call (no kernels: the host backend). */
NANOKV_API int nanokv_cluster_pending_event(const nanokv_cluster_pending_t* pending, void** event_out);
/* Waits as nanokv_cluster_pending_wait does, then frees the handle. */
NANOKV_API int nanokv_cluster_pending_free(nanokv_cluster_pending_t* pending);

/* A view of a READY copy on this host (ClusterClient::View): this node's
 * first (no question to the master), else another node's of this host.
 * NANOKV_FAILED_PRECONDITION when every copy is on another host (move its
 * bytes with nanokv_cluster_get_to_device). The view is read through
 * nanokv_view_* (nanokv_objects.h) and may outlive the cluster handle.
 * view_batch: views[i] a new view where results[i] is NANOKV_OK, else NULL. */
NANOKV_API int nanokv_cluster_view(nanokv_cluster_t* cluster, const char* key, nanokv_view_t** view_out);
NANOKV_API int nanokv_cluster_view_batch(nanokv_cluster_t* cluster, const char* const* keys, size_t count,
                                         nanokv_view_t** views, int* results);

#ifdef __cplusplus
}  /* extern "C" */
#endif

/* The node object store: nanokv_objects_* (its own header, part of this one). */
#include "nanokv/nanokv_objects.h"

#endif /* NANOKV_NANOKV_H_ */
