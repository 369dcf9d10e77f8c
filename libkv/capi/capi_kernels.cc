// The paged-append entry points over the device kernels (kernels/kv_kernels.h).
// Built only where the kernels are (CMake target nanokv_kernels).
#include <string>

#include "kernels/kv_kernels.h"
#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::capi::Check;
using nanokv::capi::Fail;
namespace kernels = nanokv::kernels;

namespace {

// NANOKV_OK with *in filled, or the error code (recorded).
int Convert(const char* fn, const nanokv_append_input_t* input, kernels::AppendInput* in) {
  if (input->dtype != NANOKV_DTYPE_FLOAT16 && input->dtype != NANOKV_DTYPE_BFLOAT16) {
    return Fail(Code::kInvalidArgument, std::string(fn) + ": dtype " + std::to_string(input->dtype) +
                                            " (NANOKV_DTYPE_FLOAT16 or NANOKV_DTYPE_BFLOAT16)");
  }
  in->key = input->key;
  in->value = input->value;
  in->key_token_stride = input->key_token_stride;
  in->value_token_stride = input->value_token_stride;
  in->slot_mapping = input->slot_mapping;
  in->num_tokens = input->num_tokens;
  in->dtype = input->dtype == NANOKV_DTYPE_BFLOAT16 ? kernels::KvDType::kBFloat16
                                                    : kernels::KvDType::kFloat16;
  return NANOKV_OK;
}

kernels::PagedLayout Layout(const nanokv_paged_layout_t& l) {
  return {l.num_blocks, l.num_heads, l.block_size, l.head_dim, l.block_stride, l.head_stride};
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_kernels_available(void) { return 1; }

NANOKV_API int nanokv_paged_append(const nanokv_append_input_t* input,
                                   const nanokv_paged_layout_t* layout, void* key_cache,
                                   void* value_cache, void* stream, int* bad_slots) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(input);
    NANOKV_CAPI_NOT_NULL(layout);
    kernels::AppendInput in;
    if (int code = Convert(fn, input, &in); code != NANOKV_OK) return code;
    return Check(kernels::PagedAppend(in, Layout(*layout), key_cache, value_cache, stream,
                                      kernels::AppendDiagnostics{bad_slots}));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_paged_append_fp8(const nanokv_append_input_t* input,
                                       const nanokv_paged_layout_t* layout, uint8_t* key_cache,
                                       uint8_t* value_cache, float* key_scale, float* value_scale,
                                       void* stream, int* bad_slots) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(input);
    NANOKV_CAPI_NOT_NULL(layout);
    kernels::AppendInput in;
    if (int code = Convert(fn, input, &in); code != NANOKV_OK) return code;
    return Check(kernels::PagedAppendFp8(in, Layout(*layout), key_cache, value_cache, key_scale,
                                         value_scale, stream, kernels::AppendDiagnostics{bad_slots}));
  } NANOKV_CAPI_END;
}

}  // extern "C"
