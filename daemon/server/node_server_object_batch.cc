// kvd's answers to the object store's batch requests: leases on many
// objects in one message (a batch get, views) and their release. Each item
// is answered as its single request would be (or, unleased, located
// without a lease where the read table covers it); a held lease (a view) lives
// until released or its connection closes (EndConnectionLeases at the close).
#include "base/clocks.h"
#include "daemon/objects/object_index.h"
#include "daemon/server/message_arena.h"
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
  MessageArena arena(reply_block_);
  wire::Message& reply = *arena.Make<wire::Message>();
  reply.set_request_id(rid);
  if (m.body_case() == wire::Message::kObjectReleaseBatch) {
    const auto& ids = m.object_release_batch().lease_ids();
    const size_t released = store.ReleaseLeases({ids.data(), static_cast<size_t>(ids.size())}, now, ObjectPeer(c.peer));
    reply.mutable_object_release_batch_reply()->set_released(static_cast<uint32_t>(released));
    Send(c, reply);
    return;
  }
  const wire::ObjectLeaseBatchRequest& r = m.object_lease_batch();
  wire::ObjectLeaseBatchReply* out = reply.mutable_object_lease_batch_reply();
  size_t room = kReplyRoom;
  // A reply holds what fits one datagram; the client asks again for the
  // rest (a plan of many pages is kilobytes). The first item always fits.
  auto fits = [&](const wire::ObjectLeaseItem& item) {
    const size_t bytes = item.ByteSizeLong() + 8;
    if (out->items_size() > 1 && bytes > room) return false;
    room -= std::min(room, bytes);
    return true;
  };
  auto fail = [](wire::ObjectLeaseItem& item, const Status& status) {
    item.set_code(static_cast<uint32_t>(status.code()));
    item.set_message(std::string(status.message().substr(0, 512)));
  };
  for (const std::string& key : r.keys()) {
    wire::ObjectLeaseItem& item = *out->add_items();  // on the arena: built in place
    // A copy the read table covers: its location and no lease. The rest
    // (the host tier; no table) are leased.
    auto located = r.unleased() && !r.hold() ? store.LocateUnleased(key, now) : std::optional<ObjectPlan>();
    if (!located.ok() || located->has_value()) {
      if (located.ok()) {
        wire::ToWirePlan(**located, DeviceUuid((*located)->device), item.mutable_plan());
      } else {
        fail(item, located.status());
      }
      if (!fits(item)) {
        out->mutable_items()->RemoveLast();
        break;
      }
      continue;
    }
    auto leased = store.LeaseAndLocate(key, c.peer.uid, now, c.serial,
                                       r.hold() ? ObjectIndex::LeaseTerm::kHeld : ObjectIndex::LeaseTerm::kTimed);
    if (leased.ok()) {
      item.set_lease_id(leased->lease.id);
      item.set_ttl_ms(TtlMs(leased->lease.expires_ns, now));
      wire::ToWirePlan(leased->plan, DeviceUuid(leased->plan.device), item.mutable_plan());
    } else {
      fail(item, leased.status());
    }
    if (!fits(item)) {
      if (leased.ok()) (void)store.ReleaseLease(key, leased->lease.id, now);
      out->mutable_items()->RemoveLast();
      break;
    }
  }
  Send(c, reply);
}

}  // namespace nanokv::kvd
