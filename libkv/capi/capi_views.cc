// The C ABI's views (nanokv::ObjectView): a READY object read in place under
// a held lease, from the node's store (nanokv_objects_view) or from a copy
// on this host through the cluster (nanokv_cluster_view), and the view
// handle's accessors.
#include <algorithm>
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::ObjectView;
using nanokv::Result;
using nanokv::Status;
using nanokv::capi::ClusterOf;
using nanokv::capi::Fail;
using nanokv::capi::NewViews;
using nanokv::capi::ObjectsOf;
using nanokv::capi::ViewOf;

namespace nanokv::capi {

int NewViews(std::vector<Result<ObjectView>> got, nanokv_view** views, int* results) {
  std::vector<Status> statuses;
  statuses.reserve(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    views[i] = nullptr;
    statuses.push_back(got[i].status());
    if (!got[i].ok()) continue;
    auto handle = std::make_unique<nanokv_view>();
    handle->view = std::move(got[i]).value();
    Register(handle.get(), Kind::kView);
    views[i] = handle.release();
  }
  return Items(statuses, results);
}

}  // namespace nanokv::capi

namespace {

// The keys of a batch, or the first null one named.
Status Keys(const char* fn, const char* const* keys, size_t count, std::vector<std::string>* out) {
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] == nullptr) {
      return Status::InvalidArgument(std::string(fn) + ": keys[" + std::to_string(i) + "] is null");
    }
    out->emplace_back(keys[i]);
  }
  return Status::OK();
}

// One view into *view_out (the single calls).
int One(Result<ObjectView> got, nanokv_view_t** view_out) {
  if (!got.ok()) return Fail(got.status());
  int result = NANOKV_OK;
  std::vector<Result<ObjectView>> one;
  one.push_back(std::move(got));
  return NewViews(std::move(one), view_out, &result);
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_objects_view(nanokv_objects_t* store, const char* key, nanokv_view_t** view_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(view_out);
    return One(s->store->View(key), view_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_view_batch(nanokv_objects_t* store, const char* const* keys, size_t count,
                                         nanokv_view_t** views, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(views);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<std::string> names;
    Status checked = Keys(fn, keys, count, &names);
    if (!checked.ok()) return Fail(checked);
    return NewViews(s->store->BatchView(names), views, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_view(nanokv_cluster_t* cluster, const char* key, nanokv_view_t** view_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(view_out);
    return One(c->client->View(key), view_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_view_batch(nanokv_cluster_t* cluster, const char* const* keys, size_t count,
                                         nanokv_view_t** views, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    if (count == 0) return NANOKV_OK;
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(views);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<std::string> names;
    Status checked = Keys(fn, keys, count, &names);
    if (!checked.ok()) return Fail(checked);
    std::vector<Result<ObjectView>> got = c->client->BatchView(names);
    if (got.size() != count) {
      return Fail(Code::kInternal, std::string(fn) + ": " + std::to_string(got.size()) + " answers to " +
                                       std::to_string(count) + " keys");
    }
    return NewViews(std::move(got), views, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_view_data(const nanokv_view_t* view, const void** data_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_view, v, ViewOf, view);
    NANOKV_CAPI_NOT_NULL(data_out);
    *data_out = v->view.data();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_view_size(const nanokv_view_t* view, uint64_t* bytes_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_view, v, ViewOf, view);
    NANOKV_CAPI_NOT_NULL(bytes_out);
    *bytes_out = v->view.size();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_view_device(const nanokv_view_t* view, int* device_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_view, v, ViewOf, view);
    NANOKV_CAPI_NOT_NULL(device_out);
    *device_out = v->view.device();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_view_free(nanokv_view_t* view) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_view, v, ViewOf, view);
    nanokv::capi::Unregister(v);
    delete v;  // the view's going ends its lease
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_view_free_batch(nanokv_view_t* const* views, size_t count) {
  NANOKV_CAPI_BEGIN {
    if (views == nullptr && count > 0) return Fail(Status::InvalidArgument("nanokv_view_free_batch: views is null"));
    std::vector<nanokv_view*> handles;
    for (size_t i = 0; i < count; ++i) {
      if (views[i] == nullptr) continue;
      NANOKV_CAPI_HANDLE(nanokv_view, v, ViewOf, views[i]);
      if (std::find(handles.begin(), handles.end(), v) != handles.end()) {
        return Fail(Status::InvalidArgument("nanokv_view_free_batch: views[" + std::to_string(i) +
                                            "] is named twice; nothing freed"));
      }
      handles.push_back(v);
    }
    std::vector<ObjectView> ending;
    ending.reserve(handles.size());
    for (nanokv_view* v : handles) {
      nanokv::capi::Unregister(v);
      ending.push_back(std::move(v->view));
      delete v;
    }
    ObjectView::ReleaseAll(ending);
    return NANOKV_OK;
  }
  NANOKV_CAPI_END;
}

}  // extern "C"
