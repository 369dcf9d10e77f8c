// The C ABI's KV tensor calls (nanokv::KVTensor).
#include <span>
#include <string>

#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::capi::Check;
using nanokv::capi::ClientOf;
using nanokv::capi::Fail;
using nanokv::capi::TensorOf;

extern "C" {

NANOKV_API int nanokv_tensor_create(nanokv_client_t* client, int device, uint64_t bytes,
                                    nanokv_tensor_t** tensor_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    NANOKV_CAPI_NOT_NULL(tensor_out);
    auto created = nanokv::KVTensor::Create(*c->client, device, bytes);
    if (!created.ok()) return Fail(created.status());
    return nanokv::capi::AdoptChild(c, nanokv::capi::Kind::kTensor, &nanokv_tensor::tensor,
                                    std::move(created).value(), tensor_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_tensor_destroy(nanokv_tensor_t* tensor) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    return nanokv::capi::DestroyChild(t);  // ~KVTensor unmaps and returns the pages
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_tensor_map(nanokv_tensor_t* tensor, uint64_t first, uint64_t count) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    return Check(t->tensor->Map(first, count));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_tensor_map_shared(nanokv_tensor_t* tensor, uint64_t index, int device,
                                        const uint32_t* ids, size_t count) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    if (count > 0) NANOKV_CAPI_NOT_NULL(ids);
    return Check(t->tensor->MapShared(index, device, std::span<const uint32_t>(ids, count)));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_tensor_unmap(nanokv_tensor_t* tensor, uint64_t first, uint64_t count) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    return Check(t->tensor->Unmap(first, count));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_tensor_grow(nanokv_tensor_t* tensor, uint64_t pages) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    return Check(t->tensor->Grow(pages));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_tensor_shrink(nanokv_tensor_t* tensor, uint64_t pages) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    return Check(t->tensor->Shrink(pages));
  } NANOKV_CAPI_END;
}

#define NANOKV_CAPI_GETTER(name, type, expr)                          \
  NANOKV_API int name(const nanokv_tensor_t* tensor, type* out) {     \
    NANOKV_CAPI_BEGIN {                                               \
      nanokv_tensor* t = TensorOf(fn, tensor);                        \
      if (t == nullptr) return NANOKV_INVALID_ARGUMENT;               \
      NANOKV_CAPI_NOT_NULL(out);                                      \
      *out = (expr);                                                  \
      return NANOKV_OK;                                               \
    } NANOKV_CAPI_END;                                                \
  }

NANOKV_CAPI_GETTER(nanokv_tensor_data, void*, t->tensor->data())
NANOKV_CAPI_GETTER(nanokv_tensor_device, int, t->tensor->device())
NANOKV_CAPI_GETTER(nanokv_tensor_page_bytes, uint64_t, t->tensor->page_bytes())
NANOKV_CAPI_GETTER(nanokv_tensor_page_count, uint64_t, t->tensor->page_count())
NANOKV_CAPI_GETTER(nanokv_tensor_mapped_pages, uint64_t, t->tensor->mapped_pages())
NANOKV_CAPI_GETTER(nanokv_tensor_mapped_prefix, uint64_t, t->tensor->mapped_prefix())
#undef NANOKV_CAPI_GETTER

NANOKV_API int nanokv_tensor_page_ids(const nanokv_tensor_t* tensor, uint64_t first,
                                      uint64_t count, int64_t* ids_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_tensor, t, TensorOf, tensor);
    if (count > 0) NANOKV_CAPI_NOT_NULL(ids_out);
    uint64_t pages = t->tensor->page_count();
    if (first > pages || count > pages - first) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": pages [" + std::to_string(first) +
                                              ", +" + std::to_string(count) + ") of a tensor of " +
                                              std::to_string(pages));
    }
    for (uint64_t i = 0; i < count; ++i) {
      auto id = t->tensor->page_id(first + i);
      ids_out[i] = id.has_value() ? static_cast<int64_t>(*id) : -1;
    }
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

}  // extern "C"
