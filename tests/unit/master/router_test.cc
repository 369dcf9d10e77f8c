// Routing: the preferred segment first, rendezvous by weight otherwise, and
// few keys move when a store joins.
#include <map>

#include <gtest/gtest.h>

#include "master/index/master_index.h"
#include "master/routing/router.h"

namespace nanokv::master {
namespace {

StoreView Store(uint16_t node, int device, uint64_t capacity, uint64_t used = 0) {
  StoreView s;
  s.node = node;
  s.node_id = "n" + std::to_string(node);
  s.device = device;
  s.capacity = capacity;
  s.used = used;
  s.high_watermark = 0.95;
  s.id_hash = KeyHash(s.node_id + "/" + std::to_string(device));
  return s;
}

TEST(Router, SpreadsKeysInProportionToFreeSpace) {
  std::vector<StoreView> stores = {Store(0, 0, 100 << 20), Store(1, 0, 200 << 20), Store(2, 0, 400 << 20, 200 << 20),
                                   Store(2, 1, 300 << 20)};
  double total = 0;
  for (const auto& s : stores) total += StoreWeight(s);
  std::vector<int> counts(stores.size());
  const int keys = 100'000;
  for (int i = 0; i < keys; ++i) {
    auto order = RankStores(stores, KeyHash("k" + std::to_string(i)), Segment{}, 1);
    ASSERT_EQ(order.size(), stores.size());
    ++counts[order[0]];
  }
  for (size_t i = 0; i < stores.size(); ++i) {
    double fair = keys * StoreWeight(stores[i]) / total;
    EXPECT_NEAR(counts[i], fair, fair * 0.03) << "store " << i;
  }
}

TEST(Router, PreferredSegmentFirstAndTooSmallStoresLeftOut) {
  std::vector<StoreView> stores = {Store(0, 0, 1 << 20), Store(1, 0, 64 << 20), Store(1, 1, 64 << 20),
                                   Store(2, 0, 64 << 20)};
  for (int i = 0; i < 100; ++i) {
    uint64_t hash = KeyHash("p" + std::to_string(i));
    auto node = RankStores(stores, hash, Segment{"n1", -1}, 100);
    EXPECT_EQ(stores[node[0]].node_id, "n1");
    EXPECT_EQ(stores[node[1]].node_id, "n1");
    auto device = RankStores(stores, hash, Segment{"n1", 1}, 100);
    EXPECT_EQ(device[0], 2u);
    auto big = RankStores(stores, hash, Segment{"n0", -1}, 2 << 20);
    EXPECT_EQ(big.size(), 3u) << "n0's 1 MiB store cannot hold 2 MiB";
    for (size_t s : big) EXPECT_NE(s, 0u);
  }
}

TEST(Router, AStoreJoiningMovesOnlyItsShare) {
  std::vector<StoreView> stores;
  for (uint16_t n = 0; n < 4; ++n) stores.push_back(Store(n, 0, 64 << 20));
  std::vector<StoreView> more = stores;
  more.push_back(Store(4, 0, 64 << 20));
  int moved = 0, to_new = 0;
  const int keys = 20'000;
  for (int i = 0; i < keys; ++i) {
    uint64_t hash = KeyHash("j" + std::to_string(i));
    size_t before = RankStores(stores, hash, Segment{}, 1)[0];
    size_t after = RankStores(more, hash, Segment{}, 1)[0];
    if (before != after) {
      ++moved;
      to_new += after == 4 ? 1 : 0;
    }
  }
  EXPECT_EQ(moved, to_new) << "a key moves only to the new store";
  EXPECT_NEAR(moved, keys / 5, keys / 50);
}

// The host tier under a store counts: its kvd demotes into it to make
// room, so a full store over a host tier with room still takes its share
// of new writes (each plan names the GPU store), and more than a full one
// without.
TEST(Router, RoomInTheHostTierCountsAndAFullStoreOverItIsNotFull) {
  StoreView full = Store(0, 0, 100 << 20, 100 << 20);
  StoreView over_tier = full;
  over_tier.host_capacity = 300 << 20;
  over_tier.host_used = 100 << 20;
  EXPECT_DOUBLE_EQ(StoreWeight(over_tier) - StoreWeight(full), double{200 << 20}) << "the host tier's free bytes";
  StoreView empty = Store(1, 0, 100 << 20);
  EXPECT_GT(StoreWeight(over_tier), StoreWeight(empty)) << "200 MiB of room below it against 95 MiB";
  over_tier.host_used = 400 << 20;  // a report past its size counts as full, never negative
  EXPECT_DOUBLE_EQ(StoreWeight(over_tier), StoreWeight(full));
  // Keys spread by both tiers' room.
  std::vector<StoreView> stores = {full, empty};
  stores[0].host_capacity = 300 << 20;
  stores[0].host_used = 100 << 20;
  int to_full = 0;
  for (int i = 0; i < 20'000; ++i)
    to_full += RankStores(stores, KeyHash("h" + std::to_string(i)), Segment{}, 1)[0] == 0;
  const double share = StoreWeight(stores[0]) / (StoreWeight(stores[0]) + StoreWeight(stores[1]));
  EXPECT_NEAR(to_full, 20'000 * share, 20'000 * 0.03);
}

}  // namespace
}  // namespace nanokv::master
