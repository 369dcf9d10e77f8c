// kvd's keys for what operators see (docs/OPERATIONS.md): log_file,
// log_format, metrics_port, metrics_address. In a file of their own beside
// config.cc's table, read through the same YamlField rules, so their errors
// name file:line: key (or the flag) like every other key's.
#ifndef NANOKV_DAEMON_CONFIG_OBSERVABILITY_KEYS_H_
#define NANOKV_DAEMON_CONFIG_OBSERVABILITY_KEYS_H_

#include <functional>
#include <map>
#include <string>

#include "daemon/config/yaml_field.h"
#include "nanokv/status.h"
#include "ops/http_server.h"
#include "ops/logging.h"

namespace nanokv::kvd {

struct KvdConfig;

// Adds the keys' readers to `keys` (config.cc's table of top-level keys).
// A relative log_file resolves against `base_dir`. *config must remain live
// while the readers are used.
void AddObservabilityKeys(const std::string& base_dir, KvdConfig* config,
                          std::map<std::string, std::function<Status(const YamlField&)>>* keys);

// What the keys ask of ops/: the logging (log_level too) and the /metrics server.
ops::LogOptions LogOptionsOf(const KvdConfig& config);
ops::MetricsServerOptions MetricsOptionsOf(const KvdConfig& config);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_OBSERVABILITY_KEYS_H_
