// The eviction policy of one store: the order in which its READY objects
// leave (FIFO: creation order; LRU: last access) and which one may go next.
// It only chooses: its caller drops the victim, or moves it one tier down,
// so a tier under the store changes the caller, not the policy.
//
// Rules of choice (object_index.h, invariant 3): a leased object never
// goes, a hard-pinned one never, a soft-pinned one only when no unpinned
// object can. Whether an object is leased is the object table's to say
// (leases expire on its clock), so the caller passes that test in.
//
// Not thread-safe: the store's mutex guards it, as it guards the objects.
#ifndef NANOKV_DAEMON_OBJECTS_EVICTION_ORDER_H_
#define NANOKV_DAEMON_OBJECTS_EVICTION_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <tuple>

#include "daemon/config/object_store_config.h"
#include "daemon/objects/stored_object.h"

namespace nanokv::kvd {

class EvictionOrder {
 public:
  explicit EvictionOrder(EvictionPolicy policy) : policy_(policy) {}

  // A READY object becomes a candidate, ranked by the policy now (its rank
  // is set here). Objects in other states, or moving between tiers, are
  // ignored.
  void Add(StoredObject* object);
  void Remove(StoredObject* object);
  // The object was read at `now_ns`: LRU moves it to the back.
  void Touch(StoredObject* object, uint64_t now_ns);
  bool Contains(const StoredObject& object) const;
  size_t size() const { return order_.size(); }

  // The first candidate in policy order that may go, or nullptr:
  // unpinned ones first, soft-pinned ones only when no unpinned one may.
  // `leased` says whether a candidate is held by a read lease (it may prune
  // expired leases of the object, never reorder the candidates).
  StoredObject* PickVictim(const std::function<bool(StoredObject&)>& leased) const;

 private:
  using Key = std::tuple<uint64_t, uint64_t, StoredObject*>;  // (rank, seq, object)
  StoredObject* FirstMayGo(bool soft, const std::function<bool(StoredObject&)>& leased) const;

  EvictionPolicy policy_;
  std::set<Key> order_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_EVICTION_ORDER_H_
