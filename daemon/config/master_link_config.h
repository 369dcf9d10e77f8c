// kvd's `master:` block: the cluster master this node registers with
// (daemon/cluster/node_agent.h). Absent: kvd serves its node alone.
#ifndef NANOKV_DAEMON_CONFIG_MASTER_LINK_CONFIG_H_
#define NANOKV_DAEMON_CONFIG_MASTER_LINK_CONFIG_H_

#include <chrono>
#include <string>
#include <vector>

#include "base/yaml_field.h"
#include "ipc/master/master_channel.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// The data path between nodes (daemon/transfer/): how the transfer agent
// moves an object, in chunks through host staging buffers.
struct TransferConfig {
  uint64_t chunk_bytes = uint64_t{4} << 20;  // transfer.chunk: one staging buffer, one message
  uint32_t depth = 4;                         // transfer.depth: chunks in flight per transfer
  uint32_t staging_buffers = 32;              // transfer.staging_buffers: the agent's pool
  std::chrono::milliseconds timeout{10'000};  // transfer.timeout: a peer silent this long is dropped
};

struct MasterLinkConfig {
  std::vector<std::string> addresses;  // "host:port" of every master, tried in turn
  std::string node_id;                 // empty: the host name
  std::string data_address;            // host:port the transfer agent listens on; empty: no agent
  std::string host_id;                 // this host's identity; empty: the boot id (base/host_identity.h)
  TransferConfig transfer;
  std::string token_file;              // the cluster's token; empty: none sent
  master::TlsFiles tls;                // ca: speak TLS; cert + key: present them
  std::chrono::milliseconds retry_interval{500};  // between tries of an unanswering master
  bool enabled() const { return !addresses.empty(); }
};

// Reads the `master:` mapping (configs/kvd.yaml documents its keys).
Status ParseMasterLinkConfig(const YamlField& field, MasterLinkConfig* out);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_MASTER_LINK_CONFIG_H_
