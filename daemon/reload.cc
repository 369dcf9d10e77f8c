#include "daemon/reload.h"

#include <signal.h>

#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "daemon/config/config_diff.h"

namespace nanokv::kvd {
namespace {

sigset_t ReloadSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockReloadSignal() {
  sigset_t set = ReloadSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Reloader::Reloader(const KvdFlags& flags, KvdConfig running, NodeServer& server, Controller& controller)
    : flags_(flags), running_(std::move(running)), server_(server), controller_(controller) {}

Reloader::~Reloader() { Stop(); }

void Reloader::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Reloader::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  // Blocked everywhere, SIGHUP to this thread is taken by its sigwaitinfo.
  pthread_kill(thread_.native_handle(), SIGHUP);
  thread_.join();
}

void Reloader::Loop() {
  const sigset_t set = ReloadSignals();
  while (true) {
    siginfo_t info{};
    if (sigwaitinfo(&set, &info) < 0) continue;  // EINTR
    if (stop_.load()) return;
    spdlog::info("kvd: SIGHUP (from pid {}): reloading the config", info.si_pid);
    Reload();
  }
}

void Reloader::Reload() {
  auto next = flags_.Load();
  if (!next.ok()) {
    spdlog::error("kvd: reload: {}; nothing changed, kvd runs on as it was", next.status().ToString());
    return;
  }
  const ConfigDiff diff = Diff(running_, *next);
  if (diff.empty()) {
    spdlog::info("kvd: reload: nothing changed");
    return;
  }
  for (const std::string& line : diff.lines) {
    if (line.find("needs a restart") != std::string::npos) {
      spdlog::warn("kvd: reload: {}", line);
    } else {
      spdlog::info("kvd: reload: {}", line);
    }
  }
  if (diff.log_level) {
    spdlog::set_level(spdlog::level::from_str(next->log_level));
    running_.log_level = next->log_level;
  }
  if (diff.default_limit) {
    const SizeOrShare limit = next->default_limit;
    server_.Post([limit](NodeState& node) {
      for (const std::string& name : node.SetDefaultLimit(limit.bytes, limit.fraction)) {
        const Tenant* t = node.FindTenantByName(name);
        spdlog::info("kvd: reload: tenant '{}' (on the default limit) now has {} bytes", name, t->limit_bytes);
      }
    });
    running_.default_limit = limit;
  }
  for (const std::string& name : diff.limit_only) {
    std::optional<SizeOrShare> limit;
    for (const InstanceConfig& instance : next->instances) {
      if (instance.name == name) limit = instance.limit;
    }
    // An instance's tenant is named after it (NANOKV_TENANT): limited live.
    server_.Post([name, limit](NodeState& node) {
      const Tenant* t = node.FindTenantByName(name);
      if (t == nullptr || t->kvd_owned) {
        spdlog::info("kvd: reload: instance '{}' is not attached now: its next start asks for the new limit", name);
        return;
      }
      const uint64_t bytes = limit ? limit->Resolve(node.capacity_bytes()) : 0;  // 0: the default
      // kvd's config is the operator's word: limit and ceiling alike.
      auto set = node.SetLimit(t->id, bytes, NodeState::LimitSetter::kOperator);
      if (set.ok()) {
        spdlog::info("kvd: reload: tenant '{}' limit set to {} bytes", name, *set);
      } else {
        spdlog::warn("kvd: reload: tenant '{}': {}", name, set.status().ToString());
      }
    });
  }
  if (diff.instances_changed()) {
    controller_.Reconfigure(next->instances);
    running_.instances = next->instances;
  }
}

}  // namespace nanokv::kvd
