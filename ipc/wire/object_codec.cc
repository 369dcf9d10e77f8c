#include "ipc/wire/object_codec.h"

#include <string>

#include "ipc/wire/codec.h"
#include "nanokv/object_header.h"
#include "nanokv/object_types.h"

namespace nanokv::wire {
namespace {

Status Fault(const std::string& what) { return Status::ProtocolError(what); }

Status Key(const std::string& key, const char* where) {
  if (!ValidObjectKey(key)) {
    return Fault(std::string(where) + ": key of " + std::to_string(key.size()) + " bytes is not 1-" +
                 std::to_string(kMaxObjectKeyBytes) + " of printable ASCII (0x21-0x7e)");
  }
  return Status::OK();
}

Status Device(int32_t device, bool any_allowed, const char* where) {
  if ((any_allowed && device == -1) || (device >= 0 && static_cast<size_t>(device) < kMaxDevices)) {
    return Status::OK();
  }
  return Fault(std::string(where) + ": device " + std::to_string(device) + " out of range");
}

// A plan naming the host tier (tier 1): READY, no header, and its spans
// the host tier's own page numbers in order, inside it (an engine maps
// exactly the pages it names, by number: any other is a lie).
Status HostTierPlan(const ObjectPlan& p) {
  if (p.tier() > kLastObjectTier) {
    return Fault("object_plan: tier " + std::to_string(p.tier()) + " (0 the store, 1 the host tier)");
  }
  if (p.tier() == static_cast<uint32_t>(ObjectTier::kGpu)) return Status::OK();
  if (p.state() != static_cast<uint32_t>(ObjectState::kReady)) return Fault("object_plan: a host-tier plan not READY");
  if (p.header_offset() != 0 || p.header_page() != 0 || p.write_secret() != 0) {
    return Fault("object_plan: a host-tier plan names a header or a writer");
  }
  const uint64_t pages = p.store_bytes() / p.page_bytes();
  uint64_t page = p.payload_offset() / p.page_bytes();
  for (const ObjectSpan& s : p.spans()) {
    if (s.page_id() >= pages || s.page_id() != page) {
      return Fault("object_plan: host-tier page " + std::to_string(s.page_id()) + " out of range (expected " +
                   std::to_string(page) + " of " + std::to_string(pages) + ")");
    }
    ++page;
  }
  if (!p.spans().empty() && p.spans(0).offset() != p.payload_offset() % p.page_bytes()) {
    return Fault("object_plan: a host-tier span disagrees with payload_offset");
  }
  return Status::OK();
}

Status Plan(const ObjectPlan& p) {
  NANOKV_RETURN_IF_ERROR(Device(p.device(), false, "object_plan"));
  if (p.page_bytes() == 0) return Fault("object_plan: page_bytes 0");
  if (!ValidDeviceUuid(p.device_uuid())) {
    return Fault("object_plan: device uuid of " + std::to_string(p.device_uuid().size()) +
                 " bytes is not 0-" + std::to_string(kMaxDeviceUuidBytes) + " of printable ASCII");
  }
  if (static_cast<uint32_t>(p.spans_size()) > kMaxObjectSpans) return Fault("object_plan: too many spans");
  if (static_cast<uint32_t>(p.spans_size()) != p.n_pages()) return Fault("object_plan: n_pages disagrees with spans");
  uint64_t sum = 0;
  for (const ObjectSpan& s : p.spans()) {
    if (s.length() == 0 || uint64_t{s.offset()} + s.length() > p.page_bytes()) {
      return Fault("object_plan: a span outside its page");
    }
    sum += s.length();
  }
  if (sum != p.bytes_total()) return Fault("object_plan: spans do not add up to bytes_total");
  if (p.payload_offset() + p.bytes_total() > p.store_bytes() ||
      p.header_offset() + sizeof(ObjectHeader) > p.store_bytes()) {
    return Fault("object_plan: offsets outside the store range");
  }
  if (p.state() > static_cast<uint32_t>(kLastObjectState)) {
    return Fault("object_plan: state " + std::to_string(p.state()));
  }
  if (p.read_entry() != 0 && (p.tier() != 0 || p.state() != static_cast<uint32_t>(ObjectState::kReady))) {
    return Fault("object_plan: a read entry for what is not a READY copy in the store");
  }
  return HostTierPlan(p);
}

// A batch of 1..`most` items, each checked by `item`.
template <typename Check>
Status Batch(int items, const char* where, Check item, int most = kMaxObjectBatch) {
  if (items == 0 || items > most) {
    return Fault(std::string(where) + ": " + std::to_string(items) + " items, not 1-" + std::to_string(most));
  }
  for (int i = 0; i < items; ++i) NANOKV_RETURN_IF_ERROR(item(i));
  return Status::OK();
}

bool PowerOfTwo(uint32_t n) { return n != 0 && (n & (n - 1)) == 0; }

Status SlabSizes(uint32_t header_slots, uint32_t ring_records, const char* where) {
  if (header_slots == 0 || header_slots > kMaxSlabHeaderSlots) {
    return Fault(std::string(where) + ": " + std::to_string(header_slots) + " header slots");
  }
  if (ring_records < 2 || ring_records > kMaxSlabRingRecords || !PowerOfTwo(ring_records)) {
    return Fault(std::string(where) + ": a ring of " + std::to_string(ring_records) +
                 " records is not a power of two in [2, " + std::to_string(kMaxSlabRingRecords) + "]");
  }
  return Status::OK();
}

Status SlabReply(const ObjectSlabReply& r) {
  NANOKV_RETURN_IF_ERROR(Device(r.device(), false, "object_slab_reply"));
  NANOKV_RETURN_IF_ERROR(SlabSizes(r.header_slots(), r.ring_records(), "object_slab_reply"));
  if (!ValidDeviceUuid(r.device_uuid())) return Fault("object_slab_reply: a bad device uuid");
  if (r.slab_id() == 0 || r.page_bytes() == 0 || r.payload_bytes() == 0) {
    return Fault("object_slab_reply: slab id, page_bytes or payload_bytes 0");
  }
  // Overflow-safe: each term is checked against store_bytes before the sum.
  const uint64_t store = r.store_bytes();
  if (r.payload_offset() > store || r.payload_bytes() > store - r.payload_offset() || r.header_offset() > store ||
      uint64_t{r.header_slots()} * sizeof(ObjectHeader) > store - r.header_offset()) {
    return Fault("object_slab_reply: payload or header slots outside the store range");
  }
  const uint64_t first = r.payload_offset() / r.page_bytes();
  const uint64_t last = (r.payload_offset() + r.payload_bytes() - 1) / r.page_bytes();
  if (static_cast<uint64_t>(r.payload_pages_size()) != last - first + 1 ||
      static_cast<uint32_t>(r.payload_pages_size()) > kMaxSlabPayloadPages) {
    return Fault("object_slab_reply: " + std::to_string(r.payload_pages_size()) +
                 " payload pages for its range (at most " + std::to_string(kMaxSlabPayloadPages) + ")");
  }
  if (r.header_offset() / r.page_bytes() !=
      (r.header_offset() + uint64_t{r.header_slots()} * sizeof(ObjectHeader) - 1) / r.page_bytes()) {
    return Fault("object_slab_reply: header slots across pages");
  }
  return Status::OK();
}

}  // namespace

Status CheckObjectPlan(const ObjectPlan& plan) { return Plan(plan); }

bool IsObjectRequest(Message::BodyCase body) {
  switch (body) {
    case Message::kObjectOpen:
    case Message::kObjectCommit:
    case Message::kObjectRevoke:
    case Message::kObjectRemove:
    case Message::kObjectLocate:
    case Message::kObjectLease:
    case Message::kObjectPin:
    case Message::kObjectPages:
    case Message::kObjectList:
    case Message::kObjectEvict:
    case Message::kObjectInfo:
    case Message::kObjectLeaseBatch:
    case Message::kObjectReleaseBatch:
    case Message::kObjectSlab:
    case Message::kObjectSlabRelease:
    case Message::kObjectReadTable:
      return true;
    default:
      return false;
  }
}

bool IsObjectBody(Message::BodyCase body) {
  return IsObjectRequest(body) || body == Message::kObjectPlan || body == Message::kObjectLeaseReply ||
         body == Message::kObjectPagesReply || body == Message::kObjectListReply ||
         body == Message::kObjectEvictReply || body == Message::kObjectAck || body == Message::kObjectInfoReply ||
         body == Message::kObjectLeaseBatchReply || body == Message::kObjectReleaseBatchReply ||
         body == Message::kObjectSlabReply || body == Message::kObjectReadTableReply;
}

Status CheckObjectBody(const Message& m) {
  switch (m.body_case()) {
    case Message::kObjectOpen:
      NANOKV_RETURN_IF_ERROR(Key(m.object_open().key(), "object_open"));
      if (m.object_open().bytes_total() == 0) return Fault("object_open: 0 bytes");
      return Device(m.object_open().preferred_device(), true, "object_open");
    case Message::kObjectCommit: return Key(m.object_commit().key(), "object_commit");
    case Message::kObjectRevoke: return Key(m.object_revoke().key(), "object_revoke");
    case Message::kObjectRemove: return Key(m.object_remove().key(), "object_remove");
    case Message::kObjectLocate: return Key(m.object_locate().key(), "object_locate");
    case Message::kObjectLease:
      NANOKV_RETURN_IF_ERROR(Key(m.object_lease().key(), "object_lease"));
      if (m.object_lease().release_lease_id() != 0) {
        NANOKV_RETURN_IF_ERROR(Key(m.object_lease().release_key(), "object_lease: release_key"));
      }
      if (m.object_lease().release() && (m.object_lease().locate() || m.object_lease().release_lease_id() != 0)) {
        return Fault("object_lease: a release cannot also locate or release another");
      }
      return Status::OK();
    case Message::kObjectPin:
      NANOKV_RETURN_IF_ERROR(Key(m.object_pin().key(), "object_pin"));
      if (m.object_pin().pin() > static_cast<uint32_t>(kLastObjectPin)) {
        return Fault("object_pin: pin " + std::to_string(m.object_pin().pin()));
      }
      return Status::OK();
    case Message::kObjectPages:
    case Message::kObjectPagesReply: {
      const auto& ids = m.body_case() == Message::kObjectPages ? m.object_pages().page_ids()
                                                               : m.object_pages_reply().page_ids();
      int32_t device = m.body_case() == Message::kObjectPages ? m.object_pages().device()
                                                              : m.object_pages_reply().device();
      NANOKV_RETURN_IF_ERROR(Device(device, false, "object_pages"));
      const uint32_t tier =
          m.body_case() == Message::kObjectPages ? m.object_pages().tier() : m.object_pages_reply().tier();
      if (tier > kLastObjectTier) return Fault("object_pages: tier " + std::to_string(tier));
      if (ids.empty()) return Fault("object_pages: no pages");
      if (static_cast<uint32_t>(ids.size()) > kMaxObjectPageFds) {
        return Fault("object_pages: more than " + std::to_string(kMaxObjectPageFds) + " pages");
      }
      if (m.body_case() == Message::kObjectPages) {
        // A write names the plan it writes; a read names none.
        const DevicePages& r = m.object_pages();
        if (r.write() && r.tier() != 0) return Fault("object_pages: a write of host-tier pages");
        if (r.write() && r.slab_id() != 0) {
          if (!r.plan_key().empty() || r.plan_epoch() != 0 || r.write_secret() != 0) {
            return Fault("object_pages: a write names both a slab and a plan");
          }
          return Status::OK();
        }
        if (r.write()) return Key(r.plan_key(), "object_pages: the plan to write");
        if (!r.plan_key().empty() || r.plan_epoch() != 0 || r.write_secret() != 0 || r.slab_id() != 0) {
          return Fault("object_pages: a read names a plan or a slab");
        }
      }
      return Status::OK();
    }
    case Message::kObjectEvict: return Device(m.object_evict().device(), true, "object_evict");
    case Message::kObjectPlan: return Plan(m.object_plan());
    case Message::kObjectListReply:
      if (static_cast<uint32_t>(m.object_list_reply().objects_size()) > kMaxObjectListEntries) {
        return Fault("object_list_reply: too many entries");
      }
      for (const ObjectEntry& e : m.object_list_reply().objects()) {
        NANOKV_RETURN_IF_ERROR(Key(e.key(), "object_list_reply"));
        NANOKV_RETURN_IF_ERROR(Device(e.device(), false, "object_list_reply"));
        if (e.tier() > 1) return Fault("object_list_reply: tier " + std::to_string(e.tier()));
      }
      return Status::OK();
    case Message::kObjectInfoReply:
      if (m.object_info_reply().devices_size() > kMaxObjectInfoDevices) {
        return Fault("object_info_reply: more than " + std::to_string(kMaxObjectInfoDevices) + " devices");
      }
      for (const ObjectStoreDevice& d : m.object_info_reply().devices()) {
        NANOKV_RETURN_IF_ERROR(Device(d.device(), false, "object_info_reply"));
        if (d.used_bytes() > d.store_bytes()) return Fault("object_info_reply: more used than the store holds");
        if (d.host_used_bytes() > d.host_bytes()) {
          return Fault("object_info_reply: more used than the host tier holds");
        }
        if (d.owners_size() > kMaxObjectStoreOwners) {
          return Fault("object_info_reply: more than " + std::to_string(kMaxObjectStoreOwners) + " owners a device");
        }
        if (d.slab_list_size() > kMaxObjectInfoSlabs || static_cast<uint32_t>(d.slab_list_size()) > d.slabs()) {
          return Fault("object_info_reply: " + std::to_string(d.slab_list_size()) + " slabs listed of " +
                       std::to_string(d.slabs()) + " (at most " + std::to_string(kMaxObjectInfoSlabs) + ")");
        }
        for (const ObjectSlabEntry& slab : d.slab_list()) {
          if (slab.unannounced_bytes() > slab.payload_bytes() || slab.payload_bytes() > d.store_bytes() ||
              slab.slots_taken() > slab.header_slots() || slab.header_slots() > kMaxSlabHeaderSlots) {
            return Fault("object_info_reply: slab " + std::to_string(slab.slab_id()) + " out of range");
          }
        }
      }
      return Status::OK();
    case Message::kObjectReadTableReply: {
      const ObjectReadTableReply& r = m.object_read_table_reply();
      if (r.entries() == 0 || r.entries() > kMaxReadTableEntries) {
        return Fault("object_read_table_reply: " + std::to_string(r.entries()) + " entries a device, not 1-" +
                     std::to_string(kMaxReadTableEntries));
      }
      if (r.devices_size() == 0 || r.devices_size() > kMaxObjectInfoDevices) {
        return Fault("object_read_table_reply: " + std::to_string(r.devices_size()) + " devices");
      }
      for (int32_t device : r.devices()) NANOKV_RETURN_IF_ERROR(Device(device, false, "object_read_table_reply"));
      return Status::OK();
    }
    case Message::kObjectLeaseReply:
      return m.object_lease_reply().has_plan() ? Plan(m.object_lease_reply().plan()) : Status::OK();
    case Message::kObjectLeaseBatch:
      return Batch(m.object_lease_batch().keys_size(), "object_lease_batch", [&](int i) {
        return Key(m.object_lease_batch().keys(i), "object_lease_batch");
      });
    case Message::kObjectLeaseBatchReply:
      return Batch(m.object_lease_batch_reply().items_size(), "object_lease_batch_reply", [&](int i) {
        const ObjectLeaseItem& item = m.object_lease_batch_reply().items(i);
        if (item.code() > static_cast<uint32_t>(kLastCode)) {
          return Fault("object_lease_batch_reply: code " + std::to_string(item.code()));
        }
        if (item.message().size() > kMaxErrorBytes) return Fault("object_lease_batch_reply: message too long");
        return item.code() == 0 ? Plan(item.plan()) : Status::OK();
      });
    case Message::kObjectReleaseBatch:
      // Any id is well formed: one kvd does not hold (or the peer's uid
      // does not) is answered as not released.
      return Batch(
          m.object_release_batch().lease_ids_size(), "object_release_batch", [](int) { return Status::OK(); },
          kMaxReleaseBatch);
    case Message::kObjectSlab: {
      const ObjectSlabRequest& r = m.object_slab();
      NANOKV_RETURN_IF_ERROR(Device(r.device(), false, "object_slab"));
      if (r.payload_bytes() == 0) return Fault("object_slab: 0 payload bytes");
      return SlabSizes(r.header_slots(), r.ring_records(), "object_slab");
    }
    case Message::kObjectSlabReply:
      return SlabReply(m.object_slab_reply());
    case Message::kObjectSlabRelease:
      if (m.object_slab_release().slab_id() == 0) return Fault("object_slab_release: slab id 0");
      return Status::OK();
    case Message::kObjectInfo:
    case Message::kObjectList:
    case Message::kObjectEvictReply:
    case Message::kObjectAck:
    case Message::kObjectReleaseBatchReply:
    case Message::kObjectReadTable:
      return Status::OK();
    default:
      return Fault("not an object store message");
  }
}

}  // namespace nanokv::wire
