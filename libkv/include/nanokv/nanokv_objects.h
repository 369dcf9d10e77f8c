/* The C ABI of the node object store (nanokv::ObjectStore, nanokv/object_store.h):
 * immutable objects by key in pages kvd holds (kvd's object_store config).
 * Part of nanokv.h (which includes this file) and its rules: NANOKV_* codes,
 * nanokv_last_error(), checked handles, out-parameters written on success.
 *
 *   nanokv_objects_t* store;
 *   nanokv_objects_open(NULL, &store);                       // ipc "nanokv"
 *   nanokv_objects_put_from_device(store, "sess:42:L0", kv, bytes, -1, stream);
 *   nanokv_objects_get_to_device(store, "sess:42:L0", dst, capacity, stream, &got);
 *   nanokv_objects_close(store);
 *
 * Device calls take device addresses (or memory the device reaches) and
 * `stream`, a cudaStream_t (NULL: the calling thread's current device when
 * it serves, else the object's); on the host backend "device" memory is host
 * memory. Nothing is staged through host memory on cuda. Batches answer
 * each item in results[i] (a NANOKV_* code) and return NANOKV_OK, or the
 * whole call's failure; nanokv_last_error() then names the first failed
 * item. A device get batch (and a view batch) leases its objects in one
 * request per 64 keys; a put is still its own requests per item. */
#ifndef NANOKV_NANOKV_OBJECTS_H_
#define NANOKV_NANOKV_OBJECTS_H_

#include "nanokv/nanokv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nanokv_objects nanokv_objects_t;
typedef struct nanokv_object_plan nanokv_object_plan_t;
typedef struct nanokv_slab nanokv_slab_t;

/* nanokv::ObjectStoreOptions; fill with nanokv_objects_options_init first. */
typedef struct nanokv_objects_options {
  const char* ipc_name;          /* NULL or "": "nanokv" */
  const char* backend;           /* NULL or "": $NANOKV_BACKEND, else kvd's */
  uint32_t request_timeout_ms;   /* 0: 60000 */
  uint32_t spin_us;              /* polling for a reply before blocking (0..10000) */
  int defer_lease_release;       /* 1: a get's lease ends with the next request */
  int ring;                      /* 1: requests without fds take kvd's ring */
  const int* access_devices;     /* this process's ordinals given access to mapped store pages */
  size_t access_device_count;
} nanokv_objects_options_t;

/* What a plan is (nanokv::ObjectPlan without its spans). */
typedef struct nanokv_object_plan_info {
  int device;                    /* kvd's ordinal */
  uint32_t epoch;
  uint64_t bytes_total;
  uint32_t state;                /* 1 RESERVED, 2 WRITING, 3 READY (nanokv/object_header.h) */
  uint32_t tier;                 /* where the copy is: 0 the device's store, 1 kvd's host tier (host
                                    memory, read-only: the payload is a host address, no header) */
} nanokv_object_plan_info_t;

/* The C++ defaults (ipc "nanokv", 60 s, spin 50 us, ring on). */
NANOKV_API int nanokv_objects_options_init(nanokv_objects_options_t* options);
/* options NULL: the defaults. NANOKV_UNAVAILABLE when kvd is not running,
 * NANOKV_FAILED_PRECONDITION when it runs no store (object_store.size 0). */
NANOKV_API int nanokv_objects_open(const nanokv_objects_options_t* options, nanokv_objects_t** out);
/* Unmaps every store page this handle mapped. NANOKV_FAILED_PRECONDITION
 * (nothing done) while plans made on it are alive. */
NANOKV_API int nanokv_objects_close(nanokv_objects_t* store);
/* kvd's backend ("cuda", "hip", "host"), as long as the handle lives. */
NANOKV_API int nanokv_objects_backend(const nanokv_objects_t* store, const char** name_out);
/* 1 when the device calls launch kernels here, 0 when they copy. */
NANOKV_API int nanokv_objects_uses_kernels(const nanokv_objects_t* store, int* out);

/* Host bytes. get: the object into out[0, capacity), *bytes_out its size;
 * NANOKV_INVALID_ARGUMENT (nothing copied, *bytes_out set) when larger. */
NANOKV_API int nanokv_objects_put(nanokv_objects_t* store, const char* key, const void* data, uint64_t bytes,
                                  int preferred_device);
NANOKV_API int nanokv_objects_get(nanokv_objects_t* store, const char* key, void* out, uint64_t capacity,
                                  uint64_t* bytes_out);
NANOKV_API int nanokv_objects_remove(nanokv_objects_t* store, const char* key);

/* Device bytes (ObjectStore::PutFromDevice / GetToDevice); both return once
 * the bytes moved. get_to_device: NANOKV_INVALID_ARGUMENT (nothing copied)
 * when the object is over capacity; bytes_out may be NULL. */
NANOKV_API int nanokv_objects_put_from_device(nanokv_objects_t* store, const char* key, const void* src,
                                              uint64_t bytes, int preferred_device, void* stream);
NANOKV_API int nanokv_objects_get_to_device(nanokv_objects_t* store, const char* key, void* dst,
                                            uint64_t capacity, void* stream, uint64_t* bytes_out);

/* Batches. The gets' sizes[i] is the object's size where results[i] is
 * NANOKV_OK (get_batch: also where it was over capacities[i]), else 0. */
NANOKV_API int nanokv_objects_put_batch(nanokv_objects_t* store, const char* const* keys,
                                        const void* const* data, const uint64_t* sizes, size_t count,
                                        int preferred_device, int* results);
NANOKV_API int nanokv_objects_get_batch(nanokv_objects_t* store, const char* const* keys, void* const* outs,
                                        const uint64_t* capacities, size_t count, uint64_t* sizes, int* results);
NANOKV_API int nanokv_objects_remove_batch(nanokv_objects_t* store, const char* const* keys, size_t count,
                                           int* results);
NANOKV_API int nanokv_objects_put_from_device_batch(nanokv_objects_t* store, const char* const* keys,
                                                    const void* const* srcs, const uint64_t* sizes, size_t count,
                                                    int preferred_device, void* stream, int* results);
NANOKV_API int nanokv_objects_get_to_device_batch(nanokv_objects_t* store, const char* const* keys,
                                                  void* const* dsts, const uint64_t* capacities, size_t count,
                                                  void* stream, uint64_t* sizes, int* results);

/* Plans: open_for_write, write bytes_total bytes at nanokv_objects_plan_payload
 * (contiguous, on the plan's device), commit or revoke, free. get_location's
 * plan is READY and its payload read-only (a write through it faults). */
NANOKV_API int nanokv_objects_open_for_write(nanokv_objects_t* store, const char* key, uint64_t bytes,
                                             int preferred_device, nanokv_object_plan_t** plan_out);
NANOKV_API int nanokv_objects_get_location(nanokv_objects_t* store, const char* key,
                                           nanokv_object_plan_t** plan_out);
NANOKV_API int nanokv_objects_plan_info(const nanokv_object_plan_t* plan, nanokv_object_plan_info_t* out);
NANOKV_API int nanokv_objects_plan_payload(nanokv_object_plan_t* plan, void** data_out);
/* The plan's 64-byte ObjectHeader, for kernels that publish READY themselves. */
NANOKV_API int nanokv_objects_plan_header(nanokv_object_plan_t* plan, void** header_out);
NANOKV_API int nanokv_objects_commit(nanokv_object_plan_t* plan, int published_on_device);
NANOKV_API int nanokv_objects_revoke(nanokv_object_plan_t* plan);
NANOKV_API int nanokv_objects_plan_free(nanokv_object_plan_t* plan);

/* Views (nanokv::ObjectView): a READY object read where it lies, no copy,
 * its pages mapped read-only in this process (a write through data faults),
 * under a lease kvd holds for the view: the object is neither evicted nor
 * removed until nanokv_view_free or this process's connection to kvd
 * closes. A view may outlive the store (or cluster) handle it came from.
 * kvd bounds the leases a uid holds (object_store.max_leases): each view is
 * one. view_batch asks kvd once per 64 keys; views[i] is a new view where
 * results[i] is NANOKV_OK, else NULL. */
NANOKV_API int nanokv_objects_view(nanokv_objects_t* store, const char* key, nanokv_view_t** view_out);
NANOKV_API int nanokv_objects_view_batch(nanokv_objects_t* store, const char* const* keys, size_t count,
                                         nanokv_view_t** views, int* results);
/* The object's bytes: a device address of this process's backend (host
 * memory on the host backend), read-only. */
NANOKV_API int nanokv_view_data(const nanokv_view_t* view, const void** data_out);
NANOKV_API int nanokv_view_size(const nanokv_view_t* view, uint64_t* bytes_out);
/* This process's ordinal of the device the bytes are on. */
NANOKV_API int nanokv_view_device(const nanokv_view_t* view, int* device_out);
/* Ends the lease (one request to kvd) and frees the handle: only after the
 * GPU work reading the bytes finished. */
NANOKV_API int nanokv_view_free(nanokv_view_t* view);
/* nanokv_view_free of `count` views (NULL entries skipped) in one request
 * to kvd per store they came from, not one each. */
NANOKV_API int nanokv_view_free_batch(nanokv_view_t* const* views, size_t count);

/* v2 slabs (nanokv::ObjectSlab, nanokv/device/slab.h). use_slabs: device
 * puts (put_from_device and its batch) of objects up to payload_bytes on
 * `device` then ask kvd nothing (ObjectStore::UseSlabs); kvd indexes each
 * within about a millisecond, and flush_slab_puts returns once it has
 * (NANOKV_UNAVAILABLE after timeout_ms). A 0 field takes its default
 * (64 MiB, 1024 slots, 1024 records). */
NANOKV_API int nanokv_objects_use_slabs(nanokv_objects_t* store, int device, uint64_t payload_bytes,
                                        uint32_t header_slots, uint32_t ring_records);
NANOKV_API int nanokv_objects_flush_slab_puts(nanokv_objects_t* store, uint32_t timeout_ms);

/* A slab for the producer's own kernel (ObjectStore::AcquireSlab): the
 * kernel allocates, writes and announces with nanokv/device/slab.h and
 * slab_publish.h (a SlabCursor copied to the device from `cursor`, the ring
 * at `ring` registered with the GPU, mapped). The handle may outlive the
 * store's; release ends the slab (what was announced stands, the rest goes
 * back) and frees the handle, only after the kernels writing it finished. */
typedef struct nanokv_object_slab_info {
  uint64_t id;
  int device;       /* kvd's ordinal */
  int local_device; /* this process's */
  uint64_t payload_bytes;
  uint32_t header_slots;
  uint32_t ring_records;
  uint32_t first_epoch; /* slot i's epoch: first_epoch + i */
  uint32_t page_bytes;
  uint64_t store_offset; /* the payload's offset in the owner's store range */
  uint64_t ttl_ms;       /* kvd's slab_ttl from the grant */
  void* payload;         /* device address of the first payload byte */
  void* headers;         /* device address of slot 0's 64-byte header */
  void* cursor;          /* host address of the nanokv::device::SlabCursor */
  void* ring;            /* host address of the announce ring */
} nanokv_object_slab_info_t;
NANOKV_API int nanokv_objects_acquire_slab(nanokv_objects_t* store, int device, uint64_t payload_bytes,
                                           uint32_t header_slots, uint32_t ring_records, nanokv_slab_t** slab_out);
NANOKV_API int nanokv_slab_info(const nanokv_slab_t* slab, nanokv_object_slab_info_t* out);
/* xxhash64 of the key, seed 0: what a header and an announce carry. */
NANOKV_API int nanokv_slab_key_hash(const char* key, uint64_t* hash_out);
NANOKV_API int nanokv_slab_release(nanokv_slab_t* slab);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* NANOKV_NANOKV_OBJECTS_H_ */
