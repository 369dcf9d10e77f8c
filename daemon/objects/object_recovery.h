// A kvd restart's scan of the object store (as the nano_mooncake seed's
// recovery: READY objects return, anything else is reclaimed). Pure logic: the dead kvd's object journal for one device
// (object_journal.h: what kvd committed, and where) and host copies of that
// device's header pages in, the objects to put back out. The caller maps
// the store's pages back at their offsets, copies the header pages (one
// device-to-host copy each, at start: not request serving, so "no GPU work
// while serving" still holds) and restores what this
// returns (ObjectIndex::Create).
//
// A record's space is checked first, in the order kvd created the objects
// (first wins): no key or header slot twice, no payload range overlapping an
// earlier one or lying in a header page, every page (payload and header)
// holding one owner's objects only (the store's rule, "Owners"). A record
// failing that is reclaimed at once. Then its header, written by a producer
// kvd does not trust, is read as hostile input: an object comes back READY
// only if kvd committed it and its header says {READY, the record's epoch}
// with the record's key hash, payload range, size and page geometry. Any
// other (a write under way at the kill, a header scribbled) comes back as a
// write, holding its space until write_timeout and then reclaimed (the
// seed's "reclaim non-READY after timeout"): its producer may still be
// copying into that space through the mapping it has, so it must not go to
// another object at once.
//
// A host-tier record (object_store.host_tier) has no header: the host tier
// is kvd's own memory, written by kvd's copies only, and its record is
// written once the bytes are there. It comes back READY when its host tier
// came back whole and its range overlaps no earlier host-tier object's;
// else it is dropped, named in `dropped`. A move between the tiers cut by
// the kill leaves two records of one object (one creation order, both
// tiers, both copies whole): the host tier's is kept, the other skipped,
// so the object is in exactly one tier and counted once.
#ifndef NANOKV_DAEMON_OBJECTS_OBJECT_RECOVERY_H_
#define NANOKV_DAEMON_OBJECTS_OBJECT_RECOVERY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "daemon/objects/object_journal.h"

namespace nanokv::kvd {

struct RecoveredStore {
  std::vector<JournaledObject> objects;  // READY, to put back, in creation order
  uint64_t bytes = 0;                    // their bytes_total, summed
  std::vector<JournaledObject> writes;   // not READY: held until write_timeout, then reclaimed
  uint32_t reclaimed = 0;                // records refused at once, here or by the journal's decode
  // Where the device's epoch counter goes on from: the journal's last
  // epoch, or any recorded epoch newer (serial order), so every epoch issued
  // from now on is newer than every one a slot holds from kvd.
  uint32_t last_epoch = 0;
  std::vector<std::string> reasons;  // why, for the first few refused or not READY
  uint32_t moves_cut = 0;            // the other record of a move cut by the kill, skipped
  uint32_t host_dropped = 0;         // host-tier records whose tier did not come back
  std::vector<std::string> dropped;  // their keys, the first few
};

// `header_pages[h]`: header page ordinal h's bytes (page_bytes each; a
// shorter or missing page reclaims the objects whose slots it holds).
// `host_tier_back`: the device's host tier came back whole (same size,
// every page), so its records may return.
RecoveredStore ScanStore(const JournaledStore& store, uint64_t page_bytes,
                         std::span<const std::vector<std::byte>> header_pages, bool host_tier_back = false);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OBJECT_RECOVERY_H_
