// The C ABI's client calls: attach, geometry, pages, copies (nanokv::Client).
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"

using nanokv::Code;
using nanokv::capi::Check;
using nanokv::capi::ClientOf;
using nanokv::capi::Fail;

namespace {

int Adopt(nanokv::Result<std::unique_ptr<nanokv::Client>> attached, nanokv_client_t** out) {
  if (!attached.ok()) return Fail(attached.status());
  auto handle = std::make_unique<nanokv_client>();
  handle->client = std::move(attached).value();
  nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kClient);
  *out = handle.release();
  return NANOKV_OK;
}

// A C string the caller may leave NULL.
std::string Str(const char* s) { return s == nullptr ? std::string() : std::string(s); }

}  // namespace

extern "C" {

NANOKV_API int nanokv_options_init(nanokv_options_t* options) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(options);
    nanokv::ClientOptions defaults;
    std::memset(options, 0, sizeof(*options));
    options->limit_fraction = defaults.limit_fraction;
    options->request_timeout_ms = defaults.request_timeout_ms;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_attach(const nanokv_options_t* options, nanokv_client_t** client_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(options);
    NANOKV_CAPI_NOT_NULL(client_out);
    if (options->device_count > 0 && options->devices == nullptr) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": devices is null, device_count " +
                                              std::to_string(options->device_count));
    }
    nanokv::ClientOptions o;
    if (options->ipc_name != nullptr && *options->ipc_name != '\0') o.ipc_name = options->ipc_name;
    o.tenant = Str(options->tenant);
    o.group = Str(options->group);
    o.limit_bytes = options->limit_bytes;
    o.limit_fraction = options->limit_fraction;
    o.expect_page_bytes = options->expect_page_bytes;
    o.devices.assign(options->devices, options->devices + options->device_count);
    o.request_timeout_ms = options->request_timeout_ms;
    return Adopt(nanokv::Client::Attach(o), client_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_attach_from_env(nanokv_client_t** client_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(client_out);
    return Adopt(nanokv::Client::AttachFromEnv(), client_out);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_detach(nanokv_client_t* client) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    if (int live = c->children.load(); live > 0) {
      return Fail(Code::kFailedPrecondition,
                  std::string(fn) + ": " + std::to_string(live) +
                      " tensor(s) or cache(s) of this client still exist; destroy them first");
    }
    nanokv::capi::Unregister(c);
    nanokv::Status detached = c->client->Detach();
    delete c;  // the handle is gone whatever Detach said (kvd may be gone)
    return Check(detached);
  } NANOKV_CAPI_END;
}

// Geometry: one pattern, one getter each.
#define NANOKV_CAPI_GETTER(name, type, expr)                          \
  NANOKV_API int name(const nanokv_client_t* client, type* out) {     \
    NANOKV_CAPI_BEGIN {                                               \
      nanokv_client* c = ClientOf(fn, client);                        \
      if (c == nullptr) return NANOKV_INVALID_ARGUMENT;               \
      NANOKV_CAPI_NOT_NULL(out);                                      \
      *out = (expr);                                                  \
      return NANOKV_OK;                                               \
    } NANOKV_CAPI_END;                                                \
  }

NANOKV_CAPI_GETTER(nanokv_client_tenant_id, uint32_t, c->client->tenant_id())
NANOKV_CAPI_GETTER(nanokv_client_tenant, const char*, c->client->tenant().c_str())
NANOKV_CAPI_GETTER(nanokv_client_backend, const char*, c->client->backend_name().c_str())
NANOKV_CAPI_GETTER(nanokv_client_page_bytes, uint64_t, c->client->page_bytes())
NANOKV_CAPI_GETTER(nanokv_client_limit_bytes, uint64_t, c->client->limit_bytes())
NANOKV_CAPI_GETTER(nanokv_client_connected, int, c->client->connected() ? 1 : 0)
NANOKV_CAPI_GETTER(nanokv_client_device_count, size_t, c->client->devices().size())
NANOKV_CAPI_GETTER(nanokv_pending_reclaim_pages, uint32_t, c->client->pending_reclaim_pages())
#undef NANOKV_CAPI_GETTER

NANOKV_API int nanokv_client_device(const nanokv_client_t* client, size_t index,
                                    nanokv_device_t* device_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    NANOKV_CAPI_NOT_NULL(device_out);
    const auto& devices = c->client->devices();
    if (index >= devices.size()) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": index " + std::to_string(index) +
                                              " of " + std::to_string(devices.size()) + " devices");
    }
    device_out->device = devices[index].device;
    device_out->page_bytes = devices[index].page_bytes;
    device_out->capacity_pages = devices[index].capacity_pages;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_grant(nanokv_client_t* client, int device, uint32_t pages,
                            uint32_t* ids_out, uint32_t* generations_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    if (pages > 0) NANOKV_CAPI_NOT_NULL(ids_out);
    auto granted = c->client->Grant(device, pages);
    if (!granted.ok()) return Fail(granted.status());
    for (size_t i = 0; i < granted->size(); ++i) {
      ids_out[i] = (*granted)[i].id;
      if (generations_out != nullptr) generations_out[i] = (*granted)[i].generation;
    }
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_share(nanokv_client_t* client, int device, const uint32_t* ids,
                            size_t count, uint32_t* generations_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    if (count > 0) NANOKV_CAPI_NOT_NULL(ids);
    auto shared = c->client->Share(device, std::span<const uint32_t>(ids, count));
    if (!shared.ok()) return Fail(shared.status());
    if (generations_out != nullptr) {
      for (size_t i = 0; i < shared->size() && i < count; ++i) generations_out[i] = (*shared)[i].generation;
    }
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_return(nanokv_client_t* client, int device, const uint32_t* ids,
                             size_t count) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    if (count > 0) NANOKV_CAPI_NOT_NULL(ids);
    return Check(c->client->Return(device, std::span<const uint32_t>(ids, count)));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_set_limit(nanokv_client_t* client, uint64_t bytes, uint64_t* applied_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    auto applied = c->client->SetLimit(bytes);
    if (!applied.ok()) return Fail(applied.status());
    if (applied_out != nullptr) *applied_out = *applied;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_copy_to_device(nanokv_client_t* client, void* dst, const void* src,
                                     size_t bytes) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    NANOKV_CAPI_NOT_NULL(dst);
    NANOKV_CAPI_NOT_NULL(src);
    return Check(c->client->CopyToDevice(dst, src, bytes));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_copy_to_host(nanokv_client_t* client, void* dst, const void* src,
                                   size_t bytes) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    NANOKV_CAPI_NOT_NULL(dst);
    NANOKV_CAPI_NOT_NULL(src);
    return Check(c->client->CopyToHost(dst, src, bytes));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_fill_device(nanokv_client_t* client, void* dst, uint8_t value,
                                  size_t bytes) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_client, c, ClientOf, client);
    NANOKV_CAPI_NOT_NULL(dst);
    return Check(c->client->FillDevice(dst, value, bytes));
  } NANOKV_CAPI_END;
}

}  // extern "C"
