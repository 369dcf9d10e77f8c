// kvd's answers to v2 slab requests (issue 34; object_index.h, "v2 slabs"):
// a grant sends its announce ring's memfd (the pages' write fds come by
// object_pages naming the slab); a release ends it. The rings themselves are read on kvd's loop
// (NodeServer::Run: PollSlabs), not here.
#include <unistd.h>

#include <vector>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "daemon/objects/object_index.h"
#include "daemon/server/node_server.h"

namespace nanokv::kvd {

void NodeServer::HandleSlab(Connection& c, const wire::Message& m) {
  const uint64_t rid = m.request_id();
  ObjectIndex& store = *objects_;
  const uint64_t now = SteadyNowNs();
  wire::Message reply;
  reply.set_request_id(rid);
  if (m.body_case() == wire::Message::kObjectSlabRelease) {
    Status released = store.ReleaseSlab(m.object_slab_release().slab_id(), ObjectPeer(c.peer), now);
    if (!released.ok()) return SendError(c, rid, released);
    dirty_ = true;
    reply.mutable_object_ack();
    Send(c, reply);
    return;
  }
  const wire::ObjectSlabRequest& r = m.object_slab();
  // The slab is its writer's, by uid (as an open plan's), and ends with
  // this connection at the latest.
  auto grant =
      store.GrantSlab({r.device(), r.payload_bytes(), r.header_slots(), r.ring_records()}, c.peer.uid, c.serial, now);
  if (!grant.ok()) return SendError(c, rid, grant.status());
  // Only the ring's fd: the producer asks for the pages' write fds it has
  // not mapped yet (object_pages naming the slab), so a slab over pages it
  // wrote before costs it no import.
  std::vector<int> fds{grant->ring_fd};
  wire::ObjectSlabReply* out = reply.mutable_object_slab_reply();
  out->set_slab_id(grant->id);
  out->set_device(grant->device);
  out->set_device_uuid(DeviceUuid(grant->device));
  out->set_payload_offset(grant->payload_offset);
  out->set_payload_bytes(grant->payload_bytes);
  out->set_header_offset(grant->header_offset);
  out->set_header_slots(grant->header_slots);
  out->set_first_epoch(grant->first_epoch);
  out->set_ring_records(grant->ring_records);
  out->set_ttl_ms(grant->expires_ns > now ? (grant->expires_ns - now) / 1'000'000 : 0);
  out->set_page_bytes(grant->page_bytes);
  out->set_store_bytes(grant->store_bytes);
  out->set_header_page(grant->header_page);
  for (PageId id : grant->payload_pages) out->add_payload_pages(id);
  dirty_ = true;
  Send(c, reply, fds);
  close(grant->ring_fd);  // the ring stays mapped in kvd
}

}  // namespace nanokv::kvd
