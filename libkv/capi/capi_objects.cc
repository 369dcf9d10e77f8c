// The C ABI's node object store (nanokv::ObjectStore): open/close, host
// bytes, device bytes, and their batch forms. Plans are capi_object_plans.cc.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::ObjectStore;
using nanokv::Status;
using nanokv::capi::Check;
using nanokv::capi::Fail;
using nanokv::capi::Items;
using nanokv::capi::ObjectsOf;

namespace {

std::span<const std::byte> Bytes(const void* data, uint64_t bytes) {
  return {static_cast<const std::byte*>(data), static_cast<size_t>(bytes)};
}

// A host get's bytes into out[0, capacity): kInvalidArgument (nothing
// copied) when the object is larger.
Status CopyToCaller(const std::string& key, const std::vector<std::byte>& got, void* out, uint64_t capacity) {
  if (got.size() > capacity || (out == nullptr && !got.empty())) {
    return Status::InvalidArgument("object '" + key + "' holds " + std::to_string(got.size()) +
                                   " bytes, more than the " + std::to_string(capacity) + " given");
  }
  if (!got.empty()) std::memcpy(out, got.data(), got.size());
  return Status::OK();
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_objects_options_init(nanokv_objects_options_t* options) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(options);
    const nanokv::ObjectStoreOptions defaults;
    std::memset(options, 0, sizeof(*options));
    options->request_timeout_ms = defaults.request_timeout_ms;
    options->spin_us = defaults.spin_us;
    options->defer_lease_release = defaults.defer_lease_release ? 1 : 0;
    options->ring = defaults.ring ? 1 : 0;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_open(const nanokv_objects_options_t* options, nanokv_objects_t** out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(out);
    nanokv::ObjectStoreOptions o;
    if (options != nullptr) {
      if (options->access_device_count > 0 && options->access_devices == nullptr) {
        return Fail(Code::kInvalidArgument, std::string(fn) + ": access_devices is null, access_device_count " +
                                                std::to_string(options->access_device_count));
      }
      if (options->ipc_name != nullptr && *options->ipc_name != '\0') o.ipc_name = options->ipc_name;
      if (options->backend != nullptr) o.backend = options->backend;
      if (options->request_timeout_ms != 0) o.request_timeout_ms = options->request_timeout_ms;
      o.spin_us = options->spin_us;
      o.defer_lease_release = options->defer_lease_release != 0;
      o.ring = options->ring != 0;
      o.access_devices.assign(options->access_devices, options->access_devices + options->access_device_count);
    }
    auto store = ObjectStore::Open(o);
    if (!store.ok()) return Fail(store.status());
    auto info = (*store)->Info();
    if (!info.ok()) return Fail(info.status());
    auto handle = std::make_unique<nanokv_objects>();
    handle->store = std::move(store).value();
    handle->backend = info->backend;
    nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kObjects);
    *out = handle.release();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_close(nanokv_objects_t* store) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (s->children.load() > 0) {
      return Fail(Code::kFailedPrecondition,
                  std::string(fn) + ": " + std::to_string(s->children.load()) +
                      " plan(s) made on it are still alive (prefix caches count): free them first");
    }
    nanokv::capi::Unregister(s);
    delete s;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_backend(const nanokv_objects_t* store, const char** name_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(name_out);
    *name_out = s->backend.c_str();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_uses_kernels(const nanokv_objects_t* store, int* out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(out);
    *out = s->store->device_transfers_use_kernels() ? 1 : 0;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_put(nanokv_objects_t* store, const char* key, const void* data, uint64_t bytes,
                                  int preferred_device) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    if (bytes > 0) NANOKV_CAPI_NOT_NULL(data);
    return Check(s->store->Put(key, Bytes(data, bytes), preferred_device));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_get(nanokv_objects_t* store, const char* key, void* out, uint64_t capacity,
                                  uint64_t* bytes_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(bytes_out);
    if (capacity > 0) NANOKV_CAPI_NOT_NULL(out);
    auto got = s->store->Get(key);
    if (!got.ok()) return Fail(got.status());
    *bytes_out = got->size();
    return Check(CopyToCaller(key, *got, out, capacity));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_remove(nanokv_objects_t* store, const char* key) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    return Check(s->store->Remove(key));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_put_from_device(nanokv_objects_t* store, const char* key, const void* src,
                                              uint64_t bytes, int preferred_device, void* stream) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    return Check(s->store->PutFromDevice(key, src, bytes, preferred_device, stream));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_get_to_device(nanokv_objects_t* store, const char* key, void* dst,
                                            uint64_t capacity, void* stream, uint64_t* bytes_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    auto got = s->store->GetToDevice(key, dst, capacity, stream);
    if (!got.ok()) return Fail(got.status());
    if (bytes_out != nullptr) *bytes_out = *got;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_put_batch(nanokv_objects_t* store, const char* const* keys,
                                        const void* const* data, const uint64_t* sizes, size_t count,
                                        int preferred_device, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(data);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    for (size_t i = 0; i < count; ++i) NANOKV_CAPI_NOT_NULL(keys[i]);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) {
      statuses.push_back(data[i] == nullptr && sizes[i] > 0
                             ? Status::InvalidArgument(std::string(keys[i]) + ": data is null")
                             : s->store->Put(keys[i], Bytes(data[i], sizes[i]), preferred_device));
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_get_batch(nanokv_objects_t* store, const char* const* keys, void* const* outs,
                                        const uint64_t* capacities, size_t count, uint64_t* sizes, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(outs);
    NANOKV_CAPI_NOT_NULL(capacities);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    for (size_t i = 0; i < count; ++i) NANOKV_CAPI_NOT_NULL(keys[i]);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) {
      auto got = s->store->Get(keys[i]);
      sizes[i] = got.ok() ? got->size() : 0;
      statuses.push_back(got.ok() ? CopyToCaller(keys[i], *got, outs[i], capacities[i]) : got.status());
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_remove_batch(nanokv_objects_t* store, const char* const* keys, size_t count,
                                           int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(results);
    for (size_t i = 0; i < count; ++i) NANOKV_CAPI_NOT_NULL(keys[i]);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) statuses.push_back(s->store->Remove(keys[i]));
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_put_from_device_batch(nanokv_objects_t* store, const char* const* keys,
                                                    const void* const* srcs, const uint64_t* sizes, size_t count,
                                                    int preferred_device, void* stream, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(srcs);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<ObjectStore::DevicePut> items;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      items.push_back({keys[i], srcs[i], sizes[i]});
    }
    return Items(s->store->BatchPutFromDevice(items, preferred_device, stream), results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_get_to_device_batch(nanokv_objects_t* store, const char* const* keys,
                                                  void* const* dsts, const uint64_t* capacities, size_t count,
                                                  void* stream, uint64_t* sizes, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(dsts);
    NANOKV_CAPI_NOT_NULL(capacities);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<ObjectStore::DeviceGet> items;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      items.push_back({keys[i], dsts[i], capacities[i]});
    }
    auto got = s->store->BatchGetToDevice(items, stream);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) {
      sizes[i] = got[i].ok() ? *got[i] : 0;
      statuses.push_back(got[i].status());
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

}  // extern "C"
