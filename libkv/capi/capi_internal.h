// Internal to libnanokv.so: the handles behind the C ABI's opaque pointers,
// the registry that tells a live handle from a stray pointer, and the one
// wrapper every exported function runs its body in (so no exception and no
// bad handle gets past it).
#ifndef NANOKV_LIBKV_CAPI_CAPI_INTERNAL_H_
#define NANOKV_LIBKV_CAPI_CAPI_INTERNAL_H_

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "nanokv/client.h"
#include "nanokv/cluster_client.h"
#include "nanokv/kv_cache.h"
#include "nanokv/kv_tensor.h"
#include "nanokv/nanokv.h"
#include "nanokv/object_store.h"
#include "nanokv/prefix_cache.h"
#include "nanokv/status.h"

struct nanokv_client {
  std::unique_ptr<nanokv::Client> client;
  std::atomic<int> children{0};  // live tensor and cache handles made on this client
};

struct nanokv_tensor {
  nanokv_client* owner = nullptr;  // must remain live while the tensor exists
  std::unique_ptr<nanokv::KVTensor> tensor;
};

struct nanokv_cache {
  nanokv_client* owner = nullptr;  // must remain live while the cache exists
  std::unique_ptr<nanokv::KVCache> cache;
  std::string dump;  // the latest nanokv_cache_dump text
};

struct nanokv_cluster {
  std::unique_ptr<nanokv::ClusterClient> client;
  std::atomic<int> children{0};  // live plan and pending-put handles made on this cluster
  std::mutex backend_mu;
  std::string backend;           // its device backend's name once asked; GUARDED_BY(backend_mu)
};

struct nanokv_cluster_plan {
  nanokv_cluster* owner = nullptr;  // must remain live while the plan exists
  nanokv::ClusterPlan plan;
};

// A stream-ordered put (ClusterClient::PutFromDeviceAsync): a child of its
// cluster, whose client commits it.
struct nanokv_cluster_pending {
  nanokv_cluster* owner = nullptr;  // must remain live while the pending put exists
  std::unique_ptr<nanokv::PendingPuts> pending;
  size_t count = 0;                 // the batch's items
};

// An ObjectView: owns its lease and the store's mappings, so it needs no
// owner handle (it may outlive the store or cluster it came from).
struct nanokv_view {
  nanokv::ObjectView view;
};

// An ObjectSlab: keeps its store's connection itself, so no owner handle.
struct nanokv_slab {
  std::unique_ptr<nanokv::ObjectSlab> slab;
};

struct nanokv_objects {
  std::unique_ptr<nanokv::ObjectStore> store;
  std::string backend;           // kvd's, asked at open
  std::atomic<int> children{0};  // live plan handles made on this store
};

struct nanokv_object_plan {
  nanokv_objects* owner = nullptr;  // must remain live while the plan exists
  nanokv::ObjectPlan plan;
};

// A prefix cache: a child of the store or the cluster it runs over (one of
// the two owners is set), which must outlive it.
struct nanokv_prefix {
  nanokv_objects* objects = nullptr;
  nanokv_cluster* cluster = nullptr;
  std::unique_ptr<nanokv::PrefixCache> cache;
};

namespace nanokv::capi {

// What the registry knows a pointer as.
enum class Kind {
  kClient,
  kTensor,
  kCache,
  kCluster,
  kClusterPlan,
  kClusterPending,
  kObjects,
  kObjectPlan,
  kView,
  kPrefix,
  kSlab
};

void Register(const void* handle, Kind kind);
void Unregister(const void* handle);
bool IsLive(const void* handle, Kind kind);

// Records `status` as this thread's last error and returns its code.
int Fail(const Status& status);
inline int Fail(Code code, const std::string& message) { return Fail(Status(code, message)); }
inline int Check(const Status& status) { return status.ok() ? NANOKV_OK : Fail(status); }

// The handle, or null after recording "<function>: unknown client handle".
nanokv_client* ClientOf(const char* function, const nanokv_client* handle);
nanokv_tensor* TensorOf(const char* function, const nanokv_tensor* handle);
nanokv_cache* CacheOf(const char* function, const nanokv_cache* handle);
nanokv_cluster* ClusterOf(const char* function, const nanokv_cluster* handle);
nanokv_cluster_plan* ClusterPlanOf(const char* function, const nanokv_cluster_plan* handle);
nanokv_objects* ObjectsOf(const char* function, const nanokv_objects* handle);
nanokv_object_plan* ObjectPlanOf(const char* function, const nanokv_object_plan* handle);
nanokv_cluster_pending* PendingOf(const char* function, const nanokv_cluster_pending* handle);
nanokv_view* ViewOf(const char* function, const nanokv_view* handle);
nanokv_prefix* PrefixOf(const char* function, const nanokv_prefix* handle);
nanokv_slab* SlabOf(const char* function, const nanokv_slab* handle);

// Views into view handles: views[i] a new handle where the item is a view,
// else null; the items' codes in results[] (as Items).
int NewViews(std::vector<Result<ObjectView>> got, nanokv_view** views, int* results);

// A batch's item results into results[] (their codes); the first failure is
// this thread's last error. Always NANOKV_OK: the items carry the outcome.
int Items(const std::vector<Status>& statuses, int* results);

// A tensor or cache handle is born and dies the same way: owned by its
// client (counted in `children`, so the client cannot be destroyed under
// it) and known to the registry while it lives.
// Wraps `object` in a new handle of `kind` on `owner` (in its member
// `field`) and stores the handle in *out.
template <typename Handle, typename Object>
int AdoptChild(nanokv_client* owner, Kind kind, std::unique_ptr<Object> Handle::*field,
               std::unique_ptr<Object> object, Handle** out) {
  auto handle = std::make_unique<Handle>();
  handle->owner = owner;
  (*handle).*field = std::move(object);
  owner->children.fetch_add(1);
  Register(handle.get(), kind);
  *out = handle.release();
  return NANOKV_OK;
}
// Unregisters and deletes a live child handle (its object's destructor
// returns the pages), then releases its hold on the client.
template <typename Handle>
int DestroyChild(Handle* handle) {
  Unregister(handle);
  nanokv_client* owner = handle->owner;
  delete handle;
  owner->children.fetch_sub(1);
  return NANOKV_OK;
}

// Runs `body` (which returns an int code); an exception becomes NANOKV_INTERNAL.
template <typename Body>
int Guard(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(Code::kOutOfMemory, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return Fail(Code::kInternal, std::string(function) + ": C++ exception: " + e.what());
  } catch (...) {
    return Fail(Code::kInternal, std::string(function) + ": unknown C++ exception");
  }
}

// An exported function's body: NANOKV_CAPI_BEGIN { ... return NANOKV_OK; }
// NANOKV_CAPI_END. `fn` names the function inside (for messages).
#define NANOKV_CAPI_BEGIN                 \
  const char* const fn = __func__;        \
  return ::nanokv::capi::Guard(fn, [&]() -> int
#define NANOKV_CAPI_END )

// `type* var = lookup(fn, handle)`, returning NANOKV_INVALID_ARGUMENT (the
// lookup recorded why) for a pointer that is not a live handle of that kind.
#define NANOKV_CAPI_HANDLE(type, var, lookup, handle) \
  type* var = lookup(fn, handle);                     \
  if (var == nullptr) return NANOKV_INVALID_ARGUMENT

// NANOKV_INVALID_ARGUMENT naming the null pointer (inside a body).
#define NANOKV_CAPI_NOT_NULL(ptr)                                                             \
  do {                                                                                        \
    if ((ptr) == nullptr) {                                                                   \
      return ::nanokv::capi::Fail(::nanokv::Code::kInvalidArgument,                           \
                                  std::string(fn) + ": " #ptr " is null");                    \
    }                                                                                         \
  } while (0)

}  // namespace nanokv::capi

#endif  // NANOKV_LIBKV_CAPI_CAPI_INTERNAL_H_
