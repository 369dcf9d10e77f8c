// The C ABI's error reporting and its registry of live handles.
#include <mutex>
#include <string>
#include <unordered_map>

#include "libkv/capi/capi_internal.h"

namespace nanokv::capi {
namespace {

// The header's constants are nanokv::Code's values; keep them in step.
static_assert(NANOKV_OK == static_cast<int>(Code::kOk));
static_assert(NANOKV_INVALID_ARGUMENT == static_cast<int>(Code::kInvalidArgument));
static_assert(NANOKV_NOT_FOUND == static_cast<int>(Code::kNotFound));
static_assert(NANOKV_ALREADY_EXISTS == static_cast<int>(Code::kAlreadyExists));
static_assert(NANOKV_OUT_OF_MEMORY == static_cast<int>(Code::kOutOfMemory));
static_assert(NANOKV_RESOURCE_EXHAUSTED == static_cast<int>(Code::kResourceExhausted));
static_assert(NANOKV_PERMISSION_DENIED == static_cast<int>(Code::kPermissionDenied));
static_assert(NANOKV_FAILED_PRECONDITION == static_cast<int>(Code::kFailedPrecondition));
static_assert(NANOKV_UNAVAILABLE == static_cast<int>(Code::kUnavailable));
static_assert(NANOKV_UNSUPPORTED == static_cast<int>(Code::kUnsupported));
static_assert(NANOKV_IO_ERROR == static_cast<int>(Code::kIOError));
static_assert(NANOKV_PROTOCOL_ERROR == static_cast<int>(Code::kProtocolError));
static_assert(NANOKV_INTERNAL == static_cast<int>(Code::kInternal));
static_assert(NANOKV_UNIMPLEMENTED == static_cast<int>(Code::kUnimplemented));

// Per thread, so two threads' failures never mix their messages.
thread_local std::string last_error;

std::mutex registry_mu;
// Every live handle and what it is. Checked on every call: a few hundred ns
// at most, negligible beside a request to kvd or a page mapping.
std::unordered_map<const void*, Kind>& Registry() {
  static auto* registry = new std::unordered_map<const void*, Kind>();  // never destroyed:
  return *registry;  // handles may be freed by atexit code after static destructors ran
}

}  // namespace

void Register(const void* handle, Kind kind) {
  std::lock_guard<std::mutex> lock(registry_mu);
  Registry()[handle] = kind;
}

void Unregister(const void* handle) {
  std::lock_guard<std::mutex> lock(registry_mu);
  Registry().erase(handle);
}

bool IsLive(const void* handle, Kind kind) {
  if (handle == nullptr) return false;
  std::lock_guard<std::mutex> lock(registry_mu);
  auto it = Registry().find(handle);
  return it != Registry().end() && it->second == kind;
}

int Fail(const Status& status) {
  try {
    last_error = status.ToString();
  } catch (...) {
    last_error.clear();  // out of memory for the message: keep the code
  }
  return static_cast<int>(status.code());
}

nanokv_client* ClientOf(const char* function, const nanokv_client* handle) {
  if (!IsLive(handle, Kind::kClient)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": client is null" : ": unknown client handle"));
    return nullptr;
  }
  return const_cast<nanokv_client*>(handle);
}

nanokv_tensor* TensorOf(const char* function, const nanokv_tensor* handle) {
  if (!IsLive(handle, Kind::kTensor)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": tensor is null" : ": unknown tensor handle"));
    return nullptr;
  }
  return const_cast<nanokv_tensor*>(handle);
}

nanokv_cache* CacheOf(const char* function, const nanokv_cache* handle) {
  if (!IsLive(handle, Kind::kCache)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": cache is null" : ": unknown cache handle"));
    return nullptr;
  }
  return const_cast<nanokv_cache*>(handle);
}

nanokv_cluster* ClusterOf(const char* function, const nanokv_cluster* handle) {
  if (!IsLive(handle, Kind::kCluster)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": cluster is null" : ": unknown cluster handle"));
    return nullptr;
  }
  return const_cast<nanokv_cluster*>(handle);
}

nanokv_cluster_plan* ClusterPlanOf(const char* function, const nanokv_cluster_plan* handle) {
  if (!IsLive(handle, Kind::kClusterPlan)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": plan is null" : ": unknown plan handle"));
    return nullptr;
  }
  return const_cast<nanokv_cluster_plan*>(handle);
}

nanokv_objects* ObjectsOf(const char* function, const nanokv_objects* handle) {
  if (!IsLive(handle, Kind::kObjects)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": store is null" : ": unknown object store handle"));
    return nullptr;
  }
  return const_cast<nanokv_objects*>(handle);
}

nanokv_object_plan* ObjectPlanOf(const char* function, const nanokv_object_plan* handle) {
  if (!IsLive(handle, Kind::kObjectPlan)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": plan is null" : ": unknown object plan handle"));
    return nullptr;
  }
  return const_cast<nanokv_object_plan*>(handle);
}

nanokv_cluster_pending* PendingOf(const char* function, const nanokv_cluster_pending* handle) {
  if (!IsLive(handle, Kind::kClusterPending)) {
    Fail(Code::kInvalidArgument, std::string(function) + (handle == nullptr ? ": pending put is null"
                                                                            : ": unknown pending put handle"));
    return nullptr;
  }
  return const_cast<nanokv_cluster_pending*>(handle);
}

nanokv_view* ViewOf(const char* function, const nanokv_view* handle) {
  if (!IsLive(handle, Kind::kView)) {
    Fail(Code::kInvalidArgument, std::string(function) +
                                     (handle == nullptr ? ": view is null" : ": unknown view handle"));
    return nullptr;
  }
  return const_cast<nanokv_view*>(handle);
}

nanokv_slab* SlabOf(const char* function, const nanokv_slab* handle) {
  if (!IsLive(handle, Kind::kSlab)) {
    Fail(Code::kInvalidArgument,
         std::string(function) + (handle == nullptr ? ": slab is null" : ": unknown slab handle"));
    return nullptr;
  }
  return const_cast<nanokv_slab*>(handle);
}

nanokv_prefix* PrefixOf(const char* function, const nanokv_prefix* handle) {
  if (!IsLive(handle, Kind::kPrefix)) {
    Fail(Code::kInvalidArgument,
         std::string(function) + (handle == nullptr ? ": prefix cache is null" : ": unknown prefix cache handle"));
    return nullptr;
  }
  return const_cast<nanokv_prefix*>(handle);
}

int Items(const std::vector<Status>& statuses, int* results) {
  bool noted = false;
  for (size_t i = 0; i < statuses.size(); ++i) {
    results[i] = static_cast<int>(statuses[i].code());
    if (!statuses[i].ok() && !noted) {
      Fail(statuses[i]);
      noted = true;
    }
  }
  return NANOKV_OK;
}

}  // namespace nanokv::capi

extern "C" {

NANOKV_API const char* nanokv_last_error(void) { return nanokv::capi::last_error.c_str(); }

NANOKV_API const char* nanokv_code_name(int code) {
  if (code < NANOKV_OK || code > NANOKV_UNIMPLEMENTED) return "Unknown";
  return nanokv::CodeName(static_cast<nanokv::Code>(code));
}

NANOKV_API int nanokv_abi_version(void) { return NANOKV_ABI_VERSION; }

}  // extern "C"
