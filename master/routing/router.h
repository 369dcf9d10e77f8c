// Where a new object goes. The preferred segment first, when its node is
// alive and its store can hold the object at all (the owner makes room by its
// watermarks, as today; a refusal sends the master to the next store); then
// every live store by weighted rendezvous hashing of the key: each store
// scores weight / -ln(u), u a hash of (key, store) in (0, 1), highest first.
// So keys spread over the stores in proportion to their weights, a store's
// weight being its free space (below its high watermark, plus the room in
// the host tier under it, plus 1% of its capacity so a full store still
// takes a share as it evicts); a plan always names the GPU store, whose kvd
// makes room by demoting into its host tier; and when a
// node joins or leaves, only the keys whose best store changed move.
//
// Pure functions over a view of the stores: tested directly.
#ifndef NANOKV_MASTER_ROUTING_ROUTER_H_
#define NANOKV_MASTER_ROUTING_ROUTER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ipc/master/master_checks.h"
#include "master/nodes/node_registry.h"

namespace nanokv::master {

// The routing weight of a store: free bytes below its high watermark (the
// plans routed since its last report counted as used) + free bytes in its
// host tier + 1% of its capacity.
double StoreWeight(const StoreView& store);

// Indexes into `stores` in the order to try for a key of `key_hash` and
// `bytes`: the preferred segment's stores (alive ones), then the rest by
// rendezvous score. Stores whose capacity is under `bytes` are left out.
std::vector<size_t> RankStores(const std::vector<StoreView>& stores, uint64_t key_hash, const Segment& preferred,
                               uint64_t bytes);

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_ROUTING_ROUTER_H_
