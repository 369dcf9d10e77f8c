// The C ABI's v2 slabs: the store's slab puts (ObjectStore::UseSlabs,
// FlushSlabPuts) and a slab for the producer's own kernel (AcquireSlab).
#include <string>

#include "libkv/capi/capi_internal.h"

using nanokv::ObjectSlab;
using nanokv::SlabPutOptions;
using nanokv::Status;
using nanokv::capi::Check;
using nanokv::capi::ClusterOf;
using nanokv::capi::Fail;
using nanokv::capi::ObjectsOf;
using nanokv::capi::SlabOf;

namespace {

// 0 fields take SlabPutOptions' defaults.
SlabPutOptions Shape(uint64_t payload_bytes, uint32_t header_slots, uint32_t ring_records) {
  SlabPutOptions options;
  if (payload_bytes != 0) options.payload_bytes = payload_bytes;
  if (header_slots != 0) options.header_slots = header_slots;
  if (ring_records != 0) options.ring_records = ring_records;
  return options;
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_objects_use_slabs(nanokv_objects_t* store, int device, uint64_t payload_bytes,
                                        uint32_t header_slots, uint32_t ring_records) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    return Check(s->store->UseSlabs(device, Shape(payload_bytes, header_slots, ring_records)));
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_flush_slab_puts(nanokv_objects_t* store, uint32_t timeout_ms) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    return Check(s->store->FlushSlabPuts(timeout_ms));
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_use_slabs(nanokv_cluster_t* cluster, int device, uint64_t payload_bytes,
                                        uint32_t header_slots, uint32_t ring_records) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    return Check(c->client->UseSlabs(device, Shape(payload_bytes, header_slots, ring_records)));
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_use_slabs_on(nanokv_cluster_t* cluster, const char* segment, uint64_t payload_bytes,
                                           uint32_t header_slots, uint32_t ring_records) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(segment);
    return Check(c->client->UseSlabsOn(segment, Shape(payload_bytes, header_slots, ring_records)));
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_flush_slab_puts(nanokv_cluster_t* cluster, uint32_t timeout_ms) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    return Check(c->client->FlushSlabPuts(timeout_ms));
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_acquire_slab(nanokv_objects_t* store, int device, uint64_t payload_bytes,
                                           uint32_t header_slots, uint32_t ring_records, nanokv_slab_t** slab_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(slab_out);
    const SlabPutOptions shape = Shape(payload_bytes, header_slots, ring_records);
    auto slab = s->store->AcquireSlab(device, shape.payload_bytes, shape.header_slots, shape.ring_records);
    if (!slab.ok()) return Fail(slab.status());
    auto handle = std::make_unique<nanokv_slab>();
    handle->slab = std::move(*slab);
    nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kSlab);
    *slab_out = handle.release();
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_slab_info(const nanokv_slab_t* slab, nanokv_object_slab_info_t* out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_slab, h, SlabOf, slab);
    NANOKV_CAPI_NOT_NULL(out);
    ObjectSlab& s = *h->slab;
    const nanokv::device::SlabGeometry g = s.geometry();
    *out = {};
    out->id = s.id();
    out->device = s.device();
    out->local_device = s.local_device();
    out->payload_bytes = s.payload_bytes();
    out->header_slots = s.header_slots();
    out->ring_records = s.cursor()->ring_records;
    out->first_epoch = g.first_epoch;
    out->page_bytes = g.page_bytes;
    out->store_offset = g.store_offset;
    out->ttl_ms = s.ttl_ms();
    out->payload = g.payload;
    out->headers = g.headers;
    out->cursor = s.cursor();
    out->ring = s.ring().header;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_slab_key_hash(const char* key, uint64_t* hash_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(hash_out);
    *hash_out = ObjectSlab::KeyHash(key);
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_slab_release(nanokv_slab_t* slab) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_slab, h, SlabOf, slab);
    nanokv::capi::Unregister(h);
    const Status released = h->slab->Release();
    delete h;
    return Check(released);
  }
  NANOKV_CAPI_END;
}

}  // extern "C"
