// What kvd's object store tells those around it, apart from ObjectIndex
// itself (object_index.h): the events a listener hears, each device's
// figures, and the dead store a restart brings back.
#ifndef NANOKV_DAEMON_OBJECTS_OBJECT_STORE_TYPES_H_
#define NANOKV_DAEMON_OBJECTS_OBJECT_STORE_TYPES_H_

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "daemon/node/node_state.h"
#include "daemon/objects/object_journal.h"
#include "daemon/objects/payload_placement.h"

namespace nanokv::kvd {

// What happened to an object, for a listener (kvd's cluster node agent,
// daemon/cluster/): READY at its commit, a move between its device's tiers
// (kMoved: `tier` and `epoch` are where it is now), and each way an object
// goes.
struct ObjectEvent {
  enum class Kind { kReady, kRemoved, kEvicted, kReclaimed, kRevoked, kMoved };
  Kind kind = Kind::kReady;
  std::string_view key;  // valid only during the call
  int device = 0;        // kvd's ordinal
  uint32_t epoch = 0;
  uint64_t bytes_total = 0;
  Tier tier = Tier::kGpu;
};

struct StoreDeviceStats {
  int device = 0;
  uint32_t pages = 0;         // store pages held from the pool
  uint32_t header_pages = 0;  // the arena's and those taken from payload since
  uint32_t header_slots = 0;
  uint32_t shared_free_pages = 0;            // payload pages no owner has
  std::map<uint32_t, uint32_t> owned_pages;  // owner (uid, kOperator) -> pages, header pages included
  uint64_t payload_capacity = 0;
  uint64_t payload_used = 0;  // allocated (rounded) bytes
  uint32_t objects = 0;       // live: RESERVED, WRITING or READY
  uint64_t evictions = 0;
  uint64_t reclaimed_writes = 0;  // zombies past write_timeout
  // The restart that made this store: objects back READY,
  // their bytes, writes held until write_timeout, and records refused at once.
  uint32_t recovered_objects = 0;
  uint64_t recovered_bytes = 0;
  uint32_t recovered_writes = 0;
  uint32_t refused_records = 0;
  // The host tier under this device's store (zero without one).
  uint64_t host_capacity = 0;
  uint64_t host_used = 0;
  uint32_t host_objects = 0;
  uint64_t demotions = 0;       // moved down into the host tier
  uint64_t promotions = 0;      // moved back up into the store
  uint64_t host_evictions = 0;  // dropped from the host tier
  uint64_t gpu_hits = 0;        // locates answered from the store
  uint64_t host_hits = 0;       // locates that found the object in the host tier
  // v2 slabs granted here, oldest first.
  struct Slab {
    uint64_t id = 0;
    uint32_t owner = 0;  // a uid, or ObjectIndex::kOperator
    uint64_t payload_bytes = 0;
    uint64_t unannounced_bytes = 0;
    uint32_t header_slots = 0;
    uint32_t slots_taken = 0;
    uint64_t expires_ns = 0;
  };
  std::vector<Slab> slabs;
};

// A dead kvd's store to bring back (object_recovery.h):
// what its object journal says, and its store pages handed back (fds of
// the page keeper's) to adopt into the new store's tenant by id and
// generation: the same memory at the same offsets.
struct StoreRestart {
  JournaledStores previous;
  std::map<int, std::vector<AdoptPage>> pages;  // by device ordinal; Create takes every fd
  // Its host tiers' memfds, by device ordinal and page number; Create takes
  // every fd (object_index_restore.cc).
  std::map<int, std::map<uint32_t, int>> host_pages;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OBJECT_STORE_TYPES_H_
