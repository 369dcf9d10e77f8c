#include "daemon/config/config_diff.h"

#include <functional>
#include <optional>
#include <utility>


namespace nanokv::kvd {
namespace {

bool SameShare(const SizeOrShare& a, const SizeOrShare& b) { return a.bytes == b.bytes && a.fraction == b.fraction; }

std::string ShareText(const SizeOrShare& s) {
  return !s.is_fraction() && s.bytes == 0 ? "0 (the capacity)" : LimitText(s);
}

std::string LimitOf(const InstanceConfig& i) { return i.limit ? LimitText(*i.limit) : "(default)"; }

bool SameLimit(const std::optional<SizeOrShare>& a, const std::optional<SizeOrShare>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || SameShare(*a, *b);
}

bool SameStore(const ObjectStoreConfig& a, const ObjectStoreConfig& b) {
  return SameShare(a.size, b.size) && a.high_watermark == b.high_watermark && a.low_watermark == b.low_watermark &&
         a.policy == b.policy && a.lease_ttl == b.lease_ttl && a.write_timeout == b.write_timeout &&
         a.max_objects == b.max_objects;
}

bool SameMaster(const MasterLinkConfig& a, const MasterLinkConfig& b) {
  return a.addresses == b.addresses && a.node_id == b.node_id && a.data_address == b.data_address &&
         a.token_file == b.token_file && a.tls.ca == b.tls.ca && a.tls.cert == b.tls.cert &&
         a.tls.key == b.tls.key && a.retry_interval == b.retry_interval &&
         a.transfer.chunk_bytes == b.transfer.chunk_bytes && a.transfer.depth == b.transfer.depth &&
         a.transfer.staging_buffers == b.transfer.staging_buffers && a.transfer.timeout == b.transfer.timeout;
}

const InstanceConfig* Find(const std::vector<InstanceConfig>& list, const std::string& name) {
  for (const InstanceConfig& i : list) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

}  // namespace

bool SameButLimit(const InstanceConfig& a, const InstanceConfig& b) {
  return a.name == b.name && a.command == b.command && a.args == b.args && a.workdir == b.workdir &&
         a.env == b.env && a.group == b.group && a.device == b.device && a.restart == b.restart &&
         a.max_restarts == b.max_restarts && a.backoff == b.backoff && a.start_delay == b.start_delay &&
         a.grace == b.grace && a.log == b.log;
}

ConfigDiff Diff(const KvdConfig& running, const KvdConfig& next) {
  ConfigDiff diff;
  if (running.log_level != next.log_level) {
    diff.log_level = true;
    diff.lines.push_back("log_level: " + running.log_level + " -> " + next.log_level);
  }
  if (!SameShare(running.default_limit, next.default_limit)) {
    diff.default_limit = true;
    diff.lines.push_back("default_limit: " + ShareText(running.default_limit) + " -> " +
                         ShareText(next.default_limit));
  }
  for (const InstanceConfig& old : running.instances) {
    const InstanceConfig* now = Find(next.instances, old.name);
    if (now == nullptr) {
      diff.removed.push_back(old.name);
      diff.lines.push_back("instances: '" + old.name + "' removed: stopped");
    } else if (!SameButLimit(old, *now)) {
      diff.restarted.push_back(old.name);
      diff.lines.push_back("instances: '" + old.name + "' changed: restarted");
    } else if (!SameLimit(old.limit, now->limit)) {
      diff.limit_only.push_back(old.name);
      diff.lines.push_back("instances: '" + old.name + "' limit: " + LimitOf(old) + " -> " + LimitOf(*now));
    }
  }
  for (const InstanceConfig& now : next.instances) {
    if (Find(running.instances, now.name) == nullptr) {
      diff.added.push_back(now.name);
      diff.lines.push_back("instances: '" + now.name + "' added: started");
    }
  }
  // Everything else is fixed for kvd's life: its pools, socket, segment,
  // store and identity are made from it at start.
  const std::vector<std::pair<const char*, std::function<bool()>>> fixed = {
      {"ipc_name", [&] { return running.ipc_name == next.ipc_name; }},
      {"backend", [&] { return running.backend == next.backend; }},
      {"devices", [&] { return running.devices == next.devices; }},
      {"page_size", [&] { return running.page_bytes == next.page_bytes; }},
      {"capacity", [&] { return SameShare(running.capacity, next.capacity); }},
      {"reserve_pages", [&] { return running.reserve_pages == next.reserve_pages; }},
      {"allowed_uids", [&] { return running.allowed_uids == next.allowed_uids; }},
      {"allowed_gids", [&] { return running.allowed_gids == next.allowed_gids; }},
      {"socket_mode", [&] { return running.socket_mode == next.socket_mode; }},
      {"segment_mode", [&] { return running.segment_mode == next.segment_mode; }},
      {"group", [&] { return running.group == next.group; }},
      {"run_dir", [&] { return running.run_dir == next.run_dir; }},
      {"host_devices", [&] { return running.host_devices == next.host_devices; }},
      {"host_device_memory", [&] { return running.host_device_bytes == next.host_device_bytes; }},
      {"object_store", [&] { return SameStore(running.object_store, next.object_store); }},
      {"master", [&] { return SameMaster(running.master, next.master); }},
      {"recovery_window", [&] { return running.recovery_window == next.recovery_window; }},
      {"check_invariants", [&] { return running.check_invariants == next.check_invariants; }},
      {"max_connections", [&] { return running.max_connections == next.max_connections; }},
      {"max_connections_per_process",
       [&] { return running.max_connections_per_process == next.max_connections_per_process; }},
      {"busy_poll_us", [&] { return running.busy_poll_us == next.busy_poll_us; }},
      {"log_file", [&] { return running.log_file == next.log_file; }},
      {"log_format", [&] { return running.log_format == next.log_format; }},
      {"metrics_port", [&] { return running.metrics_port == next.metrics_port; }},
      {"metrics_address", [&] { return running.metrics_address == next.metrics_address; }},
  };
  for (const auto& [key, same] : fixed) {
    if (same()) continue;
    diff.needs_restart.push_back(key);
    diff.lines.push_back(std::string(key) + ": changed, needs a restart (kvd keeps the value it started with)");
  }
  return diff;
}

}  // namespace nanokv::kvd
