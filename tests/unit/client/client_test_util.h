// Shared by the client's tests (in_process_kvd.h, misbehaving_kvd.h): a socket
// directory per test, unique IPC names, ASSERT_OK, waiting for a condition.
#ifndef NANOKV_TESTS_UNIT_CLIENT_CLIENT_TEST_UTIL_H_
#define NANOKV_TESTS_UNIT_CLIENT_CLIENT_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/client.h"
#include "nanokv/status.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {

// A fresh socket directory, set as $NANOKV_RUN_DIR while this object lives
// (the previous value comes back after). Set it before any client or kvd
// thread starts: setenv is not safe against a concurrent getenv.
class ScopedRunDir {
 public:
  ScopedRunDir() {
    char dir[] = "/tmp/nanokv-client-test-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
      return;
    }
    path_ = dir;
    if (const char* old = std::getenv("NANOKV_RUN_DIR")) old_ = old;
    setenv("NANOKV_RUN_DIR", path_.c_str(), 1);
  }
  ~ScopedRunDir() {
    if (path_.empty()) return;
    if (old_) {
      setenv("NANOKV_RUN_DIR", old_->c_str(), 1);
    } else {
      unsetenv("NANOKV_RUN_DIR");
    }
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedRunDir(const ScopedRunDir&) = delete;
  ScopedRunDir& operator=(const ScopedRunDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::optional<std::string> old_;
};

// "<prefix>-<pid>-<n>": an IPC name no other test of any process uses.
inline std::string UniqueIpcName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

// Polls `done` every millisecond until it holds or `timeout` passes; returns
// its last value.
template <typename Predicate>
bool WaitUntil(Predicate done, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

inline std::vector<uint32_t> Ids(const std::vector<GrantedPage>& pages) {
  std::vector<uint32_t> ids;
  for (const auto& page : pages) ids.push_back(page.id);
  return ids;
}

// Open fds of this process, to check that nothing leaks one.
inline size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_CLIENT_CLIENT_TEST_UTIL_H_
