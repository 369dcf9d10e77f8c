// libFuzzer target: YAML text -> kvd::LoadConfigText. It must return a config
// or an error Status for any text; an exception escaping it (yaml-cpp's or
// the standard library's) aborts the fuzzer, and is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "daemon/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // base_dir "/": relative commands resolve against a directory that exists.
  nanokv::Result<nanokv::kvd::KvdConfig> config = nanokv::kvd::LoadConfigText(text, "fuzz.yaml", "/");
  if (config.ok() && !nanokv::kvd::Validate(*config).ok()) {
    std::fprintf(stderr, "fuzz_config_load: a loaded config fails Validate\n");
    std::abort();
  }
  return 0;
}
