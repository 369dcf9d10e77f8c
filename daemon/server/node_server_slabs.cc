// kvd's answers to v2 slab requests (issue 34; object_index.h, "v2 slabs"):
// a grant sends the slab's store pages' write fds and its announce ring's
// memfd; a release ends it. The rings themselves are read on kvd's loop
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
  std::vector<int> fds;
  auto close_all = [&] {
    for (int fd : fds) close(fd);
  };
  std::vector<PageId> pages{grant->header_page};
  pages.insert(pages.end(), grant->payload_pages.begin(), grant->payload_pages.end());
  for (PageId id : pages) {
    auto fd = node_.PageFd(grant->device, id);
    if (!fd.ok()) {
      close_all();
      close(grant->ring_fd);
      (void)store.ReleaseSlab(grant->id, ObjectIndex::kOperator, now);
      return SendError(c, rid, fd.status());
    }
    fds.push_back(*fd);
  }
  fds.push_back(grant->ring_fd);
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
  close_all();  // the ring stays mapped in kvd; the page fds are PageFd's copies
}

}  // namespace nanokv::kvd
