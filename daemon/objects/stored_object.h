// One object as kvd's object store keeps it: a row of the object table
// (object_table.h). Its identity and life (key, state, epoch, leases, pin,
// owner) are the table's; where its bytes lie (device, slot, offset) is the
// store's over a placement (payload_placement.h); its rank is the eviction
// order's (eviction_order.h). Plain data: whoever holds the store's mutex
// reads and writes it.
#ifndef NANOKV_DAEMON_OBJECTS_STORED_OBJECT_H_
#define NANOKV_DAEMON_OBJECTS_STORED_OBJECT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "daemon/objects/owned_space.h"
#include "daemon/objects/payload_placement.h"
#include "nanokv/object_header.h"

namespace nanokv::kvd {

struct StoredObject {
  std::string key;
  uint64_t key_hash = 0;
  size_t device = 0;  // device index in the store
  uint32_t slot = 0;
  uint64_t payload_offset = 0;
  uint64_t bytes_total = 0;
  ObjectState state = ObjectState::kFree;
  uint32_t epoch = 0;
  uint64_t seq = 0;  // creation order (FIFO), unique
  uint64_t created_ns = 0;
  uint64_t deadline_ns = 0;  // RESERVED/WRITING: reclaimed after this
  uint64_t last_access_ns = 0;
  uint64_t rank = 0;                    // the eviction order key while READY
  std::map<uint64_t, uint64_t> leases;  // lease id -> expiry
  ObjectPin pin = ObjectPin::kNone;
  uint32_t owner = kKvdCallers;  // the producer's uid, its writer (Commit, Remove)
  uint64_t write_secret = 0;     // kvd's own callers' open plans: what their writer shows
  uint32_t record = 0;           // its object journal record
  // A write a restart found under way: its header slot was written free,
  // so the device header is not its (CheckInvariants skips it).
  bool restored_write = false;
  // Where its bytes are: the device's store (slot and payload_offset in
  // the store range), or the host tier under it (payload_offset in the
  // host range; no header slot).
  Tier tier = Tier::kGpu;
  // A move between tiers under way (object_index_moves.cc): space reserved
  // at the other tier while the bytes are copied. The object stays
  // readable where it is, and out of the eviction orders, until the move
  // ends.
  struct Move {
    bool active = false;
    Tier to = Tier::kGpu;
    uint64_t offset = 0;  // in the target's range
    uint32_t slot = 0;    // a promotion's header slot
    uint32_t epoch = 0;   // a promotion's new epoch
  };
  Move move;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_STORED_OBJECT_H_
