// Real processes for integration tests: kvd and engines are started with
// posix_spawn, their output goes to files under the test's directory, and
// every one is killed and reaped when its handle goes out of scope.
#ifndef NANOKV_TESTS_INTEGRATION_PROCESS_UTIL_H_
#define NANOKV_TESTS_INTEGRATION_PROCESS_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nanokv::testing {

class Process {
 public:
  Process() = default;
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  ~Process();  // SIGKILL and reap if still running

  // Starts `argv` with the current environment plus `env` (NAME -> value;
  // an empty value unsets NAME), stdout+stderr to `log_path`.
  static Process Start(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env, const std::string& log_path);

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  // Waits up to `timeout` for exit; the exit code, or 128+signal; nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool Running();
  void Signal(int signal);
  // SIGSTOP, then waits until every thread has stopped; false if it did not
  // within `timeout` (or the process is gone).
  bool Pause(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// Polls `done` every 10 ms until true or `timeout`; returns the last answer.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout);

// Whether a Unix socket of this process is connected to a listener of
// process `pid` (SO_PEERCRED): true as soon as connect() returned, so also
// while the listener has not accepted the connection yet (a stopped kvd).
bool HasConnectionTo(pid_t pid);

// Removes what kvds named `ipc_name`, or `ipc_name` + "_<anything>", left in
// /dev/shm: state segments (nanokv_<name>; their page journals are in the
// test's run directory, which goes with it). For a test's end, when no kvd
// of those names runs or comes back. Returns the names removed.
std::vector<std::string> RemoveKvdShm(const std::string& ipc_name);

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_PROCESS_UTIL_H_
