// ObjectStore's batches (nanokv/object_store.h): leases on many objects in
// one request to kvd, stores enqueued on one stream with one wait, leases
// released in one request; and the Impl's lease requests the views and the
// batch get (object_store_reads.cc) share.
#include <algorithm>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"
#include "libkv/client/object_store_impl.h"
#include "libkv/client/object_transfer.h"
#include "libkv/client/slab_puts.h"
#include "nanokv/object_store.h"

namespace nanokv {

Result<LeasedPlan> ObjectStore::Impl::LeaseAndLocate(std::string_view key) {
  wire::Message m;
  m.mutable_object_lease()->set_key(std::string(key));
  m.mutable_object_lease()->set_locate(true);
  NANOKV_ASSIGN_OR_RETURN(wire::Message reply, Call(std::move(m)));
  if (reply.body_case() != wire::Message::kObjectLeaseReply || !reply.object_lease_reply().has_plan()) {
    return Status::ProtocolError("lease: no location in the reply");
  }
  const wire::ObjectPlan& plan = reply.object_lease_reply().plan();
  NoteDevice(plan.device(), plan.device_uuid());
  return LeasedPlan{reply.object_lease_reply().lease_id(), wire::FromWirePlan(key, plan)};
}

std::vector<Result<LeasedPlan>> ObjectStore::Impl::LeaseBatch(std::span<const std::string_view> keys, bool hold,
                                                              bool unleased) {
  std::vector<Result<LeasedPlan>> out;
  out.reserve(keys.size());
  while (out.size() < keys.size()) {
    const size_t first = out.size();
    size_t count = 0, key_bytes = 0;
    while (first + count < keys.size() && count < static_cast<size_t>(wire::kMaxObjectBatch) &&
           (count == 0 || key_bytes + keys[first + count].size() <= wire::kMaxObjectBatchKeyBytes)) {
      key_bytes += keys[first + count++].size() + 3;  // and the field's tag and length
    }
    wire::Message m;
    m.mutable_object_lease_batch()->set_hold(hold);
    m.mutable_object_lease_batch()->set_unleased(unleased);
    for (size_t i = first; i < first + count; ++i) m.mutable_object_lease_batch()->add_keys(std::string(keys[i]));
    Result<wire::Message> reply = Call(std::move(m));
    if (reply.ok() && (reply->body_case() != wire::Message::kObjectLeaseBatchReply ||
                       static_cast<size_t>(reply->object_lease_batch_reply().items_size()) > count)) {
      reply = Status::ProtocolError("lease batch: not an answer to " + std::to_string(count) + " keys");
    }
    if (!reply.ok()) {
      while (out.size() < keys.size()) out.push_back(reply.status());
      break;
    }
    // kvd answers what fits one message (at least one item); the rest go again.
    for (const wire::ObjectLeaseItem& item : reply->object_lease_batch_reply().items()) {
      const std::string_view key = keys[out.size()];
      if (item.code() != 0) {
        out.push_back(Status(static_cast<Code>(item.code()), item.message()));
        continue;
      }
      if (item.lease_id() == 0 && (!unleased || item.plan().read_entry() == 0)) {
        out.push_back(Status::ProtocolError("lease batch: " + std::string(key) + " answered with no lease"));
        continue;
      }
      NoteDevice(item.plan().device(), item.plan().device_uuid());
      out.push_back(LeasedPlan{item.lease_id(), wire::FromWirePlan(key, item.plan())});
    }
  }
  return out;
}

void ObjectStore::Impl::ReleaseBatch(std::span<const uint64_t> lease_ids) {
  for (size_t first = 0; first < lease_ids.size(); first += wire::kMaxReleaseBatch) {
    wire::Message m;
    const size_t last = std::min(lease_ids.size(), first + wire::kMaxReleaseBatch);
    m.mutable_object_release_batch()->mutable_lease_ids()->Add(lease_ids.begin() + static_cast<std::ptrdiff_t>(first),
                                                               lease_ids.begin() + static_cast<std::ptrdiff_t>(last));
    Result<wire::Message> reply = Call(std::move(m));
    if (!reply.ok()) spdlog::debug("nanokv objects: lease releases: {}", reply.status().ToString());
  }
}

Result<client::ObjectPieces> ObjectStore::Impl::Pieces(const ObjectPlan& plan, bool with_header) {
  NANOKV_ASSIGN_OR_RETURN(int local_device, LocalDevice(plan.device));
  client::ObjectPieces pieces;
  pieces.device = local_device;
  pieces.bytes = plan.bytes_total;
  pieces.epoch = plan.epoch;
  pieces.writing = WritingHeaderOf(plan, SteadyNowNs());
  pieces.access = AccessOf(local_device);
  if (plan.tier == ObjectTier::kHost) {
    // Host memory: copied, a segment per page (each page's mapping is
    // registered with the driver on its own).
    pieces.host_tier = true;
    NANOKV_ASSIGN_OR_RETURN(pieces.payload, Pointer(plan, false, /*begin=*/false));
    auto* at = static_cast<std::byte*>(pieces.payload);
    for (const ObjectSpan& span : plan.spans) {
      pieces.segments.push_back({at, span.length});
      at += span.length;
    }
    return pieces;
  }
  // The transfer writes the header itself (client::StoreObject).
  NANOKV_ASSIGN_OR_RETURN(pieces.payload, Pointer(plan, false, /*begin=*/false));
  if (with_header) {
    NANOKV_ASSIGN_OR_RETURN(void* header, Pointer(plan, true, /*begin=*/false));
    pieces.header = static_cast<ObjectHeader*>(header);
  }
  // The spans lie end to end in this process's mapping of the store, so
  // they are one segment: one row of blocks and the launch's small
  // parameters, where a segment per 2 MiB page made a 64 MiB object 32 rows
  // and 3 KiB of parameters.
  uint64_t spanned = 0;
  for (const ObjectSpan& span : plan.spans) spanned += span.length;
  if (spanned > 0) pieces.segments.push_back({pieces.payload, spanned});
  return pieces;
}

std::vector<Status> ObjectStore::BatchPutFromDevice(std::span<const DevicePut> items, int preferred_device,
                                                    void* stream) {
  // Those a slab serves go together (one wait on a stream); the rest one by one.
  std::vector<DevicePut> slabbed;
  std::vector<size_t> where;
  std::vector<Status> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const DevicePut& item = items[i];
    if (item.src != nullptr && slab_puts_->Serves(item.key, item.bytes, preferred_device)) {
      slabbed.push_back(item);
      where.push_back(i);
      continue;
    }
    out[i] = PutFromDevice(item.key, item.src, item.bytes, preferred_device, stream);
  }
  if (slabbed.empty()) return out;
  std::vector<Status> done = slab_puts_->Put(slabbed, preferred_device, stream);
  for (size_t i = 0; i < where.size(); ++i) out[where[i]] = std::move(done[i]);
  return out;
}

std::vector<Result<ObjectPlan>> ObjectStore::BatchGetLocation(std::span<const std::string> keys) {
  std::vector<Result<ObjectPlan>> out;
  out.reserve(keys.size());
  // A location is a hint once answered, so none is leased where kvd's read
  // table covers it (unleased); those kvd leases anyway (the host tier) go
  // back in one release per request: a batch holds at most one request's
  // leases at a time, never object_store.max_leases for thousands of keys.
  for (size_t first = 0; first < keys.size(); first += wire::kMaxObjectBatch) {
    const size_t count = std::min<size_t>(keys.size() - first, wire::kMaxObjectBatch);
    std::vector<std::string_view> names(keys.begin() + static_cast<std::ptrdiff_t>(first),
                                        keys.begin() + static_cast<std::ptrdiff_t>(first + count));
    std::vector<Result<LeasedPlan>> leased = impl_->LeaseBatch(names, /*hold=*/false, /*unleased=*/true);
    std::vector<uint64_t> leases;
    for (size_t i = 0; i < leased.size(); ++i) {
      if (!leased[i].ok()) {
        out.push_back(leased[i].status());
        continue;
      }
      if (leased[i]->lease_id != 0) leases.push_back(leased[i]->lease_id);
      out.push_back(std::move(leased[i]->plan));
    }
    if (!leases.empty()) impl_->ReleaseBatch(leases);
  }
  return out;
}

std::vector<Status> ObjectStore::WritePlansFromDevice(std::span<const PlanWrite> items, void* stream, bool wait) {
  std::vector<Status> out;
  out.reserve(items.size());
  std::vector<size_t> enqueued;
  // Each object's stores on one of several streams, so their puts overlap.
  client::StreamFan fan = client::StreamFan::Fork(impl_->backend(), stream, items.size());
  for (const PlanWrite& item : items) {
    if (item.plan == nullptr) {
      out.push_back(Status::InvalidArgument("write from device: no plan"));
      continue;
    }
    if (item.plan->state != ObjectState::kWriting) {
      out.push_back(Status::FailedPrecondition("write from device of " + item.plan->key +
                                               ": the plan is not one being written"));
      continue;
    }
    auto pieces = impl_->Pieces(*item.plan);
    Result<bool> stored = pieces.ok() ? client::StoreObject(impl_->backend(), item.src, *pieces,
                                                            fan.StreamFor(out.size()), /*wait=*/false)
                                      : Result<bool>(pieces.status());
    out.push_back(stored.status());
    if (!stored.ok()) continue;
    impl_->NoteBegun(*item.plan, pieces->header);
    enqueued.push_back(out.size() - 1);
  }
  if (Status joined = fan.Join(); !joined.ok()) {
    // The caller's stream may not wait for what was enqueued: no item is
    // known written.
    for (size_t i : enqueued) out[i] = joined;
  }
  if (wait) {
    Status finished = client::FinishTransfers(impl_->backend(), stream);
    if (!finished.ok()) {
      for (size_t i : enqueued) out[i] = finished;
    }
  }
  return out;
}

}  // namespace nanokv
