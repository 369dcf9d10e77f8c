// The paged-append entry points where libnanokv.so was built without the
// device kernels (no CUDA toolkit): every call answers NANOKV_UNSUPPORTED.
#include <string>

#include "libkv/capi/capi_internal.h"

namespace {

int Absent(const char* function) {
  return nanokv::capi::Fail(nanokv::Code::kUnsupported,
                            std::string(function) +
                                ": libnanokv was built without the device kernels (no CUDA toolkit)");
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_kernels_available(void) { return 0; }

NANOKV_API int nanokv_paged_append(const nanokv_append_input_t*, const nanokv_paged_layout_t*,
                                   void*, void*, void*, int*) {
  return Absent(__func__);
}

NANOKV_API int nanokv_paged_append_fp8(const nanokv_append_input_t*, const nanokv_paged_layout_t*,
                                       uint8_t*, uint8_t*, float*, float*, void*, int*) {
  return Absent(__func__);
}

}  // extern "C"
