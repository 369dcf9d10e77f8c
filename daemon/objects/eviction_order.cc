#include "daemon/objects/eviction_order.h"

namespace nanokv::kvd {

void EvictionOrder::Add(StoredObject* object) {
  // An object moving between tiers is nobody's candidate until it lands.
  if (object->state != ObjectState::kReady || object->move.active) return;
  object->rank = policy_ == EvictionPolicy::kFifo ? object->seq : object->last_access_ns;
  order_.insert({object->rank, object->seq, object});
}

void EvictionOrder::Remove(StoredObject* object) { order_.erase({object->rank, object->seq, object}); }

void EvictionOrder::Touch(StoredObject* object, uint64_t now_ns) {
  Remove(object);
  object->last_access_ns = now_ns;
  Add(object);
}

bool EvictionOrder::Contains(const StoredObject& object) const {
  return order_.contains({object.rank, object.seq, const_cast<StoredObject*>(&object)});
}

StoredObject* EvictionOrder::FirstMayGo(bool soft, const std::function<bool(StoredObject&)>& leased) const {
  for (const Key& entry : order_) {
    StoredObject* object = std::get<2>(entry);
    if (object->pin == ObjectPin::kHard) continue;
    if (object->pin == ObjectPin::kSoft && !soft) continue;
    if (leased(*object)) continue;
    return object;
  }
  return nullptr;
}

StoredObject* EvictionOrder::PickVictim(const std::function<bool(StoredObject&)>& leased) const {
  if (StoredObject* victim = FirstMayGo(false, leased)) return victim;
  return FirstMayGo(true, leased);
}

}  // namespace nanokv::kvd
