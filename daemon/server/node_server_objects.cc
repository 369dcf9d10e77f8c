// kvd's answers to the object store's requests (ipc/proto/nanokv.proto,
// fields 40-59): each one message in, one reply out, on the server's thread.
// The store's own lock makes it safe with kvd-side callers of it.
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/clocks.h"
#include "daemon/server/node_server.h"
#include "daemon/objects/object_index.h"
#include "ipc/wire/object_codec.h"
#include "ipc/wire/object_plan.h"

namespace nanokv::kvd {
namespace {

uint64_t Ms(uint64_t later_ns, uint64_t now_ns) {
  return later_ns > now_ns ? (later_ns - now_ns) / 1'000'000 : 0;
}

void CloseFds(std::vector<int>& fds) {
  for (int fd : fds) close(fd);
  fds.clear();
}

}  // namespace

uint32_t NodeServer::ObjectPeer(const ipc::PeerCredentials& peer) {
  // Root and kvd's uid are the operator; anyone else is known by uid.
  return peer.uid == 0 || peer.uid == geteuid() ? ObjectIndex::kOperator : peer.uid;
}

void NodeServer::ObjectPeerGone(const Connection& gone) {
  if (objects_ == nullptr || gone.refused) return;
  const uint32_t who = gone.peer.uid;  // write fds go to a plan's writer, by its own uid
  for (const auto& [fd, c] : connections_) {
    if (c.get() != &gone && !c->refused && c->peer.uid == who) return;  // still connected
  }
  // Its write fds may live on in its processes, but kvd can no longer tell
  // (the same end as a tenant's recycle charge): its pages go back to shared use.
  objects_->ReleaseHolder(who);
}

void NodeServer::HandleObject(Connection& c, const wire::Message& m) {
  uint64_t rid = m.request_id();
  if (objects_ == nullptr) {
    // Right call, wrong kvd: not "unavailable", which clients read as "kvd is gone".
    return SendError(c, rid, Status::FailedPrecondition("kvd runs no object store (object_store.size is 0)"));
  }
  if (m.body_case() == wire::Message::kObjectSlab || m.body_case() == wire::Message::kObjectSlabRelease) {
    return HandleSlab(c, m);
  }
  ObjectIndex& store = *objects_;
  uint64_t now = SteadyNowNs();
  // `peer` for what the operator may do to anyone's object (remove, pin,
  // evict); `writer` for a plan's own acts (open, commit, revoke, write
  // fds): those are the writer's alone, root's and kvd's uid's included.
  const uint32_t peer = ObjectPeer(c.peer);
  const uint32_t writer = c.peer.uid;
  const bool operator_peer = peer == ObjectIndex::kOperator;
  wire::Message reply;
  reply.set_request_id(rid);
  Status status;
  std::vector<int> fds;
  switch (m.body_case()) {
    case wire::Message::kObjectOpen: {
      const auto& r = m.object_open();
      auto plan = store.OpenForWrite(r.key(), r.bytes_total(), r.preferred_device(), now, writer);
      if (!plan.ok()) return SendError(c, rid, plan.status());
      wire::ToWirePlan(*plan, DeviceUuid(plan->device), reply.mutable_object_plan());
      break;
    }
    case wire::Message::kObjectLocate: {
      auto plan = store.GetLocation(m.object_locate().key(), now);
      if (!plan.ok()) return SendError(c, rid, plan.status());
      wire::ToWirePlan(*plan, DeviceUuid(plan->device), reply.mutable_object_plan());
      break;
    }
    case wire::Message::kObjectCommit:
      status = store.Commit(m.object_commit().key(), m.object_commit().epoch(), now, writer);
      reply.mutable_object_ack();
      break;
    case wire::Message::kObjectRevoke:
      status = store.Revoke(m.object_revoke().key(), m.object_revoke().epoch(), now, writer);
      reply.mutable_object_ack();
      break;
    case wire::Message::kObjectRemove:
      status = store.Remove(m.object_remove().key(), now, peer);
      reply.mutable_object_ack();
      break;
    case wire::Message::kObjectPin:
      status = store.SetPin(m.object_pin().key(), static_cast<ObjectPin>(m.object_pin().pin()), peer);
      reply.mutable_object_ack();
      break;
    case wire::Message::kObjectLease: {
      const auto& r = m.object_lease();
      if (r.release()) {
        status = store.ReleaseLease(r.key(), r.lease_id(), now, peer);
        reply.mutable_object_ack();
        break;
      }
      if (r.release_lease_id() != 0) {
        // The previous get's lease, released in the same request.
        Status released = store.ReleaseLease(r.release_key(), r.release_lease_id(), now, peer);
        if (!released.ok()) spdlog::debug("kvd: lease release with an acquire: {}", released.ToString());
      }
      LeaseExpiry lease;
      if (r.locate()) {
        auto leased = store.LeaseAndLocate(r.key(), c.peer.uid, now, c.serial);
        if (!leased.ok()) return SendError(c, rid, leased.status());
        lease = leased->lease;
        wire::ToWirePlan(leased->plan, DeviceUuid(leased->plan.device),
                         reply.mutable_object_lease_reply()->mutable_plan());
      } else {
        auto acquired = store.AcquireLease(r.key(), c.peer.uid, now, c.serial);
        if (!acquired.ok()) return SendError(c, rid, acquired.status());
        lease = *acquired;
      }
      reply.mutable_object_lease_reply()->set_lease_id(lease.id);
      reply.mutable_object_lease_reply()->set_ttl_ms(Ms(lease.expires_ns, now));
      break;
    }
    case wire::Message::kObjectPages: {
      const auto& r = m.object_pages();
      if (r.tier() != 0) {
        // The host tier's pages: sealed memfds, read-only to every reader
        // (the codec refuses a write of them).
        for (uint32_t id : r.page_ids()) {
          auto fd = store.HostTierReadOnlyFd(r.device(), id);
          if (!fd.ok()) {
            CloseFds(fds);
            return SendError(c, rid, Status::PermissionDenied(std::string(fd.status().message())));
          }
          fds.push_back(*fd);
        }
        reply.mutable_object_pages_reply()->set_device(r.device());
        *reply.mutable_object_pages_reply()->mutable_page_ids() = r.page_ids();
        reply.mutable_object_pages_reply()->set_tier(r.tier());
        Send(c, reply, fds);
        CloseFds(fds);
        return;
      }
      for (uint32_t id : r.page_ids()) {
        // Only the store's own pages: never a tenant's, whatever id is asked.
        if (!store.OwnsPage(r.device(), id)) {
          return SendError(c, rid, Status::PermissionDenied(
                                       "page " + std::to_string(id) + " of device " +
                                       std::to_string(r.device()) + " is not an object store page"));
        }
        // A plan's writer gets the page's own fd, only for pages of the
        // open plan it names, and holds the page from then on (it stays
        // the owner's until the writer's uid's last connection goes:
        // ObjectPeerGone); a reader one that cannot write (READY objects
        // are immutable against every peer, not only cooperating ones).
        if (r.write()) {
          Status writable = store.LendWritablePage(
              r.device(), id, {writer, r.plan_key(), r.plan_epoch(), r.write_secret(), r.slab_id()});
          if (!writable.ok()) return SendError(c, rid, writable);
        }
      }
      // Every fd here is ours (PageFd's, or a read-only one made from it):
      // closed once sent, so a store page keeps no fd in kvd at rest.
      for (uint32_t id : r.page_ids()) {
        auto fd = node_.PageFd(r.device(), id);
        if (fd.ok() && r.write()) {
          fds.push_back(*fd);
          continue;
        }
        auto read_only = fd.ok() ? store.ReadOnlyFd(*fd) : Result<int>(fd.status());
        if (fd.ok()) close(*fd);
        if (!read_only.ok()) {
          CloseFds(fds);
          return SendError(c, rid, read_only.status());
        }
        fds.push_back(*read_only);
      }
      reply.mutable_object_pages_reply()->set_device(r.device());
      *reply.mutable_object_pages_reply()->mutable_page_ids() = r.page_ids();
      reply.mutable_object_pages_reply()->set_write(r.write());
      Send(c, reply, fds);
      CloseFds(fds);
      return;
    }
    case wire::Message::kObjectList: {
      std::vector<ObjectEntry> all = store.List(now);
      wire::ObjectListReply* out = reply.mutable_object_list_reply();
      out->set_total(static_cast<uint32_t>(all.size()));
      size_t first = std::min<size_t>(m.object_list().offset(), all.size());
      size_t last = std::min<size_t>(first + wire::kMaxObjectListEntries, all.size());
      for (size_t i = first; i < last; ++i) {
        const ObjectEntry& entry = all[i];
        wire::ObjectEntry* e = out->add_objects();
        e->set_key(entry.key);
        e->set_bytes_total(entry.bytes_total);
        e->set_device(entry.device);
        e->set_state(static_cast<uint32_t>(entry.state));
        e->set_epoch(entry.epoch);
        e->set_age_ms(entry.age_ms);
        e->set_idle_ms(entry.idle_ms);
        e->set_leases(entry.leases);
        e->set_lease_ms(entry.lease_ms);
        e->set_pin(static_cast<uint32_t>(entry.pin));
        e->set_tier(entry.host_tier ? 1 : 0);
      }
      break;
    }
    case wire::Message::kObjectEvict: {
      // Evicting takes any tenant's objects: the operator's call, as kvctl evict.
      if (!operator_peer) {
        return SendError(c, rid, Status::PermissionDenied(
                                     "uid " + std::to_string(c.peer.uid) +
                                     " may not evict objects: only root or kvd's user (kvctl objects evict)"));
      }
      auto freed = store.Evict(m.object_evict().device(), m.object_evict().bytes(), now);
      if (!freed.ok()) return SendError(c, rid, freed.status());
      reply.mutable_object_evict_reply()->set_freed_bytes(*freed);
      break;
    }
    case wire::Message::kObjectInfo: {
      wire::ObjectInfoReply* out = reply.mutable_object_info_reply();
      out->set_backend(options_.backend_name);
      for (const StoreDeviceStats& d : store.Stats()) {
        wire::ObjectStoreDevice* row = out->add_devices();
        row->set_device(d.device);
        row->set_store_bytes(d.payload_capacity);
        row->set_used_bytes(d.payload_used);
        row->set_objects(d.objects);
        row->set_evictions(d.evictions);
        row->set_pages(d.pages);
        row->set_shared_free_pages(d.shared_free_pages);
        row->set_host_bytes(d.host_capacity);
        row->set_host_used_bytes(d.host_used);
        row->set_host_objects(d.host_objects);
        row->set_demotions(d.demotions);
        row->set_promotions(d.promotions);
        std::vector<std::pair<uint32_t, uint32_t>> owners(d.owned_pages.begin(), d.owned_pages.end());
        std::stable_sort(owners.begin(), owners.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
        if (owners.size() > wire::kMaxObjectStoreOwners) owners.resize(wire::kMaxObjectStoreOwners);
        for (const auto& [owner, pages] : owners) {
          wire::ObjectStoreOwner* out_owner = row->add_owners();
          out_owner->set_kvd_callers(owner == ObjectIndex::kOperator);
          out_owner->set_uid(owner == ObjectIndex::kOperator ? 0 : owner);
          out_owner->set_pages(pages);
        }
        row->set_slabs(static_cast<uint32_t>(d.slabs.size()));
        for (size_t i = 0; i < d.slabs.size() && i < static_cast<size_t>(wire::kMaxObjectInfoSlabs); ++i) {
          const StoreDeviceStats::Slab& slab = d.slabs[i];
          wire::ObjectSlabEntry* entry = row->add_slab_list();
          entry->set_slab_id(slab.id);
          entry->set_uid(slab.owner == ObjectIndex::kOperator ? 0 : slab.owner);
          entry->set_payload_bytes(slab.payload_bytes);
          entry->set_unannounced_bytes(slab.unannounced_bytes);
          entry->set_header_slots(slab.header_slots);
          entry->set_slots_taken(slab.slots_taken);
          entry->set_ttl_ms(Ms(slab.expires_ns, now));
        }
      }
      break;
    }
    case wire::Message::kObjectReadTable: {
      auto share = store.ShareReadTable();
      if (!share.ok()) return SendError(c, rid, share.status());
      reply.mutable_object_read_table_reply()->set_entries(share->entries);
      reply.mutable_object_read_table_reply()->set_buckets(share->buckets);
      for (int device : share->devices) reply.mutable_object_read_table_reply()->add_devices(device);
      fds.push_back(share->fd);
      Send(c, reply, fds);
      CloseFds(fds);
      return;
    }
    default:
      return SendError(c, rid, Status::Internal("not an object request"));
  }
  if (!status.ok()) return SendError(c, rid, status);
  Send(c, reply, fds);
}

}  // namespace nanokv::kvd
