#include "master/config/master_flags.h"

#include <CLI/CLI.hpp>

namespace nanokv::master {
namespace {

struct FlagSpec {
  const char* flag;
  const char* key;
  const char* hint;
  const char* help;
};

constexpr FlagSpec kFlags[] = {
    {"--id", "id", "TEXT", "this master's id (default: the host name)"},
    {"--listen", "listen", "HOST:PORT", "where the gRPC service listens (default 127.0.0.1:7470; :0 any port)"},
    {"--advertise", "advertise", "HOST:PORT", "the address told to whoever asks who leads (default: --listen)"},
    {"--token-file", "token_file", "PATH", "the cluster's shared token; calls without it are refused"},
    {"--lease-ttl", "lease_ttl", "DURATION", "a node silent this long is dead, e.g. 3s"},
    {"--heartbeat-interval", "heartbeat_interval", "DURATION", "how often nodes send a heartbeat, e.g. 1s"},
    {"--rebuild-window", "rebuild_window", "DURATION", "after it begins to lead, how long object calls wait for nodes"},
    {"--expected-nodes", "expected_nodes", "UINT", "end the rebuild window once this many nodes registered"},
    {"--max-objects-per-node", "max_objects_per_node", "UINT", "the objects one node may have in the index (default 4194304)"},
    {"--term", "term", "UINT", "without etcd: the term this master leads at (default 1)"},
    {"--log-level", "log_level", "TEXT", "trace, debug, info, warn, error, critical, off"},
    {"--log-file", "log_file", "PATH", "log to this file too (appended), besides stderr"},
    {"--log-format", "log_format", "TEXT:{text,json}", "text, or json: one JSON object per line"},
    {"--metrics-port", "metrics_port", "UINT", "serve Prometheus metrics on this TCP port (0: a free one, logged; default: off)"},
    {"--metrics-address", "metrics_address", "IP", "the address /metrics binds (default 127.0.0.1; 0.0.0.0 for every interface)"},
};

}  // namespace

MasterFlags::MasterFlags(CLI::App* app) {
  app->add_option("-c,--config", config_path_, "YAML config file (configs/master.yaml documents every key)")
      ->check(CLI::ExistingFile);
  for (const FlagSpec& spec : kFlags) {
    app->add_option_function<std::string>(
           spec.flag,
           [this, &spec](const std::string& text) { given_.push_back({spec.key, spec.flag, YAML::Node(text)}); },
           spec.help)
        ->type_name(spec.hint)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag wins, as over the file
  }
}

Result<MasterConfig> MasterFlags::Load() const {
  MasterConfig config;
  if (!config_path_.empty()) {
    NANOKV_ASSIGN_OR_RETURN(config, LoadMasterConfigFile(config_path_));
  }
  for (const Given& given : given_) {
    NANOKV_RETURN_IF_ERROR(ApplyMasterOverride(given.key, YamlField::Flag(given.value, given.flag), &config));
  }
  NANOKV_RETURN_IF_ERROR(ValidateMasterConfig(config));
  return config;
}

}  // namespace nanokv::master
