// kvd's configuration: a YAML file (configs/kvd.yaml documents every key),
// then command-line flags over it (kvd_flags.h). Every error names the file,
// the line and the key, or the flag, and nothing starts on a config that did
// not load whole.
#ifndef NANOKV_DAEMON_CONFIG_CONFIG_H_
#define NANOKV_DAEMON_CONFIG_CONFIG_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/human_size.h"
#include "daemon/config/group_config.h"
#include "daemon/config/instance_config.h"
#include "daemon/config/master_link_config.h"
#include "daemon/config/object_store_config.h"
#include "base/yaml_field.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct KvdConfig {
  std::string ipc_name = "nanokv";
  std::string backend = "auto";          // auto | cuda | hip | host
  std::vector<int> devices;              // empty: every device the backend sees
  uint64_t page_bytes = 2u << 20;
  SizeOrShare capacity{0, 0.95};         // per device: bytes or a share of its memory
  uint32_t reserve_pages = 8;
  SizeOrShare default_limit{0, 0};       // 0: the node's capacity
  SizeOrShare limit_ceiling{0, 0};       // the most an engine may ask itself; 0: capacity
  std::vector<uid_t> allowed_uids;       // empty: kvd's own uid and root
  std::vector<gid_t> allowed_gids;       // a peer in one of these groups is allowed too
  GroupAccessMap groups;                 // who may join which tenant group (group_config.h)
  mode_t socket_mode = 0660;
  mode_t segment_mode = 0640;            // no write bits but the owner's (readers only read)
  std::optional<gid_t> group;            // owner group of socket and segment
  std::string log_level = "info";
  std::string run_dir;                   // empty: $NANOKV_RUN_DIR, else per user (base/naming.h)
  int host_devices = 1;                  // host backend: simulated devices
  uint64_t host_device_bytes = 0;        // host backend: memory per device (0: RAM)
  std::vector<InstanceConfig> instances; // engines the controller runs (configs/demo.yaml)
  ObjectStoreConfig object_store;        // size 0: no object store
  MasterLinkConfig master;               // no addresses: no cluster (daemon/cluster/)
  // After a restart: how long pages the previous kvd granted wait for their
  // engines to reconnect and hand them back (daemon/node/page_journal.h).
  std::chrono::milliseconds recovery_window{10'000};
  bool check_invariants = false;         // NodeState::CheckInvariants after each change (tests)
  // Connection limits (daemon/server/fd_budget.h): all peers together (0: 1024, less
  // if the open-file limit cannot hold that many next to every page), and one process.
  uint32_t max_connections = 0;
  uint32_t max_connections_per_process = 64;
  uint32_t busy_poll_us = 0;             // poll without sleeping after a request (0: off)
  // What operators see (observability_keys.h, docs/OPERATIONS.md).
  std::string log_file;                  // empty: stderr only; else stderr and appended here
  std::string log_format = "text";       // text | json (one JSON object per line)
  std::optional<uint16_t> metrics_port;  // unset: no /metrics; 0: a free port, logged
  std::string metrics_address = "127.0.0.1";
  // Where each key given was given: "<file>:<line>", or the flag; also
  // "object_store.size". A key left at its default is absent.
  std::map<std::string, std::string> where;

  // How an error about `key` starts, so that checks made once devices are
  // open (granularity, devices present, the store's size) name the place
  // too: "kvd.yaml:4: page_size", "--page-size", or "page_size" (a default).
  std::string Origin(const std::string& key) const;
};

// Loads `path` over the defaults. Errors: "<path>:<line>: <key>: <what>", the
// key spelled out to the field (`instances[1].command`). Everything is checked
// before this returns, each instance's command included (it exists and may be
// executed), so kvd refuses a bad file before it starts anything.
Result<KvdConfig> LoadConfigFile(const std::string& path);
// The same from YAML text (`origin` names it in errors); for tests. Relative
// paths resolve against `base_dir` (empty: the current directory).
Result<KvdConfig> LoadConfigText(const std::string& text, const std::string& origin,
                                 const std::string& base_dir = "");

// Sets the top-level `key` (e.g. "page_size") from `value`, a value given
// outside the file (a flag, kvd_flags.h), through the parser the file's key
// gets: the same rule, and an error naming where the value came from
// ("--page-size: '3MiB' is not a power of two"). kInvalidArgument for a key
// the config does not have. Validate the config once every value is set.
Status ApplyOverride(const std::string& key, const YamlField& value, KvdConfig* config);

// Semantic checks that need no device: names, ranges. Errors start with
// config.Origin(key).
Status Validate(const KvdConfig& config);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_CONFIG_H_
