// The object store's eviction policy on its own: FIFO and LRU order, the
// pin and lease rules of choice, and that choosing takes nothing away (the
// caller drops or moves the victim).
#include "daemon/objects/eviction_order.h"

#include <deque>
#include <set>
#include <string>

#include <gtest/gtest.h>

namespace nanokv::kvd {
namespace {

class EvictionOrderTest : public ::testing::Test {
 protected:
  StoredObject* Ready(uint64_t seq, uint64_t last_access_ns, ObjectPin pin = ObjectPin::kNone) {
    StoredObject& object = objects_.emplace_back();
    object.key = "k" + std::to_string(seq);
    object.seq = seq;
    object.last_access_ns = last_access_ns;
    object.state = ObjectState::kReady;
    object.pin = pin;
    return &object;
  }
  static bool NeverLeased(StoredObject&) { return false; }
  std::deque<StoredObject> objects_;  // stable addresses
};

TEST_F(EvictionOrderTest, FifoPicksTheOldestAndLruTheLeastRecentlyRead) {
  EvictionOrder fifo(EvictionPolicy::kFifo), lru(EvictionPolicy::kLru);
  StoredObject* first = Ready(1, 300);
  StoredObject* second = Ready(2, 100);
  for (EvictionOrder* order : {&fifo, &lru}) {
    order->Add(first);
    order->Add(second);
  }
  EXPECT_EQ(fifo.PickVictim(NeverLeased), first);
  EXPECT_EQ(lru.PickVictim(NeverLeased), second);
  // A read moves an object to the back under LRU, not under FIFO.
  lru.Touch(second, 400);
  EXPECT_EQ(second->last_access_ns, 400u);
  EXPECT_EQ(lru.PickVictim(NeverLeased), first);
}

TEST_F(EvictionOrderTest, ChoosingTakesNothingAway) {
  EvictionOrder order(EvictionPolicy::kFifo);
  StoredObject* only = Ready(1, 0);
  order.Add(only);
  EXPECT_EQ(order.PickVictim(NeverLeased), only);
  EXPECT_EQ(order.PickVictim(NeverLeased), only);  // still there: the caller removes it
  EXPECT_EQ(order.size(), 1u);
  order.Remove(only);
  EXPECT_FALSE(order.Contains(*only));
  EXPECT_EQ(order.PickVictim(NeverLeased), nullptr);
}

TEST_F(EvictionOrderTest, LeasedAndHardPinnedNeverGoSoftPinnedLast) {
  EvictionOrder order(EvictionPolicy::kFifo);
  StoredObject* hard = Ready(1, 0, ObjectPin::kHard);
  StoredObject* soft = Ready(2, 0, ObjectPin::kSoft);
  StoredObject* leased = Ready(3, 0);
  StoredObject* plain = Ready(4, 0);
  for (StoredObject* object : {hard, soft, leased, plain}) order.Add(object);
  std::set<const StoredObject*> asked;
  auto is_leased = [&](StoredObject& object) {
    asked.insert(&object);
    return &object == leased;
  };
  EXPECT_EQ(order.PickVictim(is_leased), plain);  // after the soft pin in order, but unpinned
  EXPECT_FALSE(asked.contains(hard));             // a hard pin is not even asked about
  order.Remove(plain);
  EXPECT_EQ(order.PickVictim(is_leased), soft);  // nothing unpinned may go now
  order.Remove(soft);
  EXPECT_EQ(order.PickVictim(is_leased), nullptr);
}

TEST_F(EvictionOrderTest, OnlyReadyObjectsAreCandidates) {
  EvictionOrder order(EvictionPolicy::kLru);
  StoredObject* writing = Ready(1, 0);
  writing->state = ObjectState::kWriting;
  order.Add(writing);
  EXPECT_EQ(order.size(), 0u);
  EXPECT_EQ(order.PickVictim(NeverLeased), nullptr);
}

}  // namespace
}  // namespace nanokv::kvd
