#include "daemon/config/observability_keys.h"

#include "daemon/config/config.h"
#include "ops/observability_keys.h"

namespace nanokv::kvd {

void AddObservabilityKeys(const std::string& base_dir, KvdConfig* c,
                          std::map<std::string, std::function<Status(const YamlField&)>>* keys) {
  ops::AddObservabilityKeys(base_dir, {&c->log_file, &c->log_format, &c->metrics_port, &c->metrics_address}, keys);
}

ops::LogOptions LogOptionsOf(const KvdConfig& config) {
  ops::LogOptions options;
  options.program = "kvd";
  options.level = config.log_level;
  options.format = config.log_format == "json" ? ops::LogFormat::kJson : ops::LogFormat::kText;
  options.file = config.log_file;
  return options;
}

ops::MetricsServerOptions MetricsOptionsOf(const KvdConfig& config) {
  ops::MetricsServerOptions options;
  options.address = config.metrics_address;
  options.port = config.metrics_port.value_or(0);
  return options;
}

}  // namespace nanokv::kvd
