// The C ABI's block KV cache calls (nanokv::KVCache).
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::capi::CacheOf;
using nanokv::capi::Check;
using nanokv::capi::ClientOf;
using nanokv::capi::Fail;

namespace {

// The header's constants are the C++ enums' values; keep them in step.
static_assert(NANOKV_KV_FLOAT16 == static_cast<int>(nanokv::KVDataType::kFloat16));
static_assert(NANOKV_KV_BFLOAT16 == static_cast<int>(nanokv::KVDataType::kBFloat16));
static_assert(NANOKV_KV_FLOAT32 == static_cast<int>(nanokv::KVDataType::kFloat32));
static_assert(NANOKV_KV_FLOAT8_E4M3 == static_cast<int>(nanokv::KVDataType::kFloat8E4M3));
static_assert(NANOKV_KV_UINT8 == static_cast<int>(nanokv::KVDataType::kUInt8));
static_assert(NANOKV_LAYOUT_BLOCK_MAJOR == static_cast<int>(nanokv::KVLayout::kBlockMajor));
static_assert(NANOKV_LAYOUT_HEAD_MAJOR == static_cast<int>(nanokv::KVLayout::kHeadMajor));

int ToView(const nanokv::Result<nanokv::KVCacheView>& view, nanokv_cache_view_t* out) {
  if (!view.ok()) return Fail(view.status());
  out->data = view->data;
  out->dtype = static_cast<uint32_t>(view->dtype);
  out->layout = static_cast<uint32_t>(view->layout);
  out->element_bytes = view->element_bytes;
  for (int i = 0; i < 4; ++i) {
    out->shape[i] = view->shape[i];
    out->strides[i] = view->strides[i];
  }
  out->block_stride = view->block_stride;
  out->head_stride = view->head_stride;
  out->slot_stride = view->slot_stride;
  out->block_size = view->block_size;
  return NANOKV_OK;
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_cache_config_init(nanokv_cache_config_t* config) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(config);
    nanokv::KVCacheConfig d;
    *config = nanokv_cache_config_t{};
    config->device = d.device;
    config->block_size = d.block_size;
    config->dtype = static_cast<uint32_t>(d.dtype);
    config->layout = static_cast<uint32_t>(d.layout);
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_create(nanokv_client_t* client, const nanokv_cache_config_t* config,
                                   nanokv_cache_t** cache_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    NANOKV_CAPI_NOT_NULL(config);
    NANOKV_CAPI_NOT_NULL(cache_out);
    if (config->dtype > NANOKV_KV_UINT8) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": dtype " + std::to_string(config->dtype));
    }
    if (config->layout > NANOKV_LAYOUT_HEAD_MAJOR) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": layout " + std::to_string(config->layout));
    }
    nanokv::KVCacheConfig cfg;
    cfg.device = config->device;
    cfg.layers = config->layers;
    cfg.kv_heads = config->kv_heads;
    cfg.head_dim = config->head_dim;
    cfg.block_size = config->block_size;
    cfg.dtype = static_cast<nanokv::KVDataType>(config->dtype);
    cfg.layout = static_cast<nanokv::KVLayout>(config->layout);
    cfg.num_blocks = config->num_blocks;
    cfg.max_bytes = config->max_bytes;
    cfg.keep_free_groups = config->keep_free_groups;
    cfg.reserve_low_blocks = config->reserve_low_blocks;
    cfg.reserve_high_blocks = config->reserve_high_blocks;
    auto created = nanokv::KVCache::Create(*c->client, cfg);
    if (!created.ok()) return Fail(created.status());
    return nanokv::capi::AdoptChild(c, nanokv::capi::Kind::kCache, &nanokv_cache::cache,
                                    std::move(created).value(), cache_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_destroy(nanokv_cache_t* cache) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    return nanokv::capi::DestroyChild(k);  // ~KVCache returns every page (errors logged)
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_allocate_for(nanokv_cache_t* cache, uint64_t request_id,
                                         uint64_t tokens) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    return Check(k->cache->AllocateFor(request_id, tokens));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_append_token(nanokv_cache_t* cache, uint64_t request_id,
                                         int64_t* slot_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(slot_out);
    auto slot = k->cache->AppendToken(request_id);
    if (!slot.ok()) return Fail(slot.status());
    *slot_out = *slot;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_append_tokens(nanokv_cache_t* cache, uint64_t request_id,
                                          uint64_t tokens) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    return Check(k->cache->AppendTokens(request_id, tokens));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_free_for(nanokv_cache_t* cache, uint64_t request_id) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    return Check(k->cache->FreeFor(request_id));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_used_tokens(const nanokv_cache_t* cache, uint64_t request_id,
                                        uint64_t* tokens_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(tokens_out);
    auto used = k->cache->UsedTokens(request_id);
    if (!used.ok()) return Fail(used.status());
    *tokens_out = *used;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_block_table(const nanokv_cache_t* cache, uint64_t request_id,
                                        uint32_t* blocks_out, size_t capacity, size_t* count_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(count_out);
    auto table = k->cache->BlockTable(request_id);
    if (!table.ok()) return Fail(table.status());
    *count_out = table->size();
    if (table->size() > capacity || (!table->empty() && blocks_out == nullptr)) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": the block table has " +
                                              std::to_string(table->size()) + " entries, the buffer " +
                                              std::to_string(blocks_out == nullptr ? 0 : capacity));
    }
    for (size_t i = 0; i < table->size(); ++i) blocks_out[i] = (*table)[i];
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_slot_of(const nanokv_cache_t* cache, uint64_t request_id,
                                    uint64_t position, int64_t* slot_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(slot_out);
    auto slot = k->cache->SlotOf(request_id, position);
    if (!slot.ok()) return Fail(slot.status());
    *slot_out = *slot;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_k_view(const nanokv_cache_t* cache, uint32_t layer,
                                   nanokv_cache_view_t* view_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(view_out);
    return ToView(k->cache->KView(layer), view_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_v_view(const nanokv_cache_t* cache, uint32_t layer,
                                   nanokv_cache_view_t* view_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(view_out);
    return ToView(k->cache->VView(layer), view_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_release_free_pages(nanokv_cache_t* cache, uint64_t max_pages,
                                               uint64_t* released_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    auto released = k->cache->ReleaseFreePages(max_pages);
    if (!released.ok()) return Fail(released.status());
    if (released_out != nullptr) *released_out = *released;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_release_pending_reclaim(nanokv_cache_t* cache, uint64_t* released_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    auto released = k->cache->ReleasePendingReclaim();
    if (!released.ok()) return Fail(released.status());
    if (released_out != nullptr) *released_out = *released;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_num_blocks(const nanokv_cache_t* cache, uint64_t* blocks_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(blocks_out);
    *blocks_out = k->cache->num_blocks();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_layer_stride_elements(const nanokv_cache_t* cache,
                                                  int64_t* elements_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(elements_out);
    *elements_out = k->cache->layer_stride_elements();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_get_stats(const nanokv_cache_t* cache, nanokv_cache_stats_t* stats_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(stats_out);
    nanokv::KVCacheStats s = k->cache->Stats();
    *stats_out = nanokv_cache_stats_t{s.total_blocks,   s.used_blocks,     s.free_blocks,
                                      s.largest_free_run, s.fragmentation, s.sequences,
                                      s.used_tokens,    s.block_bytes,     s.page_bytes,
                                      s.page_groups,    s.mapped_groups,   s.kept_free_groups,
                                      s.mapped_pages,   s.groups_mapped,   s.groups_returned,
                                      s.map_failures,   s.reserve_blocks,  s.reserve_hits,
                                      s.reserve_refills, s.reserve_refill_failures};
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cache_dump(nanokv_cache_t* cache, const char** text_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cache, k, CacheOf, cache);
    NANOKV_CAPI_NOT_NULL(text_out);
    k->dump = k->cache->DumpCacheStats();
    *text_out = k->dump.c_str();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

}  // extern "C"
