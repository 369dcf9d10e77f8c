// The v2 slabs kvd's object store has granted (issue 34; object_index.h,
// "v2 slabs"): what each holds of a device's store, its announce ring, and
// who may end it. Plain data and lookups: the store (object_index_slabs.cc)
// moves space in and out under its mutex.
#ifndef NANOKV_DAEMON_OBJECTS_SLAB_TABLE_H_
#define NANOKV_DAEMON_OBJECTS_SLAB_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "daemon/node/node_state.h"
#include "ipc/ring/announce_ring.h"

namespace nanokv::kvd {

// A slab's payload spans at most this many pages (8 GiB of 2 MiB): their
// ids go in one reply (wire::kMaxSlabPayloadPages), their write fds by
// object_pages naming the slab.
inline constexpr uint64_t kMaxSlabPages = 4096;

// What a producer asks for.
struct SlabRequest {
  int device = 0;  // kvd's ordinal
  uint64_t payload_bytes = 0;
  uint32_t header_slots = 0;
  uint32_t ring_records = 0;  // a power of two
};

// What kvd granted. Offsets are into the device's store range.
struct SlabGrant {
  uint64_t id = 0;
  int device = 0;
  uint64_t payload_offset = 0;
  uint64_t payload_bytes = 0;  // the request's, rounded up to kPayloadAlignment
  uint64_t header_offset = 0;  // the slab's first header slot
  uint32_t header_slots = 0;
  uint32_t first_epoch = 0;  // slot i's object has epoch first_epoch + i
  uint32_t ring_records = 0;
  uint64_t expires_ns = 0;
  uint64_t page_bytes = 0;
  uint64_t store_bytes = 0;
  // The store pages the producer writes: the header page, then the payload's.
  PageId header_page = 0;
  std::vector<PageId> payload_pages;
  int ring_fd = -1;  // the announce ring's memfd: the caller sends and closes it
};

// kvd's counters since start (kvctl, /metrics).
struct SlabCounters {
  uint64_t granted = 0;
  uint64_t announced = 0;  // objects indexed from rings
  uint64_t poisoned = 0;   // rings that broke a rule
  uint64_t expired = 0;    // slabs ended by slab_ttl
  uint64_t lost_keys = 0;  // announced objects whose key was taken already
  size_t live = 0;
};

struct GrantedSlab {
  uint64_t id = 0;
  size_t d = 0;  // device index in the store
  uint32_t owner = 0;
  uint64_t held_by = 0;         // the granting connection's serial
  uint64_t payload_offset = 0;  // store range
  uint64_t payload_bytes = 0;
  uint32_t first_slot = 0;
  uint32_t header_slots = 0;
  uint32_t first_epoch = 0;
  uint64_t expires_ns = 0;
  // Payload still the slab's, never announced: store offset -> end. Each
  // is a live range of the owner's in the device's OwnedSpace.
  std::map<uint64_t, uint64_t> unannounced;
  std::vector<bool> slot_taken;  // slots an object was indexed in
  uint32_t slots_left = 0;       // slots not taken
  ipc::AnnounceRing ring;
};

class SlabTable {
 public:
  uint64_t NextId() { return ++last_id_; }
  GrantedSlab& Insert(GrantedSlab slab) {
    const uint64_t id = slab.id;
    return *(slabs_[id] = std::make_unique<GrantedSlab>(std::move(slab)));
  }
  GrantedSlab* Find(uint64_t id) {
    auto it = slabs_.find(id);
    return it == slabs_.end() ? nullptr : it->second.get();
  }
  void Erase(uint64_t id) { slabs_.erase(id); }
  size_t CountOf(uint32_t owner) const {
    size_t n = 0;
    for (const auto& [id, slab] : slabs_) n += slab->owner == owner ? 1 : 0;
    return n;
  }
  // Ids, so the caller may end slabs while it walks them.
  std::vector<uint64_t> Ids() const {
    std::vector<uint64_t> ids;
    for (const auto& [id, slab] : slabs_) ids.push_back(id);
    return ids;
  }
  const std::map<uint64_t, std::unique_ptr<GrantedSlab>>& all() const { return slabs_; }
  size_t size() const { return slabs_.size(); }
  SlabCounters counters;

 private:
  uint64_t last_id_ = 0;
  std::map<uint64_t, std::unique_ptr<GrantedSlab>> slabs_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_SLAB_TABLE_H_
