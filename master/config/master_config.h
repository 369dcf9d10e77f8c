// The cluster master's configuration (kvd --role master): a YAML file
// (configs/master.yaml documents every key), then command-line flags over it
// (master_flags.h). Every key is read through base/yaml_field.h, so errors
// are "<file>:<line>: <key>: <what>" like kvd's, and nothing starts on a
// config that did not load whole.
#ifndef NANOKV_MASTER_CONFIG_MASTER_CONFIG_H_
#define NANOKV_MASTER_CONFIG_MASTER_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/yaml_field.h"
#include "ipc/master/master_channel.h"
#include "nanokv/status.h"

namespace nanokv::master {

// The `etcd:` block: with endpoints, masters elect a leader through an etcd
// lease (master/election/) and the leader keeps its nodes' ids there;
// without, the master leads alone at `term`.
struct EtcdLink {
  std::vector<std::string> endpoints;       // "host:port", "http://..." or "https://..."
  std::string prefix = "/nanokv/default";   // the cluster's keys: <prefix>/leader/..., <prefix>/nodes/...
  std::chrono::milliseconds lease_ttl{3000};  // the leader's lease: a dead leader is replaced after about this
  TlsFiles tls;                             // ca: speak TLS to etcd; cert + key: present them
  bool enabled() const { return !endpoints.empty(); }
  std::string election_key() const { return prefix + "/leader"; }
  std::string nodes_prefix() const { return prefix + "/nodes/"; }
};

struct MasterConfig {
  std::string id;                         // empty: the host name
  std::string listen = "127.0.0.1:7470";  // host:port of the gRPC service
  std::string advertise;                  // told to whoever asks who leads; empty: listen
  std::string token_file;                 // empty: no token asked (loopback or a trusted network)
  TlsFiles tls;                           // cert + key: serve TLS; ca too: require client certs
  std::chrono::milliseconds lease_ttl{3000};            // a node silent this long is dead
  std::chrono::milliseconds heartbeat_interval{1000};   // told to nodes; below lease_ttl / 2
  std::chrono::milliseconds instruction_timeout{5000};  // a node's answer to an order
  // After the master starts to lead: object calls answer kUnavailable until
  // expected_nodes nodes registered (0: no count) or this long passed, so a
  // restarted master does not answer "not found" for keys a node has not
  // reported yet.
  std::chrono::milliseconds rebuild_window{3000};
  uint32_t expected_nodes = 0;
  // The objects one node may have in the index; what a node reports past
  // it is not indexed. The default is the most kvd keeps on one device
  // (its object journal's bound), so only a node of several full devices,
  // or a peer that lies, meets it.
  uint64_t max_objects_per_node = 1u << 22;
  // Without etcd a master leads alone at this term. Start a replacement
  // single master with a higher one: kvds that followed it refuse the old.
  uint64_t term = 1;
  EtcdLink etcd;  // endpoints empty: no election, the master leads alone
  std::string log_level = "info";
  // What operators see, read as kvd reads them (ops/observability_keys.h).
  std::string log_file;                   // empty: stderr only
  std::string log_format = "text";        // or "json"
  std::optional<uint16_t> metrics_port;   // unset: no /metrics
  std::string metrics_address = "127.0.0.1";
};

Result<MasterConfig> LoadMasterConfigFile(const std::string& path);
// From YAML text (`origin` names it in errors); for tests.
Result<MasterConfig> LoadMasterConfigText(const std::string& text, const std::string& origin);
// Sets the top-level `key` from a value given outside the file (a flag),
// through the file key's reader. kInvalidArgument for a key there is not.
Status ApplyMasterOverride(const std::string& key, const YamlField& value, MasterConfig* config);
// Checks across keys (heartbeat below the lease, an address with a port...).
Status ValidateMasterConfig(const MasterConfig& config);

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_CONFIG_MASTER_CONFIG_H_
