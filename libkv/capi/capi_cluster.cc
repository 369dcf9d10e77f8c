// The C ABI's cluster calls (nanokv::ClusterClient): connect, put/get/remove/
// locate, device bytes, plans, and the batch forms.
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "libkv/capi/capi_internal.h"

using nanokv::ClusterPlan;
using nanokv::Code;
using nanokv::Status;
using nanokv::capi::Check;
using nanokv::capi::ClusterOf;
using nanokv::capi::ClusterPlanOf;
using nanokv::capi::Fail;
using nanokv::capi::Items;

namespace {

std::string Str(const char* s) { return s == nullptr ? std::string() : std::string(s); }

nanokv::WriteOptions Write(const nanokv_write_options_t* options) {
  nanokv::WriteOptions o;
  if (options != nullptr) {
    o.preferred_segment = Str(options->preferred_segment);
    o.replica_num = options->replica_num;
  }
  return o;
}

void Copy(const std::string& from, char* to, size_t size) {
  size_t n = std::min(from.size(), size - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

void Fill(const std::string& node, const std::string& address, const std::string& uuid, int device,
          uint32_t epoch, bool local, bool same_host, nanokv_replica_t* out) {
  std::memset(out, 0, sizeof(*out));
  Copy(node, out->node_id, sizeof(out->node_id));
  Copy(address, out->data_address, sizeof(out->data_address));
  Copy(uuid, out->device_uuid, sizeof(out->device_uuid));
  out->device = device;
  out->epoch = epoch;
  out->local = local ? 1 : 0;
  out->same_host = same_host ? 1 : 0;
}

nanokv_cluster_plan_t* NewPlan(nanokv_cluster* owner, ClusterPlan plan) {
  auto handle = std::make_unique<nanokv_cluster_plan>();
  handle->owner = owner;
  handle->plan = std::move(plan);
  owner->children.fetch_add(1);
  nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kClusterPlan);
  return handle.release();
}

// The plans of an array of handles (null where one is not live).
std::vector<ClusterPlan> PlansOf(const char* fn, nanokv_cluster_plan_t* const* plans, size_t count,
                                 nanokv::ClusterClient** client) {
  std::vector<ClusterPlan> out;
  for (size_t i = 0; i < count; ++i) {
    nanokv_cluster_plan* p = ClusterPlanOf(fn, plans[i]);
    if (p == nullptr) return {};
    if (*client == nullptr) *client = p->owner->client.get();
    if (p->owner->client.get() != *client) {
      Fail(Code::kInvalidArgument, std::string(fn) + ": plans of two clusters in one batch");
      return {};
    }
    out.push_back(p->plan);
  }
  return out;
}

}  // namespace

extern "C" {

NANOKV_API int nanokv_cluster_connect(const nanokv_cluster_options_t* options, nanokv_cluster_t** out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(options);
    NANOKV_CAPI_NOT_NULL(out);
    if (options->master_count > 0 && options->masters == nullptr) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": masters is null, master_count " +
                                              std::to_string(options->master_count));
    }
    nanokv::ClusterClientOptions o;
    for (size_t i = 0; i < options->master_count; ++i) o.masters.push_back(Str(options->masters[i]));
    o.token_file = Str(options->token_file);
    o.tls_ca = Str(options->tls_ca);
    o.tls_cert = Str(options->tls_cert);
    o.tls_key = Str(options->tls_key);
    if (options->access_device_count > 0 && options->access_devices == nullptr) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": access_devices is null, access_device_count " +
                                              std::to_string(options->access_device_count));
    }
    o.node_id = Str(options->node_id);
    o.host_id = Str(options->host_id);
    o.access_devices.assign(options->access_devices, options->access_devices + options->access_device_count);
    o.ipc_name = Str(options->ipc_name);
    o.backend = Str(options->backend);
    if (options->request_timeout_ms != 0) o.request_timeout_ms = options->request_timeout_ms;
    auto client = nanokv::ClusterClient::Connect(o);
    if (!client.ok()) return Fail(client.status());
    auto handle = std::make_unique<nanokv_cluster>();
    handle->client = std::move(client).value();
    nanokv::capi::Register(handle.get(), nanokv::capi::Kind::kCluster);
    *out = handle.release();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_close(nanokv_cluster_t* cluster) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    if (c->children.load() > 0) {
      return Fail(Code::kFailedPrecondition, std::string(fn) + ": " + std::to_string(c->children.load()) +
                                                 " plan(s) or pending put(s) made on it are still alive "
                                                 "(prefix caches count): free them first");
    }
    nanokv::capi::Unregister(c);
    delete c;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_put(nanokv_cluster_t* cluster, const char* key, const void* data, uint64_t bytes,
                                  const nanokv_write_options_t* options) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    if (bytes > 0) NANOKV_CAPI_NOT_NULL(data);
    return Check(c->client->Put(key, {static_cast<const std::byte*>(data), bytes}, Write(options)));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_get(nanokv_cluster_t* cluster, const char* key, void* out, uint64_t capacity,
                                  uint64_t* bytes_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(bytes_out);
    if (capacity > 0) NANOKV_CAPI_NOT_NULL(out);
    // Straight into `out`; its size asked again only when it did not fit.
    auto got = c->client->GetInto(key, {static_cast<std::byte*>(out), capacity});
    if (!got.ok()) {
      if (got.status().code() == Code::kInvalidArgument) {
        auto location = c->client->GetLocation(key);
        if (location.ok()) *bytes_out = location->bytes_total;
      }
      return Fail(got.status());
    }
    *bytes_out = *got;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_put_from_device(nanokv_cluster_t* cluster, const char* key, const void* src,
                                              uint64_t bytes, const nanokv_write_options_t* options) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    return Check(c->client->PutFromDevice(key, src, bytes, Write(options)));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_get_to_device(nanokv_cluster_t* cluster, const char* key, void* dst,
                                            uint64_t capacity, uint64_t* bytes_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    auto got = c->client->GetToDevice(key, dst, capacity);
    if (!got.ok()) return Fail(got.status());
    if (bytes_out != nullptr) *bytes_out = *got;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_backend(nanokv_cluster_t* cluster, const char** name_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(name_out);
    std::lock_guard lock(c->backend_mu);
    if (c->backend.empty()) {
      auto name = c->client->DeviceBackendName();
      if (!name.ok()) return Fail(name.status());
      c->backend = *name;
    }
    // Set once, never changed: the pointer lives as long as the handle.
    *name_out = c->backend.c_str();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_remove(nanokv_cluster_t* cluster, const char* key) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    return Check(c->client->Remove(key));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_locate(nanokv_cluster_t* cluster, const char* key, nanokv_replica_t* replicas,
                                     size_t capacity, size_t* count_out, uint64_t* bytes_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(count_out);
    if (capacity > 0) NANOKV_CAPI_NOT_NULL(replicas);
    auto location = c->client->GetLocation(key);
    if (!location.ok()) return Fail(location.status());
    *count_out = location->replicas.size();
    if (bytes_out != nullptr) *bytes_out = location->bytes_total;
    for (size_t i = 0; i < location->replicas.size() && i < capacity; ++i) {
      const nanokv::Replica& r = location->replicas[i];
      Fill(r.node_id, r.data_address, r.device_uuid, r.device, r.epoch, r.local, r.same_host, &replicas[i]);
    }
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_open(nanokv_cluster_t* cluster, const char* key, uint64_t bytes,
                                   const nanokv_write_options_t* options, nanokv_cluster_plan_t** plan_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(key);
    NANOKV_CAPI_NOT_NULL(plan_out);
    auto plan = c->client->OpenForWrite(key, bytes, Write(options));
    if (!plan.ok()) return Fail(plan.status());
    *plan_out = NewPlan(c, std::move(plan).value());
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_plan_replicas(const nanokv_cluster_plan_t* plan, size_t* count_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_plan, p, ClusterPlanOf, plan);
    NANOKV_CAPI_NOT_NULL(count_out);
    *count_out = p->plan.replicas.size();
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_plan_replica(const nanokv_cluster_plan_t* plan, size_t index, nanokv_replica_t* out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_plan, p, ClusterPlanOf, plan);
    NANOKV_CAPI_NOT_NULL(out);
    if (index >= p->plan.replicas.size()) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": replica " + std::to_string(index) + " of " +
                                              std::to_string(p->plan.replicas.size()));
    }
    const nanokv::ReplicaPlan& r = p->plan.replicas[index];
    Fill(r.node_id, r.data_address, r.plan.device_uuid, r.plan.device, r.plan.epoch, r.local, r.same_host, out);
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_plan_payload(nanokv_cluster_plan_t* plan, size_t index, void** data_out) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_plan, p, ClusterPlanOf, plan);
    NANOKV_CAPI_NOT_NULL(data_out);
    if (index >= p->plan.replicas.size()) {
      return Fail(Code::kInvalidArgument, std::string(fn) + ": replica " + std::to_string(index) + " of " +
                                              std::to_string(p->plan.replicas.size()));
    }
    auto pointer = p->owner->client->PayloadPointer(p->plan.replicas[index]);
    if (!pointer.ok()) return Fail(pointer.status());
    *data_out = *pointer;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_commit(nanokv_cluster_plan_t* plan, int published_on_device) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_plan, p, ClusterPlanOf, plan);
    return Check(p->owner->client->Commit(p->plan, published_on_device != 0));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_revoke(nanokv_cluster_plan_t* plan) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_plan, p, ClusterPlanOf, plan);
    return Check(p->owner->client->Revoke(p->plan));
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_plan_free(nanokv_cluster_plan_t* plan) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster_plan, p, ClusterPlanOf, plan);
    nanokv::capi::Unregister(p);
    p->owner->children.fetch_sub(1);
    delete p;
    return NANOKV_OK;
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_put_batch(nanokv_cluster_t* cluster, const char* const* keys,
                                        const void* const* data, const uint64_t* sizes, size_t count,
                                        const nanokv_write_options_t* options, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(data);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<nanokv::PutRequest> requests;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      requests.push_back({keys[i], {static_cast<const std::byte*>(data[i]), sizes[i]}, Write(options)});
    }
    return Items(c->client->BatchPut(requests), results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_get_batch(nanokv_cluster_t* cluster, const char* const* keys, void* const* outs,
                                        const uint64_t* capacities, size_t count, uint64_t* sizes, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(outs);
    NANOKV_CAPI_NOT_NULL(capacities);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      names.emplace_back(keys[i]);
    }
    auto got = c->client->BatchGet(names);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) {
      sizes[i] = got[i].ok() ? got[i]->size() : 0;
      if (!got[i].ok()) {
        statuses.push_back(got[i].status());
      } else if (got[i]->size() > capacities[i] || outs[i] == nullptr) {
        statuses.push_back(Status::InvalidArgument(names[i] + ": " + std::to_string(got[i]->size()) +
                                                   " bytes, more than the " + std::to_string(capacities[i]) +
                                                   " given"));
      } else {
        std::memcpy(outs[i], got[i]->data(), got[i]->size());
        statuses.push_back(Status::OK());
      }
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_remove_batch(nanokv_cluster_t* cluster, const char* const* keys, size_t count,
                                           int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      names.emplace_back(keys[i]);
    }
    return Items(c->client->BatchRemove(names), results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_open_batch(nanokv_cluster_t* cluster, const char* const* keys, const uint64_t* sizes,
                                         size_t count, const nanokv_write_options_t* options,
                                         nanokv_cluster_plan_t** plans_out, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(sizes);
    NANOKV_CAPI_NOT_NULL(plans_out);
    NANOKV_CAPI_NOT_NULL(results);
    std::vector<nanokv::WriteRequest> requests;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      requests.push_back({keys[i], sizes[i], Write(options)});
    }
    auto plans = c->client->BatchOpenForWrite(requests);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) {
      plans_out[i] = plans[i].ok() ? NewPlan(c, std::move(plans[i]).value()) : nullptr;
      statuses.push_back(plans[i].status());
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_commit_batch(nanokv_cluster_plan_t* const* plans, size_t count,
                                           int published_on_device, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(plans);
    NANOKV_CAPI_NOT_NULL(results);
    nanokv::ClusterClient* client = nullptr;
    std::vector<ClusterPlan> batch = PlansOf(fn, plans, count, &client);
    if (batch.size() != count) return NANOKV_INVALID_ARGUMENT;
    if (count == 0) return NANOKV_OK;
    return Items(client->BatchCommit(batch, published_on_device != 0), results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_revoke_batch(nanokv_cluster_plan_t* const* plans, size_t count, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_NOT_NULL(plans);
    NANOKV_CAPI_NOT_NULL(results);
    nanokv::ClusterClient* client = nullptr;
    std::vector<ClusterPlan> batch = PlansOf(fn, plans, count, &client);
    if (batch.size() != count) return NANOKV_INVALID_ARGUMENT;
    if (count == 0) return NANOKV_OK;
    return Items(client->BatchRevoke(batch), results);
  } NANOKV_CAPI_END;
}

NANOKV_API int nanokv_cluster_locate_batch(nanokv_cluster_t* cluster, const char* const* keys, size_t count,
                                           nanokv_replica_t* replicas, size_t capacity, size_t* counts,
                                           uint64_t* sizes, int* results) {
  NANOKV_CAPI_BEGIN {
    NANOKV_CAPI_HANDLE(nanokv_cluster, c, ClusterOf, cluster);
    NANOKV_CAPI_NOT_NULL(keys);
    NANOKV_CAPI_NOT_NULL(counts);
    NANOKV_CAPI_NOT_NULL(results);
    if (capacity > 0) NANOKV_CAPI_NOT_NULL(replicas);
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      NANOKV_CAPI_NOT_NULL(keys[i]);
      names.emplace_back(keys[i]);
    }
    auto located = c->client->BatchGetLocation(names);
    std::vector<Status> statuses;
    for (size_t i = 0; i < count; ++i) {
      statuses.push_back(located[i].status());
      counts[i] = located[i].ok() ? located[i]->replicas.size() : 0;
      if (sizes != nullptr) sizes[i] = located[i].ok() ? located[i]->bytes_total : 0;
      if (!located[i].ok()) continue;
      for (size_t k = 0; k < located[i]->replicas.size() && k < capacity; ++k) {
        const nanokv::Replica& r = located[i]->replicas[k];
        Fill(r.node_id, r.data_address, r.device_uuid, r.device, r.epoch, r.local, r.same_host,
             &replicas[i * capacity + k]);
      }
    }
    return Items(statuses, results);
  } NANOKV_CAPI_END;
}

}  // extern "C"
