// The C ABI's object store plans (ObjectStore::OpenForWrite / GetLocation):
// a handle per plan, owned by its store, for producers that write the
// payload themselves (a kernel, a copy) and then commit or revoke.
#include <string>

#include "libkv/capi/capi_internal.h"

using nanokv::capi::Check;
using nanokv::capi::Fail;
using nanokv::capi::ObjectPlanOf;
using nanokv::capi::ObjectsOf;

namespace {

nanokv_object_plan_t* NewPlan(nanokv_objects* owner, nanokv::ObjectPlan plan) {
  auto handle = std::make_unique<nanokv_object_plan>();
  handle->owner = owner;
  handle->plan = std::move(plan);
  owner->children.fetch_add(1);
  nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kObjectPlan);
  return handle.release();
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_objects_open_for_write(nanokv_objects_t* store, const char* key, uint64_t bytes,
                                             int preferred_device, nanokv_object_plan_t** plan_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(plan_out);
    auto plan = s->store->OpenForWrite(key, bytes, preferred_device);
    if (!plan.ok()) return Fail(plan.status());
    *plan_out = NewPlan(s, std::move(plan).value());
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_get_location(nanokv_objects_t* store, const char* key,
                                           nanokv_object_plan_t** plan_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_objects, s, ObjectsOf, store);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(plan_out);
    auto plan = s->store->GetLocation(key);
    if (!plan.ok()) return Fail(plan.status());
    *plan_out = NewPlan(s, std::move(plan).value());
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_plan_info(const nanokv_object_plan_t* plan, nanokv_object_plan_info_t* out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_object_plan, p, ObjectPlanOf, plan);
    NANOKV_CAPI_NOT_NULL(out);
    out->device = p->plan.device;
    out->epoch = p->plan.epoch;
    out->bytes_total = p->plan.bytes_total;
    out->state = static_cast<uint32_t>(p->plan.state);
    out->tier = static_cast<uint32_t>(p->plan.tier);
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_plan_payload(nanokv_object_plan_t* plan, void** data_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_object_plan, p, ObjectPlanOf, plan);
    NANOKV_CAPI_NOT_NULL(data_out);
    auto pointer = p->owner->store->PayloadPointer(p->plan);
    if (!pointer.ok()) return Fail(pointer.status());
    *data_out = *pointer;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_plan_header(nanokv_object_plan_t* plan, void** header_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_object_plan, p, ObjectPlanOf, plan);
    NANOKV_CAPI_NOT_NULL(header_out);
    auto pointer = p->owner->store->HeaderPointer(p->plan);
    if (!pointer.ok()) return Fail(pointer.status());
    *header_out = *pointer;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_commit(nanokv_object_plan_t* plan, int published_on_device) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_object_plan, p, ObjectPlanOf, plan);
    return Check(p->owner->store->Commit(p->plan.key, p->plan.epoch, published_on_device != 0));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_revoke(nanokv_object_plan_t* plan) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_object_plan, p, ObjectPlanOf, plan);
    return Check(p->owner->store->Revoke(p->plan.key, p->plan.epoch));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_objects_plan_free(nanokv_object_plan_t* plan) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_object_plan, p, ObjectPlanOf, plan);
    nanokv::capi::Unregister(p);
    p->owner->children.fetch_sub(1);
    delete p;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

}  // extern "C"
