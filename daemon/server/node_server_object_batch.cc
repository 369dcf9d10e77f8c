// kvd's answers to the object store's batch requests: leases on many
// objects in one message (a batch get, views) and their release. Each item
// is answered as its single request would be; a held lease (a view) lives
// until released or its connection closes (EndConnectionLeases at the close).
#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "daemon/objects/object_index.h"
#include "daemon/server/node_server.h"
#include "ipc/uds/channel.h"
#include "ipc/wire/object_plan.h"

namespace nanokv::kvd {
namespace {

// Room left in a reply for its items: a datagram's, less the envelope
// (version, request id, the body's tag and length).
constexpr size_t kReplyRoom = ipc::kMaxDatagramBytes - 256;

uint64_t TtlMs(uint64_t expires_ns, uint64_t now_ns) {
  if (expires_ns == UINT64_MAX) return 0;  // held: no lease_ttl
  return expires_ns > now_ns ? (expires_ns - now_ns) / 1'000'000 : 0;
}

}  // namespace

void NodeServer::HandleObjectBatch(Connection& c, const wire::Message& m) {
  const uint64_t rid = m.request_id();
  if (objects_ == nullptr) {
    return SendError(c, rid, Status::FailedPrecondition("kvd runs no object store (object_store.size is 0)"));
  }
  ObjectIndex& store = *objects_;
  const uint64_t now = SteadyNowNs();
  wire::Message reply;
  reply.set_request_id(rid);
  if (m.body_case() == wire::Message::kObjectReleaseBatch) {
    const uint32_t peer = ObjectPeer(c.peer);
    uint32_t released = 0;
    for (const wire::ObjectLeaseRef& ref : m.object_release_batch().leases()) {
      Status done = store.ReleaseLease(ref.key(), ref.lease_id(), now, peer);
      if (done.ok()) ++released;
      else spdlog::debug("kvd: a batch release: {}", done.ToString());
    }
    reply.mutable_object_release_batch_reply()->set_released(released);
    Send(c, reply);
    return;
  }
  const wire::ObjectLeaseBatchRequest& r = m.object_lease_batch();
  wire::ObjectLeaseBatchReply* out = reply.mutable_object_lease_batch_reply();
  size_t room = kReplyRoom;
  for (const std::string& key : r.keys()) {
    wire::ObjectLeaseItem item;
    auto lease = store.AcquireLease(key, c.peer.uid, now, c.serial,
                                    r.hold() ? ObjectIndex::LeaseTerm::kHeld : ObjectIndex::LeaseTerm::kTimed);
    auto plan = lease.ok() ? store.GetLocation(key, now) : Result<ObjectPlan>(lease.status());
    if (lease.ok() && !plan.ok()) (void)store.ReleaseLease(key, lease->id, now);
    if (plan.ok()) {
      item.set_lease_id(lease->id);
      item.set_ttl_ms(TtlMs(lease->expires_ns, now));
      wire::ToWirePlan(*plan, DeviceUuid(plan->device), item.mutable_plan());
    } else {
      item.set_code(static_cast<uint32_t>(plan.status().code()));
      item.set_message(std::string(plan.status().message().substr(0, 512)));
    }
    // A reply holds what fits one datagram; the client asks again for the
    // rest (a plan of many pages is kilobytes). The first item always fits.
    const size_t bytes = item.ByteSizeLong() + 8;
    if (out->items_size() > 0 && bytes > room) {
      if (lease.ok() && plan.ok()) (void)store.ReleaseLease(key, lease->id, now);
      break;
    }
    room -= std::min(room, bytes);
    *out->add_items() = std::move(item);
  }
  Send(c, reply);
}

}  // namespace nanokv::kvd
