// kvd's command line: --config, and a flag for each config key worth setting
// without a file (--page-size sets page_size). A flag's text goes through its
// key's own reader (ApplyOverride, config.h), so it takes the rule the file's
// key has and its errors name the flag: "--page-size: '3MiB' is not a power
// of two". The file loads first; each flag given replaces its key.
#ifndef NANOKV_DAEMON_CONFIG_KVD_FLAGS_H_
#define NANOKV_DAEMON_CONFIG_KVD_FLAGS_H_

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "daemon/config/config.h"
#include "nanokv/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace nanokv::kvd {

class KvdFlags {
 public:
  // Declares --config and every key's flag on `app`, which writes what it
  // parses into this object: *this must remain live while `app` parses.
  explicit KvdFlags(CLI::App* app);
  KvdFlags(const KvdFlags&) = delete;
  KvdFlags& operator=(const KvdFlags&) = delete;

  // The config kvd runs on: the file's (else the defaults), each flag given
  // over it, checked whole (Validate).
  Result<KvdConfig> Load() const;

 private:
  struct Given {
    const char* key;   // "page_size"
    const char* flag;  // "--page-size"
    YAML::Node value;  // a scalar; a list flag's items as a sequence
  };

  std::string config_path_;
  std::vector<Given> given_;  // in the order the parser reported them
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_KVD_FLAGS_H_
