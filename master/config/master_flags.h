// kvd --role master's command line: --config, and a flag for each key worth
// setting without a file (--listen sets listen). A flag's text goes through
// its key's own reader (ApplyMasterOverride), so it has the file key's rule
// and its errors name the flag.
#ifndef NANOKV_MASTER_CONFIG_MASTER_FLAGS_H_
#define NANOKV_MASTER_CONFIG_MASTER_FLAGS_H_

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "master/config/master_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace nanokv::master {

class MasterFlags {
 public:
  // Declares the flags on `app`: *this must remain live while `app` parses.
  explicit MasterFlags(CLI::App* app);
  MasterFlags(const MasterFlags&) = delete;
  MasterFlags& operator=(const MasterFlags&) = delete;

  // The file's config (else the defaults), each flag over it, checked whole.
  Result<MasterConfig> Load() const;

 private:
  struct Given {
    const char* key;
    const char* flag;
    YAML::Node value;
  };
  std::string config_path_;
  std::vector<Given> given_;
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_CONFIG_MASTER_FLAGS_H_
