#include "base/host_identity.h"

#include <cstdlib>
#include <fstream>

namespace nanokv {

std::string HostIdentity(const std::string& configured) {
  if (!configured.empty()) return configured;
  const char* named = std::getenv(kHostIdVariable);
  if (named != nullptr && *named != '\0') return named;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!std::getline(in, boot) || boot.empty() || boot.size() > 48) return "";
  return "boot:" + boot;
}

}  // namespace nanokv
