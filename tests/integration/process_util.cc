#include "tests/integration/process_util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace nanokv::testing {

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exit_code_(other.exit_code_),
      log_path_(std::move(other.log_path_)) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    // Not this->~Process(): that would also destroy log_path_, which is then
    // assigned below (a double free once the path outgrows the SSO buffer).
    if (pid_ > 0 && !exit_code_) {
      kill(pid_, SIGKILL);
      int status;
      waitpid(pid_, &status, 0);
    }
    pid_ = std::exchange(other.pid_, -1);
    exit_code_ = other.exit_code_;
    log_path_ = std::move(other.log_path_);
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

Process Process::Start(const std::vector<std::string>& argv,
                       const std::map<std::string, std::string>& env, const std::string& log_path) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : env) {
    if (value.empty()) merged.erase(name); else merged[name] = value;
  }
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : merged) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  Process p;
  p.log_path_ = log_path;
  pid_t pid;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) == 0) p.pid_ = pid;
  posix_spawn_file_actions_destroy(&actions);
  return p;
}

std::optional<int> Process::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return exit_code_;
  if (pid_ <= 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool Process::Running() { return pid_ > 0 && !Wait(std::chrono::milliseconds(0)).has_value(); }

void Process::Signal(int signal) {
  if (pid_ > 0 && !exit_code_) kill(pid_, signal);
}

bool Process::Pause(std::chrono::milliseconds timeout) {
  Signal(SIGSTOP);
  if (pid_ <= 0 || exit_code_) return false;
  // kill() returns before the process has stopped: a thread that is running
  // stops when it next enters the kernel. Stopped means every thread's state
  // in /proc is 'T' (a reply the test assumes impossible could still go out
  // before then: an etcd member answered a put once it was "paused").
  const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
  return WaitFor(
      [&] {
        std::error_code error;
        bool all = true, any = false;
        for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
          std::ifstream in(task.path() / "stat");
          std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          const size_t close = stat.rfind(')');
          if (close == std::string::npos || close + 2 >= stat.size()) continue;  // the thread went
          any = true;
          all = all && (stat[close + 2] == 'T' || stat[close + 2] == 't');
        }
        return !error && any && all;
      },
      timeout);
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

bool HasConnectionTo(pid_t pid) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int fd = std::atoi(entry.path().filename().c_str());
    struct stat st{};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 && peer.pid == pid) return true;
  }
  return false;
}

std::vector<std::string> RemoveKvdShm(const std::string& ipc_name) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    for (const std::string prefix : {"nanokv_"}) {
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string ipc = name.substr(prefix.size());
      if (ipc != ipc_name && ipc.rfind(ipc_name + "_", 0) != 0) continue;
      if (std::filesystem::remove(entry.path(), error)) removed.push_back(name);
    }
  }
  return removed;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/nanokv-test-XXXXXX";
  char* made = mkdtemp(pattern.data());
  path_ = made != nullptr ? made : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ignored;
  if (path_ != "/tmp") std::filesystem::remove_all(path_, ignored);
}

}  // namespace nanokv::testing
