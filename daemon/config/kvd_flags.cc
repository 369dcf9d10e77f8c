#include "daemon/config/kvd_flags.h"

#include <CLI/CLI.hpp>

namespace nanokv::kvd {
namespace {

enum class FlagKind {
  kValue,   // --page-size 2MiB
  kList,    // --devices 0,1: the key's list, items split at ','
  kSwitch,  // --check-invariants: the key set to true
};

struct FlagSpec {
  const char* flag;
  const char* key;
  FlagKind kind;
  // What --help shows of the value: kvd's --help as it has always read. The
  // rule itself is the key's (config.cc), which also checks the flag.
  const char* value_hint;
  const char* help;
};

// In --help's order.
constexpr FlagSpec kFlags[] = {
    {"--ipc-name", "ipc_name", FlagKind::kValue, "TEXT", "IPC name engines attach by"},
    {"--backend", "backend", FlagKind::kValue, "TEXT:{auto,cuda,hip,host}", "auto, cuda, hip or host"},
    {"--devices", "devices", FlagKind::kList, "INT", "device ordinals to serve (default: all)"},
    {"--page-size", "page_size", FlagKind::kValue, "TEXT", "page size, e.g. 2MiB"},
    {"--capacity", "capacity", FlagKind::kValue, "TEXT",
     "per device: bytes (40GiB), a share (90%) or a fraction (0.9)"},
    {"--reserve-pages", "reserve_pages", FlagKind::kValue, "UINT", "pages created ahead of demand per device"},
    {"--default-limit", "default_limit", FlagKind::kValue, "TEXT",
     "limit of an engine that asks none: bytes or a share"},
    {"--log-level", "log_level", FlagKind::kValue, "TEXT:{trace,debug,info,warn,error,critical,off}",
     "trace, debug, info, warn, error"},
    {"--log-file", "log_file", FlagKind::kValue, "PATH", "log to this file too (appended), besides stderr"},
    {"--log-format", "log_format", FlagKind::kValue, "TEXT:{text,json}", "text, or json: one JSON object per line"},
    {"--metrics-port", "metrics_port", FlagKind::kValue, "UINT",
     "serve Prometheus metrics on this TCP port (0: a free one, logged; default: off)"},
    {"--metrics-address", "metrics_address", FlagKind::kValue, "IP",
     "the address /metrics binds (default 127.0.0.1; 0.0.0.0 for every interface)"},
    {"--run-dir", "run_dir", FlagKind::kValue, "TEXT", "kvd's directory: socket, lock, journal (default $NANOKV_RUN_DIR, else per user: /run/nanokv for root)"},
    {"--host-devices", "host_devices", FlagKind::kValue, "INT:INT in [1 - 16]", "host backend: simulated devices"},
    {"--host-device-memory", "host_device_memory", FlagKind::kValue, "TEXT",
     "host backend: memory per device, e.g. 1GiB"},
    {"--recovery-window", "recovery_window", FlagKind::kValue, "TEXT",
     "after a restart, how long pages engines hold wait for them to reconnect, e.g. 10s"},
    {"--max-connections", "max_connections", FlagKind::kValue, "UINT",
     "connections served at once (0: 1024, or what the open-file limit affords)"},
    {"--max-connections-per-process", "max_connections_per_process", FlagKind::kValue,
     "UINT:INT in [1 - 1048576]", "connections one process may hold"},
    {"--busy-poll-us", "busy_poll_us", FlagKind::kValue, "UINT:INT in [0 - 10000]",
     "after a request, poll this many us without sleeping (0: off)"},
    {"--check-invariants", "check_invariants", FlagKind::kSwitch, "",
     "check NodeState's invariants after every change; exit 1 on a break (tests)"},
};

}  // namespace

KvdFlags::KvdFlags(CLI::App* app) {
  app->add_option("-c,--config", config_path_, "YAML config file (configs/kvd.yaml documents every key)")
      ->check(CLI::ExistingFile);
  for (const FlagSpec& spec : kFlags) {
    auto given = [this, &spec](YAML::Node value) { given_.push_back({spec.key, spec.flag, std::move(value)}); };
    switch (spec.kind) {
      case FlagKind::kValue:
        app->add_option_function<std::string>(
               spec.flag, [given](const std::string& text) { given(YAML::Node(text)); }, spec.help)
            ->type_name(spec.value_hint);
        break;
      case FlagKind::kList:
        app->add_option_function<std::vector<std::string>>(
               spec.flag,
               [given](const std::vector<std::string>& items) {
                 YAML::Node list(YAML::NodeType::Sequence);
                 for (const std::string& item : items) list.push_back(item);
                 given(list);
               },
               spec.help)
            ->type_name(spec.value_hint)
            ->delimiter(',');
        break;
      case FlagKind::kSwitch: {
        // Each value as given: "true" for the bare flag, else what follows
        // '=' (--check-invariants=false), which the key's reader judges. The
        // help as a std::string: with a const char* CLI11's overloads clash.
        const std::string help = spec.help;
        app->add_flag(spec.flag, help)->each([given](const std::string& text) { given(YAML::Node(text)); });
        break;
      }
    }
  }
}

Result<KvdConfig> KvdFlags::Load() const {
  KvdConfig config;
  if (!config_path_.empty()) {
    NANOKV_ASSIGN_OR_RETURN(config, LoadConfigFile(config_path_));
  }
  for (const Given& given : given_) {
    NANOKV_RETURN_IF_ERROR(ApplyOverride(given.key, YamlField::Flag(given.value, given.flag), &config));
  }
  NANOKV_RETURN_IF_ERROR(Validate(config));
  return config;
}

}  // namespace nanokv::kvd
