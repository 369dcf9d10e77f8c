// The C ABI of the prefix cache (nanokv/nanokv_prefix.h): a child handle of
// a store or cluster handle, its options, and its calls with every pointer
// and count checked before the cache sees them.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"
#include "nanokv/nanokv_prefix.h"

using nanokv::Code;
using nanokv::PrefixCache;
using nanokv::PrefixCacheOptions;
using nanokv::PrefixPlane;
using nanokv::Result;
using nanokv::Status;
using nanokv::capi::ClusterOf;
using nanokv::capi::Fail;
using nanokv::capi::ObjectsOf;
using nanokv::capi::PrefixOf;

namespace {

const char* Or(const char* s) { return s == nullptr ? "" : s; }

PrefixCacheOptions OptionsOf(const nanokv_prefix_options_t& o) {
  PrefixCacheOptions out;
  out.space = {Or(o.model), Or(o.dtype), Or(o.layout), Or(o.salt)};
  out.layout = {o.layers, o.planes_per_layer, o.token_bytes};
  out.chunk_tokens = o.chunk_tokens;
  out.preferred_device = o.preferred_device;
  out.cluster_write.preferred_segment = Or(o.preferred_segment);
  out.cluster_write.replica_num = o.replica_num == 0 ? 1 : o.replica_num;
  if (o.staging_bytes != 0) out.staging_bytes = o.staging_bytes;
  return out;
}

// The tokens as a span: the count is bounded before the pointer is looked at,
// so a hostile count is refused without a read.
Status TokensOf(const char* fn, const int32_t* tokens, size_t count, std::span<const int32_t>* out) {
  if (count == 0) return Status::InvalidArgument(std::string(fn) + ": no tokens");
  if (count > nanokv::kMaxPrefixTokens) {
    return Status::InvalidArgument(std::string(fn) + ": " + std::to_string(count) + " tokens (at most " +
                                   std::to_string(nanokv::kMaxPrefixTokens) + ")");
  }
  if (tokens == nullptr) return Status::InvalidArgument(std::string(fn) + ": tokens is null");
  *out = std::span<const int32_t>(tokens, count);
  return Status::OK();
}

Status PlanesOf(const char* fn, const nanokv_prefix_plane_t* planes, size_t count, std::vector<PrefixPlane>* out) {
  if (count > nanokv::kMaxPrefixPlanes) {
    return Status::InvalidArgument(std::string(fn) + ": " + std::to_string(count) + " planes (at most " +
                                   std::to_string(nanokv::kMaxPrefixPlanes) + ")");
  }
  if (count > 0 && planes == nullptr) return Status::InvalidArgument(std::string(fn) + ": planes is null");
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) out->push_back({planes[i].base, planes[i].capacity_tokens});
  return Status::OK();
}

int Adopt(Result<std::unique_ptr<PrefixCache>> made, nanokv_objects* objects, nanokv_cluster* cluster,
          nanokv_prefix_t** out) {
  if (!made.ok()) return Fail(made.status());
  auto handle = std::make_unique<nanokv_prefix>();
  handle->objects = objects;
  handle->cluster = cluster;
  handle->cache = std::move(made).value();
  if (objects != nullptr) objects->children.fetch_add(1);
  if (cluster != nullptr) cluster->children.fetch_add(1);
  nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kPrefix);
  *out = handle.release();
  return NANOKV_OK;
}

// A block table's entries as a span; PrefixCache checks the count against
// the chunks and planes before it reads one.
Status BlocksOf(const char* fn, void* const* blocks, size_t count, std::span<void* const>* out) {
  if (count > 0 && blocks == nullptr) return Status::InvalidArgument(std::string(fn) + ": blocks is null");
  *out = std::span<void* const>(blocks, count);
  return Status::OK();
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_prefix_options_init(nanokv_prefix_options_t* options) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(options);
    std::memset(options, 0, sizeof(*options));
    options->chunk_tokens = 256;
    options->planes_per_layer = 2;
    options->preferred_device = -1;
    options->replica_num = 1;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_open_objects(nanokv_objects_t* store, const nanokv_prefix_options_t* options,
                                          nanokv_prefix_t** out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(options);
    NANOKV_CAPI_NOT_NULL(out);
    return Adopt(PrefixCache::OnNode(s->store.get(), OptionsOf(*options)), s, nullptr, out);
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_open_cluster(nanokv_cluster_t* cluster, const nanokv_prefix_options_t* options,
                                          nanokv_prefix_t** out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(options);
    NANOKV_CAPI_NOT_NULL(out);
    return Adopt(PrefixCache::OnCluster(c->client.get(), OptionsOf(*options)), nullptr, c, out);
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_close(nanokv_prefix_t* cache) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    nanokv::capi::Unregister(p);
    if (p->objects != nullptr) p->objects->children.fetch_sub(1);
    if (p->cluster != nullptr) p->cluster->children.fetch_sub(1);
    delete p;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_object_key(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, size_t chunk,
                                        char* out, size_t capacity) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    NANOKV_CAPI_NOT_NULL(out);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    auto keys = p->cache->ChunkKeys(t);
    if (!keys.ok()) return Fail(keys.status());
    if (chunk >= keys->size()) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": chunk " + std::to_string(chunk) + " of " +
                                              std::to_string(keys->size()) + " chunks");
    }
    const std::string key = PrefixCache::ObjectKey((*keys)[chunk]);
    if (key.size() + 1 > capacity) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": the key takes " + std::to_string(key.size() + 1) +
                                              " bytes, capacity is " + std::to_string(capacity));
    }
    std::memcpy(out, key.c_str(), key.size() + 1);
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_lookup(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t* hit_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    NANOKV_CAPI_NOT_NULL(hit_out);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    auto hit = p->cache->Lookup(t);
    if (!hit.ok()) return Fail(hit.status());
    *hit_out = *hit;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_store(nanokv_prefix_t* cache, const int32_t* tokens, size_t count,
                                   const nanokv_prefix_plane_t* planes, size_t plane_count, uint64_t start,
                                   void* stream, uint64_t* written_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    std::vector<PrefixPlane> kv;
    if (Status s = PlanesOf(fn, planes, plane_count, &kv); !s.ok()) return Fail(s);
    auto written = p->cache->Store(t, kv, start, stream);
    if (!written.ok()) return Fail(written.status());
    if (written_out != nullptr) *written_out = *written;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_load(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t n,
                                  const nanokv_prefix_plane_t* planes, size_t plane_count, void* stream,
                                  uint64_t* loaded_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    NANOKV_CAPI_NOT_NULL(loaded_out);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    std::vector<PrefixPlane> into;
    if (Status s = PlanesOf(fn, planes, plane_count, &into); !s.ok()) return Fail(s);
    auto loaded = p->cache->Load(t, n, into, stream);
    if (!loaded.ok()) return Fail(loaded.status());
    *loaded_out = *loaded;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_store_blocks(nanokv_prefix_t* cache, const int32_t* tokens, size_t count,
                                          void* const* blocks, size_t block_count, uint64_t start, void* stream,
                                          uint64_t* written_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    std::span<void* const> table;
    if (Status s = BlocksOf(fn, blocks, block_count, &table); !s.ok()) return Fail(s);
    auto written = p->cache->StoreBlocks(t, table, start, stream);
    if (!written.ok()) return Fail(written.status());
    if (written_out != nullptr) *written_out = *written;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_load_blocks(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t n,
                                         void* const* blocks, size_t block_count, void* stream, uint64_t* loaded_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    NANOKV_CAPI_NOT_NULL(loaded_out);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    std::span<void* const> table;
    if (Status s = BlocksOf(fn, blocks, block_count, &table); !s.ok()) return Fail(s);
    auto loaded = p->cache->LoadBlocks(t, n, table, stream);
    if (!loaded.ok()) return Fail(loaded.status());
    *loaded_out = *loaded;
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

NANOKV_API int nanokv_prefix_views(nanokv_prefix_t* cache, const int32_t* tokens, size_t count, uint64_t n,
                                   nanokv_view_t** views, size_t capacity, size_t* count_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_prefix, p, PrefixOf, cache);
    NANOKV_CAPI_NOT_NULL(count_out);
    std::span<const int32_t> t;
    if (Status s = TokensOf(fn, tokens, count, &t); !s.ok()) return Fail(s);
    const uint64_t chunks = n / p->cache->chunk_tokens();
    if (chunks > capacity) {
      return Fail(Code::kInvalidArgument,
                  std::string(fn) + ": " + std::to_string(chunks) + " views, room for " + std::to_string(capacity));
    }
    if (capacity > 0) NANOKV_CAPI_NOT_NULL(views);
    auto got = p->cache->Views(t, n);
    if (!got.ok()) return Fail(got.status());
    for (size_t i = 0; i < got->size(); ++i) {
      auto handle = std::make_unique<nanokv_view>();
      handle->view = std::move((*got)[i]);
      nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kView);
      views[i] = handle.release();
    }
    *count_out = got->size();
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

}  // extern "C"
