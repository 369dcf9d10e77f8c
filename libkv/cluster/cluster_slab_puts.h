// ClusterClient's device puts through slabs of this node's store
// (cluster_slab_puts.cc).
#ifndef NANOKV_LIBKV_CLUSTER_CLUSTER_SLAB_PUTS_H_
#define NANOKV_LIBKV_CLUSTER_CLUSTER_SLAB_PUTS_H_

#include <cstddef>
#include <vector>

#include "nanokv/cluster_client.h"

namespace nanokv::cluster {

// Puts the items a slab of this node's store takes (after UseSlabs; one
// replica, preferred segment "", this node or one of its devices), their
// statuses in out[i]; returns the indices of the others, for the master's
// plans.
std::vector<size_t> PutThroughSlabs(ClusterClient::Impl& impl, const std::vector<DevicePut>& items, void* stream,
                                    std::vector<Status>& out);

}  // namespace nanokv::cluster

#endif  // NANOKV_LIBKV_CLUSTER_CLUSTER_SLAB_PUTS_H_
