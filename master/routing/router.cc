#include "master/routing/router.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace nanokv::master {
namespace {

// A 64-bit mix (splitmix64's finaliser): (key, store) -> a uniform word.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

double Score(const StoreView& store, uint64_t key_hash) {
  // u in (0, 1): 53 random bits, never 0 or 1.
  double u = (static_cast<double>(Mix(key_hash ^ store.id_hash) >> 11) + 0.5) / 9007199254740992.0;
  return StoreWeight(store) / -std::log(u);
}

}  // namespace

double StoreWeight(const StoreView& store) {
  const double capacity = static_cast<double>(store.capacity);
  const uint64_t routed = store.routed != nullptr ? store.routed->load(std::memory_order_relaxed) : 0;
  const double used = static_cast<double>(store.used + routed);
  const double free = std::max(0.0, capacity * store.high_watermark - used);
  // Room in the host tier under it counts too: its kvd demotes into it to
  // make room in the store, so a store full over a host tier with room is
  // not full (its writes wait for a move, never for a drop).
  const double host_free = static_cast<double>(store.host_capacity - std::min(store.host_used, store.host_capacity));
  return free + host_free + capacity * 0.01 + 1;
}

std::vector<size_t> RankStores(const std::vector<StoreView>& stores, uint64_t key_hash, const Segment& preferred,
                               uint64_t bytes) {
  // (preferred, score, index): the preferred segment outranks every score.
  std::vector<std::tuple<bool, double, size_t>> scored;
  scored.reserve(stores.size());
  for (size_t i = 0; i < stores.size(); ++i) {
    const StoreView& s = stores[i];
    if (s.capacity < bytes) continue;
    bool is_preferred = !preferred.node_id.empty() && s.node_id == preferred.node_id &&
                        (preferred.device < 0 || preferred.device == s.device);
    scored.emplace_back(is_preferred, Score(s, key_hash), i);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a);
    if (std::get<1>(a) != std::get<1>(b)) return std::get<1>(a) > std::get<1>(b);
    return std::get<2>(a) < std::get<2>(b);
  });
  std::vector<size_t> order;
  order.reserve(scored.size());
  for (const auto& entry : scored) order.push_back(std::get<2>(entry));
  return order;
}

}  // namespace nanokv::master
