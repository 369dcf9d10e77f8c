// How often a thread of this process went to sleep, from the kernel's count
// of its voluntary context switches (/proc/self/task/<tid>/status): each wait
// that blocks (a futex, a timed condition wait, a sleeping syscall) adds at
// least one; spinning and sched_yield add none. Lets a test tell a thread
// that backs off from one that spins without timing either.
#ifndef NANOKV_TESTS_UTIL_THREAD_SLEEPS_H_
#define NANOKV_TESTS_UTIL_THREAD_SLEEPS_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace nanokv::testing {

// The voluntary context switches of the one thread named `name`
// (pthread_setname_np); nullopt when no thread or several have that name.
inline std::optional<uint64_t> VoluntarySwitches(const std::string& name) {
  std::optional<uint64_t> found;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    if (found) return std::nullopt;  // ambiguous
    std::ifstream status(task.path() / "status");
    const std::string key = "voluntary_ctxt_switches:";
    for (std::string line; std::getline(status, line);) {
      if (line.rfind(key, 0) == 0) found = std::stoull(line.substr(key.size()));
    }
    if (!found) return std::nullopt;
  }
  return found;
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UTIL_THREAD_SLEEPS_H_
