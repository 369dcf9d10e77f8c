// The `instances:` section of kvd's config (configs/demo.yaml documents it):
// the engines kvd launches and supervises (the controller,
// daemon/controller/controller.h). Parsed in its own file so the instances'
// keys and their path rules stay together.
#ifndef NANOKV_DAEMON_CONFIG_INSTANCE_CONFIG_H_
#define NANOKV_DAEMON_CONFIG_INSTANCE_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/human_size.h"
#include "base/yaml_field.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// When the controller starts an instance again after it ended.
enum class RestartPolicy {
  kNever,      // never
  kOnFailure,  // after a non-zero exit or a death by signal (the default)
  kAlways,     // after any end, exit 0 included
};

// One engine kvd runs and supervises. Paths are resolved when the config
// loads: relative ones against the config file's directory, a bare command
// name on $PATH.
struct InstanceConfig {
  std::string name;                   // unique; 1-48 of [A-Za-z0-9_.-]; also its tenant name
  std::string command;                // absolute path of an executable file
  std::vector<std::string> args;
  std::string workdir;                // empty: kvd's working directory
  std::vector<std::pair<std::string, std::string>> env;  // extra variables, in file order
  std::optional<SizeOrShare> limit;   // NANOKV_LIMIT
  std::string group;                  // NANOKV_GROUP; empty: none
  std::optional<int> device;          // NANOKV_DEVICE (a kvd device ordinal)
  RestartPolicy restart = RestartPolicy::kOnFailure;
  uint32_t max_restarts = 5;          // restarts in a row before it is given up (failed)
  std::chrono::milliseconds backoff{1000};      // first restart delay; doubles, up to 30 s
  std::chrono::milliseconds start_delay{0};     // after kvd is ready, before the first start
  std::chrono::milliseconds grace{10000};       // SIGTERM -> SIGKILL on kvd's stop
  std::string log;                    // empty: <run_dir>/<ipc_name>.<name>.log
  std::string where;                  // "<file>:<line>" of its entry, for later errors
};

// The text NANOKV_LIMIT gets for `limit`: bytes as a number, a share as "N%".
std::string LimitText(const SizeOrShare& limit);

// Reads the list `field` (key "instances") into `out`, which it replaces.
// Relative paths resolve against `base_dir`; each command must exist and be
// executable now. Errors: "<origin>:<line>: instances[i].<key>: <what>".
Status ParseInstances(const YamlField& field, const std::string& base_dir,
                      std::vector<InstanceConfig>* out);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_INSTANCE_CONFIG_H_
