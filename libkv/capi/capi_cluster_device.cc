// The C ABI's KV highway on the cluster (nanokv::ClusterClient): a request's
// device bytes put and got as one batch on the caller's stream, and the
// stream-ordered put with its pending handle.
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::Status;
using nanokv::capi::ClusterOf;
using nanokv::capi::Fail;
using nanokv::capi::Items;
using nanokv::capi::PendingOf;

namespace {

std::string Str(const char* s) { return s == nullptr ? std::string() : std::string(s); }

// "<fn>: <array>[<i>] is null": a null entry refuses the whole call, before
// anything reaches the master.
Status NullEntry(const char* fn, const char* array, size_t i) {
  return Status::InvalidArgument(std::string(fn) + ": " + array + "[" + std::to_string(i) + "] is null");
}

// The batch's items, or the first null key or source named.
Status DevicePuts(const char* fn, const char* const* keys, const void* const* srcs, const uint64_t* sizes,
                  size_t count, const nanokv_write_options_t* options, std::vector<nanokv::DevicePut>* out) {
  nanokv::WriteOptions write;
  if (options != nullptr) {
    write.preferred_segment = Str(options->preferred_segment);
    write.replica_num = options->replica_num;
  }
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] == nullptr) return NullEntry(fn, "keys", i);
    if (srcs[i] == nullptr) return NullEntry(fn, "srcs", i);
    out->push_back({keys[i], srcs[i], sizes[i], write});
  }
  return Status::OK();
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_cluster_put_from_device_batch(nanokv_cluster_t* cluster, const char* const* keys,
                                                    const void* const* srcs, const uint64_t* sizes, size_t count,
                                                    const nanokv_write_options_t* options, void* stream,
                                                    int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(srcs);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<nanokv::DevicePut> items;
    Status checked = DevicePuts(fn, keys, srcs, sizes, count, options, &items);
    if (!checked.ok()) return Fail(checked);
    return Items(c->client->BatchPutFromDevice(items, stream), results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_get_to_device_batch(nanokv_cluster_t* cluster, const char* const* keys,
                                                  void* const* dsts, const uint64_t* capacities, size_t count,
                                                  void* stream, uint64_t* sizes, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(dsts);
    NANOKV_CAPI_NOT_NULL(capacities);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<nanokv::DeviceGet> items;
    items.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      if (keys[i] == nullptr) return Fail(NullEntry(fn, "keys", i));
      if (dsts[i] == nullptr) return Fail(NullEntry(fn, "dsts", i));
      items.push_back({keys[i], dsts[i], capacities[i]});
    }
    std::vector<nanokv::Result<uint64_t>> got = c->client->BatchGetToDevice(items, stream);
    if (got.size() != count) {
      return Fail(Code::kInternal, std::string(fn) + ": " + std::to_string(got.size()) + " answers to " +
                                       std::to_string(count) + " items");
    }
    std::vector<Status> statuses;
    statuses.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      sizes[i] = got[i].ok() ? *got[i] : 0;
      statuses.push_back(got[i].status());
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_put_from_device_async(nanokv_cluster_t* cluster, const char* const* keys,
                                                    const void* const* srcs, const uint64_t* sizes, size_t count,
                                                    const nanokv_write_options_t* options, void* stream,
                                                    nanokv_cluster_pending_t** pending_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(pending_out);
    if (count == 0) return Fail(Code::kInvalidArgument, std::string(fn) + ": count is 0: nothing to put");
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(srcs);
    NANOKV_CAPI_NOT_NULL(sizes);
    std::vector<nanokv::DevicePut> items;
    Status checked = DevicePuts(fn, keys, srcs, sizes, count, options, &items);
    if (!checked.ok()) return Fail(checked);
    auto pending = c->client->PutFromDeviceAsync(items, stream);
    if (!pending.ok()) return Fail(pending.status());
    auto handle = std::make_unique<nanokv_cluster_pending>();
    handle->owner = c;
    handle->pending = std::move(pending).value();
    handle->count = count;
    c->children.fetch_add(1);
    nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kClusterPending);
    *pending_out = handle.release();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_pending_wait(nanokv_cluster_pending_t* pending, int* results, size_t capacity) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_pending, p, PendingOf, pending);
    NANOKV_CAPI_NOT_NULL(results);
    if (capacity < p->count) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": results holds " + std::to_string(capacity) +
                                              " entries, the batch has " + std::to_string(p->count) + " items");
    }
    std::vector<Status> outcome = p->pending->Wait();
    if (outcome.size() != p->count) {
      return Fail(Code::kInternal, std::string(fn) + ": " + std::to_string(outcome.size()) + " answers to " +
                                       std::to_string(p->count) + " items");
    }
    return Items(outcome, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_pending_done(const nanokv_cluster_pending_t* pending, int* done_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_pending, p, PendingOf, pending);
    NANOKV_CAPI_NOT_NULL(done_out);
    *done_out = p->pending->Done() ? 1 : 0;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_pending_count(const nanokv_cluster_pending_t* pending, size_t* count_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_pending, p, PendingOf, pending);
    NANOKV_CAPI_NOT_NULL(count_out);
    *count_out = p->count;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_pending_event(const nanokv_cluster_pending_t* pending, void** event_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_pending, p, PendingOf, pending);
    NANOKV_CAPI_NOT_NULL(event_out);
    *event_out = p->pending->event();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_pending_free(nanokv_cluster_pending_t* pending) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_pending, p, PendingOf, pending);
    // Wait here, not in the handle's destructor: the sources must stay
    // untouched until the batch finished, and the committer may still read
    // them (copies to other hosts) after the stream ran.
    (void)p->pending->Wait();
    nanokv::capi::Unregister(p);
    p->owner->children.fetch_sub(1);
    delete p;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

}  // extern "C"
