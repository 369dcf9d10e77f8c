#include "daemon/controller/instance_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include <spdlog/spdlog.h>

extern char** environ;

namespace nanokv::kvd {
namespace {

// kvd sets these per instance; an inherited value (kvd's own environment)
// must not reach an instance that leaves the key unset.
constexpr const char* kPerInstance[] = {"ENABLE_NANOKV", "NANOKV_IPC_NAME", "NANOKV_RUN_DIR",
                                        "NANOKV_TENANT", "NANOKV_LIMIT",    "NANOKV_GROUP",
                                        "NANOKV_DEVICE"};

}  // namespace

std::vector<std::string> InstanceEnvironment(const InstanceConfig& config, const InstanceSite& site,
                                             char** base) {
  // Ordered by name so the result (and an instance's `env` output) is stable.
  std::map<std::string, std::string> vars;
  for (char** e = base; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    vars[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const char* name : kPerInstance) vars.erase(name);
  for (const auto& [name, value] : config.env) vars[name] = value;
  vars["ENABLE_NANOKV"] = "1";
  vars["NANOKV_IPC_NAME"] = site.ipc_name;
  vars["NANOKV_RUN_DIR"] = site.run_dir;
  vars["NANOKV_TENANT"] = config.name;
  if (config.limit) vars["NANOKV_LIMIT"] = LimitText(*config.limit);
  if (!config.group.empty()) vars["NANOKV_GROUP"] = config.group;
  if (config.device) vars["NANOKV_DEVICE"] = std::to_string(*config.device);
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

std::string InstanceLogPath(const InstanceConfig& config, const InstanceSite& site) {
  if (!config.log.empty()) return config.log;
  return site.run_dir + "/" + site.ipc_name + "." + config.name + ".log";
}

void AppendLogLine(const std::string& path, const std::string& line) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    spdlog::warn("kvd: instance log {}: {}", path, std::strerror(errno));
    return;
  }
  std::string text = line + "\n";
  ssize_t written = write(fd, text.data(), text.size());  // O_APPEND: one write, one line
  if (written < 0) spdlog::warn("kvd: instance log {}: {}", path, std::strerror(errno));
  close(fd);
}

Result<SpawnedProcess> SpawnInstance(const InstanceConfig& config, const InstanceSite& site,
                                     const std::string& log_path) {
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::FromErrno("open", errno, log_path);

  std::vector<std::string> argv_strings = {config.command};
  argv_strings.insert(argv_strings.end(), config.args.begin(), config.args.end());
  std::vector<std::string> env_strings = InstanceEnvironment(config, site, environ);
  std::vector<char*> argv, envp;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  if (!config.workdir.empty()) posix_spawn_file_actions_addchdir_np(&actions, config.workdir.c_str());
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // page fds, sockets, epoll: none leak

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);

  pid_t pid = -1;
  int spawned = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(log_fd);
  if (spawned != 0) return Status::FromErrno("posix_spawn", spawned, config.command);

  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int error = errno;
    kill(pid, SIGKILL);  // unsupervised it must not run
    int status;
    waitpid(pid, &status, 0);
    return Status::FromErrno("pidfd_open", error, config.name);
  }
  return SpawnedProcess{pid, pidfd};
}

void SignalGroup(pid_t leader, int signal) {
  if (leader <= 0) return;
  if (kill(-leader, signal) != 0 && errno != ESRCH) {
    spdlog::warn("kvd: kill(-{}, {}): {}", leader, signal, std::strerror(errno));
  }
}

}  // namespace nanokv::kvd
