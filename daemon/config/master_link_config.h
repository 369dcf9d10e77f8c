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

struct MasterLinkConfig {
  std::vector<std::string> addresses;  // "host:port" of every master, tried in turn
  std::string node_id;                 // empty: the host name
  std::string data_address;            // this node's data path, told to the master (cross-node transfers)
  std::string token_file;              // the cluster's token; empty: none sent
  master::TlsFiles tls;                // ca: speak TLS; cert + key: present them
  std::chrono::milliseconds retry_interval{500};  // between tries of an unanswering master
  bool enabled() const { return !addresses.empty(); }
};

// Reads the `master:` mapping (configs/kvd.yaml documents its keys).
Status ParseMasterLinkConfig(const YamlField& field, MasterLinkConfig* out);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_MASTER_LINK_CONFIG_H_
