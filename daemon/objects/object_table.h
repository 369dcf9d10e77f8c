// The object table of kvd's object store: objects by key (stored_object.h),
// their read leases and the object journal that keeps the table across a
// kvd restart. It knows nothing of where payload lies or what goes when the
// store is full (object_index.h composes those); it answers which objects
// exist, who reads them, and records what kvd must remember.
//
// Leases: every lease by id. Ids grow with time and lease_ttl is one for
// all, so id order is expiry order: pruning pops from the front. Held
// leases (no expiry: a view in a live process) take ids from
// kFirstHeldLease up, after every timed one, so they never stop a prune
// short of an expired lease. A lease taken over a connection is also listed
// under it, so the connection's close ends it however long it had left: an
// engine killed mid-read holds nothing (EndConnectionLeases). A lease loop
// cannot grow kvd without bound: expired leases are pruned before every
// acquire (unbounded, 308k acquires in 15 s took kvd from 11 to 30 MB).
//
// Not thread-safe: the store's mutex guards it.
#ifndef NANOKV_DAEMON_OBJECTS_OBJECT_TABLE_H_
#define NANOKV_DAEMON_OBJECTS_OBJECT_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "daemon/config/object_store_config.h"
#include "daemon/objects/object_journal.h"
#include "daemon/objects/stored_object.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// A read lease as the table keeps it: its id and when it ends on kvd's
// steady clock (the engine's ObjectLease carries the time left instead).
struct LeaseExpiry {
  uint64_t id = 0;
  uint64_t expires_ns = 0;
};

class ObjectTable {
 public:
  explicit ObjectTable(const ObjectStoreConfig& config) : config_(config) {}

  StoredObject* Find(std::string_view key);
  // REQUIRES: no object under `object.key`. The pointer stays valid until
  // Erase (node-based map).
  StoredObject* Insert(StoredObject object);
  // Forgets the object's leases, then the object. Invalidates `object`.
  void Erase(StoredObject* object);
  const std::unordered_map<std::string, StoredObject>& objects() const { return objects_; }
  // Creation order: unique, growing; a restart resumes after what it found.
  uint64_t NextSeq() { return next_seq_++; }
  void SeenSeq(uint64_t seq) { next_seq_ = std::max(next_seq_, seq + 1); }

  // Whether `object` holds an unexpired lease; drops its expired ones.
  bool Leased(StoredObject& object, uint64_t now_ns);
  // Drops expired leases of every object, oldest first.
  void PruneLeases(uint64_t now_ns);
  // A new lease on READY `object` for `holder` (a uid), ended by the close
  // of `connection` (a serial; 0: none) and, unless `held` (which needs a
  // connection), by lease_ttl. kResourceExhausted naming
  // object_store.max_leases when `holder` holds that many already.
  Result<LeaseExpiry> AddLease(StoredObject& object, uint32_t holder, uint64_t now_ns, uint64_t connection, bool held);
  // kNotFound when `lease_id` is not held on `object`; kPermissionDenied
  // when it is another uid's and `holder` is not kKvdCallers.
  Status ReleaseLease(StoredObject& object, uint64_t lease_id, uint64_t now_ns, uint32_t holder);
  // ReleaseLease by id alone (the lease list knows its object): a batch's
  // release. kNotFound when not held (released, expired, unknown).
  Status ReleaseLeaseById(uint64_t lease_id, uint64_t now_ns, uint32_t holder);
  // Ends every lease of `connection` (it closed). Returns how many.
  size_t EndConnectionLeases(uint64_t connection);
  size_t lease_count() const { return leases_.size(); }
  size_t lease_count(uint32_t holder) const;
  // Every object's leases are in the lease list under it, and the holder
  // counts add up.
  Status CheckLeases() const;

  // The object journal (nullptr until installed). Journal records `object`
  // as it stands, in either tier, at its record; ClearRecord
  // forgets record `record` of device index `d`.
  void InstallJournal(std::unique_ptr<ObjectJournal> journal) { journal_ = std::move(journal); }
  ObjectJournal* journal() { return journal_.get(); }
  void Journal(const StoredObject& object);
  void ClearRecord(size_t d, uint32_t record);
  // A stop: the journal file goes with the store's memory.
  void RemoveJournal();

 private:
  // Forgets lease `id` in the holder counts; the caller erases it from its object.
  void ForgetLease(uint64_t id);

  const ObjectStoreConfig config_;
  std::unordered_map<std::string, StoredObject> objects_;  // node-based: pointers stay valid
  uint64_t next_seq_ = 1;
  uint64_t next_lease_ = 1;
  struct LeaseRecord {
    StoredObject* object;
    uint32_t holder;
    uint64_t connection = 0;  // whose close ends the lease, else 0
  };
  static constexpr uint64_t kFirstHeldLease = uint64_t{1} << 63;
  uint64_t next_held_lease_ = kFirstHeldLease;
  std::map<uint64_t, LeaseRecord> leases_;
  std::unordered_map<uint64_t, std::set<uint64_t>> connection_leases_;  // connection -> its lease ids
  std::unordered_map<uint32_t, uint32_t> leases_per_holder_;
  std::unique_ptr<ObjectJournal> journal_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_OBJECT_TABLE_H_
