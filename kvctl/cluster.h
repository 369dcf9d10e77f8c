// kvctl's cluster views and command, asked of the cluster master over its
// gRPC service (ClusterClient): `kvctl cluster` (who leads, the term, every
// node with its address, devices, store use, objects, last heartbeat and
// state), `kvctl objects --cluster` (where each key's copies are) and
// `kvctl evict --cluster KEY...` (a key removed from every node that holds it).
#ifndef NANOKV_KVCTL_CLUSTER_H_
#define NANOKV_KVCTL_CLUSTER_H_

#include <string>
#include <vector>

#include "kvctl/commands.h"
#include "nanokv/cluster_client.h"

namespace nanokv::kvctl {

// How kvctl reaches the master: --master (else $NANOKV_MASTERS), --token-file
// (else $NANOKV_TOKEN_FILE), --tls-ca/--tls-cert/--tls-key.
struct MasterFlags {
  std::vector<std::string> masters;
  std::string token_file;
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
};

std::string ClusterView(const ClusterStatus& status, bool json, bool colour);
std::string ClusterObjectsView(const std::vector<ObjectLocation>& objects, bool json);

Result<Report> RunCluster(const MasterFlags& flags, bool json, bool colour);
Result<Report> RunClusterObjects(const MasterFlags& flags, bool json);
// Removes `keys` from every node; the exit code is the first failure's.
Result<Report> RunClusterEvict(const MasterFlags& flags, const std::vector<std::string>& keys, bool json);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_CLUSTER_H_
