#include "daemon/controller/controller.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <system_error>

#include "daemon/config/config_diff.h"

#include <spdlog/spdlog.h>

namespace nanokv::kvd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

uint64_t UnixNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// "2025-01-31 12:00:00" in local time, for the lines kvd writes in instance logs.
std::string WallClock() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

std::string Seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

const char* StateName(ipc::InstanceState state) {
  const char* name = ipc::InstanceStateName(state);
  return name != nullptr ? name : "?";
}

}  // namespace

struct Controller::Instance {
  InstanceConfig config;
  std::string log_path;
  ipc::InstanceState state = ipc::InstanceState::kStarting;
  uint64_t since_unix_ns = 0;
  pid_t pid = 0;             // while kRunning
  int pidfd = -1;            // while kRunning
  int exit_code = 0;         // of the last life
  uint32_t restarts = 0;     // every restart so far
  uint32_t in_a_row = 0;     // restarts since the last recovery (toward max_restarts)
  uint32_t lives = 0;        // starts so far, failed spawns included
  milliseconds next_backoff{0};
  Clock::time_point due;     // kStarting/kRestarting: when to start
  Clock::time_point started; // kRunning: when this life began
  Clock::time_point kill_at; // kRunning while stopping or retiring: SIGKILL then
  bool killed = false;       // SIGKILL sent in this stop
  bool retiring = false;     // SIGTERM sent: removed or replaced by a reload
  std::optional<InstanceConfig> replacement;  // retiring: start this once it ended; none: remove
  bool gone = false;         // removed: its row goes at the end of this turn
};

Controller::Controller(std::vector<InstanceConfig> instances, ControllerOptions options,
                       PublishRows publish)
    : options_(std::move(options)), publish_(std::move(publish)) {
  uint64_t now = UnixNowNs();
  for (InstanceConfig& config : instances) {
    Instance instance;
    instance.log_path = InstanceLogPath(config, options_.site);
    instance.next_backoff = config.backoff;
    instance.since_unix_ns = now;
    instance.config = std::move(config);
    instances_.push_back(std::move(instance));
  }
}

Controller::~Controller() {
  Stop();
  if (stop_fd_ >= 0) close(stop_fd_);
}

Status Controller::Start() {
  if (thread_.joinable() || stop_fd_ >= 0) return Status::FailedPrecondition("controller started twice");
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return Status::FromErrno("eventfd", errno, "controller");
  Clock::time_point now = Clock::now();
  for (Instance& instance : instances_) instance.due = now + instance.config.start_delay;
  PublishAll();
  try {
    thread_ = std::thread([this] { Loop(); });
  } catch (const std::system_error& e) {
    return Status::Internal(std::string("controller thread: ") + e.what());
  }
  return Status::OK();
}

void Controller::RequestStop() {
  stop_requested_.store(true);
  if (stop_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(stop_fd_, &one, sizeof(one));
    (void)ignored;
  }
}

void Controller::Wait() {
  if (thread_.joinable()) thread_.join();
}

void Controller::Stop() {
  RequestStop();
  Wait();
}

void Controller::Reconfigure(std::vector<InstanceConfig> instances) {
  {
    std::lock_guard lock(pending_mu_);
    pending_ = std::move(instances);
  }
  if (stop_fd_ >= 0) {  // wakes the loop, which looks at pending_ every turn
    uint64_t one = 1;
    ssize_t ignored = write(stop_fd_, &one, sizeof(one));
    (void)ignored;
  }
}

void Controller::ApplyPending() {
  std::optional<std::vector<InstanceConfig>> next;
  {
    std::lock_guard lock(pending_mu_);
    next.swap(pending_);
  }
  if (!next || stopping_) return;
  const Clock::time_point now = Clock::now();
  auto find = [&](const std::string& name) -> const InstanceConfig* {
    for (const InstanceConfig& c : *next) {
      if (c.name == name) return &c;
    }
    return nullptr;
  };
  for (Instance& instance : instances_) {
    const InstanceConfig* wanted = find(instance.config.name);
    if (wanted == nullptr) {
      Retire(instance, std::nullopt, now);
    } else if (!SameButLimit(instance.config, *wanted)) {
      Retire(instance, *wanted, now);
    } else {
      instance.config.limit = wanted->limit;  // its next start asks for it; kvd set it live
      instance.config.where = wanted->where;
    }
  }
  for (const InstanceConfig& config : *next) {
    bool known = false;
    for (const Instance& instance : instances_) known |= instance.config.name == config.name;
    if (known) continue;
    Instance instance;
    instance.config = config;
    instance.log_path = InstanceLogPath(config, options_.site);
    instance.next_backoff = config.backoff;
    instance.since_unix_ns = UnixNowNs();
    instance.due = now + config.start_delay;
    spdlog::info("kvd: instance '{}' added by a reload", config.name);
    instances_.push_back(std::move(instance));
  }
  std::erase_if(instances_, [](const Instance& instance) { return instance.gone; });
  PublishAll();
}

void Controller::Retire(Instance& instance, std::optional<InstanceConfig> replacement, Clock::time_point now) {
  const bool removed = !replacement.has_value();
  instance.replacement = std::move(replacement);
  if (instance.state != ipc::InstanceState::kRunning) {
    if (removed) {
      spdlog::info("kvd: instance '{}' removed by a reload", instance.config.name);
      instance.gone = true;
    } else {
      Restart(instance);
    }
    return;
  }
  if (instance.retiring) return;  // SIGTERM sent already; the last reload's wish holds
  spdlog::info("kvd: instance '{}' (pid {}) {} by a reload: SIGTERM", instance.config.name, instance.pid,
               removed ? "removed" : "changed");
  AppendLogLine(instance.log_path, "=== nanokv: " + WallClock() + ": " +
                                       (removed ? "removed from" : "changed in") + " kvd's config: SIGTERM");
  SignalGroup(instance.pid, SIGTERM);
  instance.retiring = true;
  instance.killed = false;
  instance.kill_at = now + instance.config.grace;
}

void Controller::Restart(Instance& instance) {
  instance.config = std::move(*instance.replacement);
  instance.replacement.reset();
  instance.retiring = false;
  instance.log_path = InstanceLogPath(instance.config, options_.site);
  instance.next_backoff = instance.config.backoff;
  instance.in_a_row = 0;
  instance.due = Clock::now() + instance.config.start_delay;
  spdlog::info("kvd: instance '{}' starts again with its new config", instance.config.name);
  SetState(instance, ipc::InstanceState::kStarting);
}

void Controller::Loop() {
  // kvd's signals are for the main thread (their handler only wakes threads).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::vector<pollfd> fds;
  std::vector<Instance*> polled;  // fds[i + 1] is polled[i]'s pidfd
  while (true) {
    if (stop_requested_.load() && !stopping_) BeginStop();
    ApplyPending();
    Clock::time_point now = Clock::now();
    bool running = false;
    Clock::time_point next = Clock::time_point::max();
    for (Instance& instance : instances_) {
      bool waiting = instance.state == ipc::InstanceState::kStarting ||
                     instance.state == ipc::InstanceState::kRestarting;
      if (waiting && !stopping_ && now >= instance.due) Launch(instance);
      if (instance.state == ipc::InstanceState::kRunning) {
        running = true;
        if ((stopping_ || instance.retiring) && !instance.killed) {
          if (now >= instance.kill_at) {
            spdlog::warn("kvd: instance '{}' (pid {}) outlived its grace of {} ms: SIGKILL",
                         instance.config.name, instance.pid, instance.config.grace.count());
            AppendLogLine(instance.log_path, "=== nanokv: " + WallClock() + ": still running " +
                                                 Seconds(instance.config.grace) +
                                                 " after SIGTERM: SIGKILL");
            SignalGroup(instance.pid, SIGKILL);
            instance.killed = true;
          } else {
            next = std::min(next, instance.kill_at);
          }
        }
      } else if ((instance.state == ipc::InstanceState::kStarting ||
                  instance.state == ipc::InstanceState::kRestarting) && !stopping_) {
        next = std::min(next, instance.due);
      }
    }
    if (stopping_ && !running) break;

    fds.assign(1, pollfd{stop_fd_, POLLIN, 0});
    polled.clear();
    for (Instance& instance : instances_) {
      if (instance.state != ipc::InstanceState::kRunning) continue;
      fds.push_back(pollfd{instance.pidfd, POLLIN, 0});
      polled.push_back(&instance);
    }
    int timeout_ms = -1;
    if (next != Clock::time_point::max()) {
      auto wait = std::chrono::ceil<milliseconds>(next - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 0, 60000));
    }
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("kvd: controller: poll: {}", std::strerror(errno));
      std::this_thread::sleep_for(milliseconds(10));  // do not spin on a persistent error
      continue;
    }
    if (fds[0].revents != 0) {
      uint64_t count;
      ssize_t ignored = read(stop_fd_, &count, sizeof(count));
      (void)ignored;
    }
    for (size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 1].revents != 0) Reap(*polled[i]);
    }
    if (std::erase_if(instances_, [](const Instance& instance) { return instance.gone; }) > 0) PublishAll();
  }
  PublishAll();
  spdlog::info("kvd: controller: every instance stopped");
  if (on_stopped_) on_stopped_();
}

void Controller::Launch(Instance& instance) {
  const InstanceConfig& c = instance.config;
  ++instance.lives;
  std::string command = c.command;
  for (const std::string& arg : c.args) command += " " + arg;
  AppendLogLine(instance.log_path, "=== nanokv: " + WallClock() + ": starting '" + c.name +
                                       "' (start " + std::to_string(instance.lives) + "): " + command);
  auto spawned = SpawnInstance(c, options_.site, instance.log_path);
  if (!spawned.ok()) {
    spdlog::error("kvd: instance '{}' could not start: {}", c.name, spawned.status().ToString());
    AppendLogLine(instance.log_path, "=== nanokv: could not start: " + spawned.status().ToString());
    instance.started = Clock::now();
    Ended(instance, 127, "could not start");  // the shell's "command not found"
    return;
  }
  instance.pid = spawned->pid;
  instance.pidfd = spawned->pidfd;
  instance.started = Clock::now();
  instance.killed = false;
  spdlog::info("kvd: instance '{}' started (pid {}), log {}", c.name, instance.pid, instance.log_path);
  SetState(instance, ipc::InstanceState::kRunning);
}

void Controller::Reap(Instance& instance) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(instance.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
      info.si_pid == 0) {
    return;  // not ended after all
  }
  // Ended, not reaped: its pid still names its group (SignalGroup). Take
  // whatever it left running with it, so no child of a dead instance holds
  // pages or outlives kvd.
  SignalGroup(instance.pid, SIGKILL);
  int status = 0;
  pid_t got = waitpid(instance.pid, &status, 0);
  close(instance.pidfd);
  instance.pidfd = -1;
  pid_t pid = instance.pid;
  instance.pid = 0;
  if (got < 0) {
    spdlog::error("kvd: instance '{}': waitpid({}): {}", instance.config.name, pid, std::strerror(errno));
    Ended(instance, -SIGKILL, "was lost");
    return;
  }
  if (WIFSIGNALED(status)) {
    Ended(instance, -WTERMSIG(status),
          std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
              strsignal(WTERMSIG(status)) + ")");
  } else {
    Ended(instance, WEXITSTATUS(status), "exited with code " + std::to_string(WEXITSTATUS(status)));
  }
}

void Controller::Ended(Instance& instance, int exit_code, const std::string& how) {
  const InstanceConfig& c = instance.config;
  instance.exit_code = exit_code;
  Clock::duration lived = Clock::now() - instance.started;
  std::string line = "=== nanokv: " + WallClock() + ": '" + c.name + "' " + how + " after " + Seconds(lived);
  if (instance.retiring && !stopping_) {  // a reload removed or changed it
    AppendLogLine(instance.log_path, line + (instance.replacement ? " (changed: starting again)" : " (removed)"));
    if (!instance.replacement) {
      spdlog::info("kvd: instance '{}' {}: removed by a reload", c.name, how);
      instance.gone = true;
      return;
    }
    Restart(instance);
    return;
  }
  bool restart = !stopping_ && (c.restart == RestartPolicy::kAlways ||
                                (c.restart == RestartPolicy::kOnFailure && exit_code != 0));
  if (!restart) {
    spdlog::info("kvd: instance '{}' {}{}", c.name, how, stopping_ ? " (kvd is stopping)" : "");
    AppendLogLine(instance.log_path, line + (stopping_ ? " (kvd is stopping)" : ""));
    SetState(instance, ipc::InstanceState::kExited);
    return;
  }
  if (lived >= options_.stable_after) {  // a recovery: start over
    instance.in_a_row = 0;
    instance.next_backoff = c.backoff;
  }
  if (instance.in_a_row >= c.max_restarts) {
    spdlog::error("kvd: instance '{}' {}; given up after {} restarts in a row", c.name, how,
                  instance.in_a_row);
    AppendLogLine(instance.log_path, line + "; given up after " + std::to_string(instance.in_a_row) +
                                         " restarts in a row (max_restarts)");
    SetState(instance, ipc::InstanceState::kFailed);
    return;
  }
  ++instance.in_a_row;
  ++instance.restarts;
  instance.due = Clock::now() + instance.next_backoff;
  spdlog::warn("kvd: instance '{}' {}; restart {} of {} in {} ms", c.name, how, instance.in_a_row,
               c.max_restarts, instance.next_backoff.count());
  AppendLogLine(instance.log_path, line + "; restarting in " + Seconds(instance.next_backoff));
  instance.next_backoff = std::min(instance.next_backoff * 2, options_.max_backoff);
  SetState(instance, ipc::InstanceState::kRestarting);
}

void Controller::BeginStop() {
  stopping_ = true;
  Clock::time_point now = Clock::now();
  for (Instance& instance : instances_) {
    switch (instance.state) {
      case ipc::InstanceState::kRunning:
        spdlog::info("kvd: stopping instance '{}' (pid {}): SIGTERM", instance.config.name, instance.pid);
        AppendLogLine(instance.log_path, "=== nanokv: " + WallClock() + ": kvd is stopping: SIGTERM");
        SignalGroup(instance.pid, SIGTERM);
        instance.kill_at = now + instance.config.grace;
        break;
      case ipc::InstanceState::kStarting:
      case ipc::InstanceState::kRestarting:
        SetState(instance, ipc::InstanceState::kExited);  // never started (again)
        break;
      default:
        break;
    }
  }
}

void Controller::SetState(Instance& instance, ipc::InstanceState state) {
  spdlog::debug("kvd: instance '{}': {} -> {}", instance.config.name, StateName(instance.state),
                StateName(state));
  instance.state = state;
  instance.since_unix_ns = UnixNowNs();
  PublishAll();
}

void Controller::PublishAll() {
  if (!publish_) return;
  std::vector<ipc::InstanceRow> rows(instances_.size());
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Instance& instance = instances_[i];
    ipc::InstanceRow& row = rows[i];
    ipc::CopyString(row.name, instance.config.name);
    row.pid = instance.pid;
    row.state = static_cast<uint32_t>(instance.state);
    row.exit_code = instance.exit_code;
    row.restarts = instance.restarts;
    row.since_unix_ns = instance.since_unix_ns;
  }
  publish_(rows);
}

}  // namespace nanokv::kvd
