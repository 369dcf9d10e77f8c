#include "ops/version.h"

#include "nanokv_git_commit.h"  // generated: cmake/GitCommit.cmake

namespace nanokv::ops {

const BuildInfo& Build() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = NANOKV_VERSION;
    b.commit = NANOKV_GIT_COMMIT;
    b.backends.push_back("host");
    if (NANOKV_WITH_CUDA) b.backends.push_back("cuda");
    if (NANOKV_WITH_HIP) b.backends.push_back("hip");
    if (NANOKV_WITH_CUDA_KERNELS) b.kernels.push_back("cuda");
    return b;
  }();
  return info;
}

std::string VersionLine(std::string_view program) {
  const BuildInfo& b = Build();
  std::string line = std::string(program) + " " + b.version + " (commit " + b.commit + "; backends:";
  for (const std::string& backend : b.backends) line += " " + backend;
  line += "; kernels:";
  if (b.kernels.empty()) line += " none";
  for (const std::string& k : b.kernels) line += " " + k;
  return line + ")";
}

}  // namespace nanokv::ops
