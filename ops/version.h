// What `kvd --version` and `kvctl --version` print: the project's version
// (CMake's project(VERSION)), the git commit it was built from (baked in at
// build time by cmake/GitCommit.cmake) and the backends and device code
// compiled in. One line, so scripts can grep it.
#ifndef NANOKV_OPS_VERSION_H_
#define NANOKV_OPS_VERSION_H_

#include <string>
#include <string_view>
#include <vector>

namespace nanokv::ops {

struct BuildInfo {
  std::string version;                // "0.1.0"
  std::string commit;                 // "1a2b3c4d5e6f", "...-dirty" or "unknown"
  std::vector<std::string> backends;  // compiled in: "host" always, "cuda", "hip"
  std::vector<std::string> kernels;   // device code compiled in: "cuda"; empty: none
};

const BuildInfo& Build();

// "kvd 0.1.0 (commit 1a2b3c4d5e6f; backends: host cuda hip; kernels: cuda)".
std::string VersionLine(std::string_view program);

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_VERSION_H_
