// The config keys every nanokv daemon reads alike (kvd, the master):
// log_file, log_format, metrics_port, metrics_address. One reader per key,
// through base/yaml_field.h, so their errors name file:line: key (or the
// flag) like every other key's, in both daemons' configs.
#ifndef NANOKV_OPS_OBSERVABILITY_KEYS_H_
#define NANOKV_OPS_OBSERVABILITY_KEYS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "base/yaml_field.h"
#include "nanokv/status.h"

namespace nanokv::ops {

// Where a daemon's config keeps what the keys set.
struct ObservabilityFields {
  std::string* log_file;                  // a relative path resolves against the config's folder
  std::string* log_format;                // "text" or "json"
  std::optional<uint16_t>* metrics_port;  // unset: no /metrics; 0: a free port
  std::string* metrics_address;           // an IPv4 or IPv6 address
};

// Adds the four keys' readers to `keys` (a config's table of top-level keys).
// The fields must stay live while the readers are used.
void AddObservabilityKeys(const std::string& base_dir, ObservabilityFields fields,
                          std::map<std::string, std::function<Status(const YamlField&)>>* keys);

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_OBSERVABILITY_KEYS_H_
