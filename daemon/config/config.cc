#include "daemon/config/config.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "base/naming.h"
#include "ipc/segment/layout.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {
namespace {

// A config error pointing at a node: "<origin>:<line>: <key>: <what>".
Status Bad(const std::string& origin, const YAML::Node& node, const std::string& key,
           const std::string& what) {
  int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
  return Status::InvalidArgument(origin + ":" + std::to_string(line) + ": " + key + ": " + what);
}

Result<std::string> Scalar(const std::string& origin, const YAML::Node& node,
                           const std::string& key) {
  if (!node.IsScalar()) return Bad(origin, node, key, "expected a single value");
  return node.Scalar();
}

Result<int64_t> Integer(const std::string& origin, const YAML::Node& node, const std::string& key,
                        int64_t lo, int64_t hi) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  try {
    size_t used = 0;
    long long value = std::stoll(text, &used, 0);
    if (used != text.size()) throw std::invalid_argument(text);
    if (value < lo || value > hi) {
      return Bad(origin, node, key, "'" + text + "' is outside [" + std::to_string(lo) + ", " +
                                        std::to_string(hi) + "]");
    }
    return static_cast<int64_t>(value);
  } catch (const std::exception&) {
    return Bad(origin, node, key, "'" + text + "' is not an integer");
  }
}

Result<mode_t> Mode(const std::string& origin, const YAML::Node& node, const std::string& key) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  try {
    size_t used = 0;
    unsigned long value = std::stoul(text, &used, 8);
    if (used != text.size() || value > 0777) throw std::invalid_argument(text);
    return static_cast<mode_t>(value);
  } catch (const std::exception&) {
    return Bad(origin, node, key, "'" + text + "' is not an octal file mode like \"0660\"");
  }
}

Result<gid_t> GroupId(const std::string& origin, const YAML::Node& node, const std::string& key) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    NANOKV_ASSIGN_OR_RETURN(int64_t gid, Integer(origin, node, key, 0, INT32_MAX));
    return static_cast<gid_t>(gid);
  }
  if (const group* g = getgrnam(text.c_str())) return g->gr_gid;
  return Bad(origin, node, key, "no group named '" + text + "'");
}

Result<uid_t> UserId(const std::string& origin, const YAML::Node& node, const std::string& key) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    NANOKV_ASSIGN_OR_RETURN(int64_t uid, Integer(origin, node, key, 0, INT32_MAX));
    return static_cast<uid_t>(uid);
  }
  if (const passwd* p = getpwnam(text.c_str())) return p->pw_uid;
  return Bad(origin, node, key, "no user named '" + text + "'");
}

// capacity: "40GiB", "95%", or a bare fraction 0.95 (kvcached's gpu_utilization).
Result<SizeOrShare> SizeOrFraction(const std::string& origin, const YAML::Node& node,
                                   const std::string& key, bool allow_zero) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  char* end = nullptr;
  double number = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && number > 0 && number <= 1 &&
      text.find('.') != std::string::npos) {
    return SizeOrShare{0, number};
  }
  auto parsed = ParseSizeOrShare(text);
  if (!parsed.ok()) return Bad(origin, node, key, std::string(parsed.status().message()));
  if (!allow_zero && !parsed->is_fraction() && parsed->bytes == 0) {
    return Bad(origin, node, key, "must not be 0");
  }
  return *parsed;
}

template <typename T, typename Parse>
Status List(const std::string& origin, const YAML::Node& node, const std::string& key,
            std::vector<T>* out, Parse parse, const char* example = "[0, 1]") {
  if (!node.IsSequence()) return Bad(origin, node, key, std::string("expected a list like ") + example);
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string name = key + "[" + std::to_string(i) + "]";
    NANOKV_ASSIGN_OR_RETURN(T value, parse(item, name));
    out->push_back(value);
  }
  return Status::OK();
}

// A duration: "500ms", "2s", "1.5s", "1m", or 0; within [lo, hi] (`range`
// says so in words).
Result<std::chrono::milliseconds> Duration(const std::string& origin, const YAML::Node& node,
                                           const std::string& key, std::chrono::milliseconds lo,
                                           std::chrono::milliseconds hi, const char* range) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  const char* begin = text.c_str();
  char* end = nullptr;
  double number = std::strtod(begin, &end);
  std::string unit(end);
  double scale = unit == "ms" ? 1 : unit == "s" ? 1e3 : unit == "m" ? 60e3 : -1;
  if (unit.empty() && end != begin && number == 0) scale = 0;  // a bare 0 needs no unit
  if (end == begin || scale < 0 || !std::isfinite(number) || number < 0 || text[0] == '+') {
    return Bad(origin, node, key, "'" + text + "' is not a duration like 500ms, 2s or 1m");
  }
  double ms = std::round(number * scale);
  if (ms < static_cast<double>(lo.count()) || ms > static_cast<double>(hi.count())) {
    return Bad(origin, node, key, "'" + text + "' is outside " + range);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

std::string Absolute(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return p.lexically_normal().string();
}

// An instance's command as an absolute path to an executable file: a path
// (one with a '/') relative to `base_dir`, or a bare name found on `path_env`.
Result<std::string> ResolveCommand(const std::string& origin, const YAML::Node& node,
                                   const std::string& key, const std::string& command,
                                   const std::string& base_dir, const std::string& path_env) {
  auto check = [](const std::string& file) -> std::string {
    struct stat st{};
    if (stat(file.c_str(), &st) != 0) return "does not exist";
    if (!S_ISREG(st.st_mode)) return "is not a file";
    if (access(file.c_str(), X_OK) != 0) return "is not executable";
    return "";
  };
  if (command.find('/') != std::string::npos) {
    std::string file = Absolute(command, base_dir);
    std::string why = check(file);
    if (!why.empty()) {
      return Bad(origin, node, key, "'" + command + "' " + why +
                                        (file != command ? " (resolved to " + file + ")" : ""));
    }
    return file;
  }
  std::stringstream dirs(path_env);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;  // an empty entry would mean kvd's working directory: never
    std::string file = std::filesystem::absolute(std::filesystem::path(dir) / command)
                           .lexically_normal().string();
    if (check(file).empty()) return file;
  }
  return Bad(origin, node, key, "'" + command + "' is not found on PATH (" + path_env +
                                    "); a path with a '/' is taken relative to the config file");
}

// Variables kvd itself sets for every instance: the instance's keys say them.
const char* KvdSetVariable(const std::string& name) {
  static const std::map<std::string, const char*> kSet = {
      {"ENABLE_NANOKV", "kvd sets it"},      {"NANOKV_IPC_NAME", "kvd sets it"},
      {"NANOKV_RUN_DIR", "kvd sets it"},     {"NANOKV_TENANT", "kvd sets it to the name"},
      {"NANOKV_LIMIT", "use the limit key"}, {"NANOKV_GROUP", "use the group key"},
      {"NANOKV_DEVICE", "use the device key"},
  };
  auto it = kSet.find(name);
  return it == kSet.end() ? nullptr : it->second;
}

bool ValidVariableName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  }
  return true;
}

// One entry of `instances:`; `prefix` is "instances[i]".
Result<InstanceConfig> ParseInstance(const std::string& origin, const std::string& base_dir,
                                     const YAML::Node& node, const std::string& prefix) {
  if (!node.IsMap()) {
    return Bad(origin, node, prefix, "expected a mapping with at least name: and command:");
  }
  InstanceConfig in;
  in.where = origin + ":" + std::to_string(node.Mark().line + 1);
  YAML::Node command_node, workdir_node, log_node;
  using Setter = std::function<Status(const YAML::Node&, const std::string&)>;
  const std::map<std::string, Setter> keys = {
      {"name", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.name, Scalar(origin, n, k));
         if (!ipc::ValidIpcName(in.name)) {
           return Bad(origin, n, k, "'" + in.name + "' is not 1-48 of [A-Za-z0-9_.-] (not starting with '.')");
         }
         return Status::OK(); }},
      {"command", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.command, Scalar(origin, n, k));
         if (in.command.empty()) return Bad(origin, n, k, "must not be empty");
         command_node = n;
         return Status::OK(); }},
      {"args", [&](auto& n, auto& k) {
         return List<std::string>(origin, n, k, &in.args,
                                  [&](auto& item, auto& name) { return Scalar(origin, item, name); },
                                  "[--pages, \"16\"]"); }},
      {"workdir", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.workdir, Scalar(origin, n, k));
         workdir_node = n;
         return Status::OK(); }},
      {"env", [&](auto& n, auto& k) {
         if (!n.IsMap()) return Bad(origin, n, k, "expected a mapping of NAME: value");
         in.env.clear();
         for (const auto& var : n) {
           std::string name = var.first.template as<std::string>();
           std::string full = k + "." + name;
           if (!ValidVariableName(name)) return Bad(origin, var.first, full, "not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
           if (const char* why = KvdSetVariable(name)) return Bad(origin, var.first, full, std::string("not allowed here: ") + why);
           NANOKV_ASSIGN_OR_RETURN(std::string value, Scalar(origin, var.second, full));
           in.env.emplace_back(name, value);
         }
         return Status::OK(); }},
      {"limit", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(SizeOrShare limit, SizeOrFraction(origin, n, k, false));
         in.limit = limit;
         return Status::OK(); }},
      {"group", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.group, Scalar(origin, n, k));
         if (!in.group.empty() && !wire::ValidName(in.group)) {
           return Bad(origin, n, k, "'" + in.group + "' is not 1-63 of [A-Za-z0-9_.:@-]");
         }
         return Status::OK(); }},
      {"device", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(int64_t d, Integer(origin, n, k, 0, ipc::kMaxDevices - 1));
         in.device = static_cast<int>(d);
         return Status::OK(); }},
      {"restart", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, n, k));
         if (text == "never") in.restart = RestartPolicy::kNever;
         else if (text == "on-failure") in.restart = RestartPolicy::kOnFailure;
         else if (text == "always") in.restart = RestartPolicy::kAlways;
         else return Bad(origin, n, k, "'" + text + "' is not one of never, on-failure, always");
         return Status::OK(); }},
      {"max_restarts", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 0, 1000000));
         in.max_restarts = static_cast<uint32_t>(v);
         return Status::OK(); }},
      {"backoff", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.backoff, Duration(origin, n, k, std::chrono::milliseconds(10),
                                                      std::chrono::minutes(10), "[10ms, 10m]"));
         return Status::OK(); }},
      {"start_delay", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.start_delay, Duration(origin, n, k, std::chrono::milliseconds(0),
                                                          std::chrono::hours(24), "[0, 1440m]"));
         return Status::OK(); }},
      {"grace", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.grace, Duration(origin, n, k, std::chrono::milliseconds(0),
                                                    std::chrono::minutes(10), "[0, 10m]"));
         return Status::OK(); }},
      {"log", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(in.log, Scalar(origin, n, k));
         log_node = n;
         return Status::OK(); }},
  };
  std::set<std::string> seen;
  for (const auto& entry : node) {
    std::string key = entry.first.as<std::string>();
    std::string full = prefix + "." + key;
    auto it = keys.find(key);
    if (it == keys.end()) {
      return Bad(origin, entry.first, full, "unknown key (an instance has name, command, args, "
                                            "workdir, env, limit, group, device, restart, "
                                            "max_restarts, backoff, start_delay, grace, log)");
    }
    if (!seen.insert(key).second) return Bad(origin, entry.first, full, "given twice");
    NANOKV_RETURN_IF_ERROR(it->second(entry.second, full));
  }
  if (in.name.empty()) return Bad(origin, node, prefix + ".name", "missing: every instance needs a name");
  if (in.command.empty()) {
    return Bad(origin, node, prefix + ".command", "missing: instance '" + in.name + "' has no command");
  }

  // Paths: relative ones against the config's directory; the command exists now.
  std::string path_env;
  for (const auto& [name, value] : in.env) if (name == "PATH") path_env = value;
  if (path_env.empty()) {
    const char* path = std::getenv("PATH");
    path_env = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  }
  NANOKV_ASSIGN_OR_RETURN(in.command, ResolveCommand(origin, command_node, prefix + ".command",
                                                     in.command, base_dir, path_env));
  if (!in.workdir.empty()) {
    in.workdir = Absolute(in.workdir, base_dir);
    struct stat st{};
    if (stat(in.workdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Bad(origin, workdir_node, prefix + ".workdir", "'" + in.workdir + "' is not a directory");
    }
  }
  if (!in.log.empty()) {
    in.log = Absolute(in.log, base_dir);
    std::string dir = std::filesystem::path(in.log).parent_path().string();
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Bad(origin, log_node, prefix + ".log", "directory '" + dir + "' does not exist");
    }
  }
  return in;
}

Status ParseInstances(const std::string& origin, const std::string& base_dir,
                      const YAML::Node& node, const std::string& key,
                      std::vector<InstanceConfig>* out) {
  if (node.IsNull()) { out->clear(); return Status::OK(); }
  if (!node.IsSequence()) return Bad(origin, node, key, "expected a list of instances (- name: ...)");
  if (node.size() > ipc::kMaxInstances) {
    return Bad(origin, node, key, std::to_string(node.size()) + " instances; at most " +
                                      std::to_string(ipc::kMaxInstances) + " (the segment's rows)");
  }
  out->clear();
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string prefix = key + "[" + std::to_string(i) + "]";
    NANOKV_ASSIGN_OR_RETURN(InstanceConfig instance, ParseInstance(origin, base_dir, item, prefix));
    auto [it, fresh] = names.emplace(instance.name, i);
    if (!fresh) {
      return Bad(origin, item["name"], prefix + ".name",
                 "'" + instance.name + "' is already the name of " + key + "[" +
                     std::to_string(it->second) + "] (" + out->at(it->second).where + ")");
    }
    out->push_back(std::move(instance));
  }
  return Status::OK();
}

Status Apply(const std::string& origin, const std::string& base_dir, const YAML::Node& root,
             KvdConfig* c) {
  using Setter = std::function<Status(const YAML::Node&, const std::string&)>;
  const std::map<std::string, Setter> keys = {
      {"ipc_name", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->ipc_name, Scalar(origin, n, k)); return Status::OK(); }},
      {"backend", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(c->backend, Scalar(origin, n, k));
         if (c->backend != "auto" && c->backend != "cuda" && c->backend != "hip" && c->backend != "host") {
           return Bad(origin, n, k, "'" + c->backend + "' is not one of auto, cuda, hip, host");
         }
         return Status::OK(); }},
      {"devices", [&](auto& n, auto& k) {
         if (n.IsScalar() && n.Scalar() == "all") { c->devices.clear(); return Status::OK(); }
         return List<int>(origin, n, k, &c->devices, [&](auto& item, auto& name) -> Result<int> {
           NANOKV_ASSIGN_OR_RETURN(int64_t d, Integer(origin, item, name, 0, 15));
           return static_cast<int>(d); }); }},
      {"page_size", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, n, k));
         auto bytes = ParseBytes(text);
         if (!bytes.ok()) return Bad(origin, n, k, std::string(bytes.status().message()));
         if (*bytes == 0 || (*bytes & (*bytes - 1)) != 0) return Bad(origin, n, k, "'" + text + "' is not a power of two");
         c->page_bytes = *bytes;
         return Status::OK(); }},
      {"capacity", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->capacity, SizeOrFraction(origin, n, k, false)); return Status::OK(); }},
      {"reserve_pages", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 0, 1 << 20)); c->reserve_pages = static_cast<uint32_t>(v); return Status::OK(); }},
      {"default_limit", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->default_limit, SizeOrFraction(origin, n, k, true)); return Status::OK(); }},
      {"allowed_uids", [&](auto& n, auto& k) { return List<uid_t>(origin, n, k, &c->allowed_uids, [&](auto& item, auto& name) { return UserId(origin, item, name); }); }},
      {"allowed_gids", [&](auto& n, auto& k) { return List<gid_t>(origin, n, k, &c->allowed_gids, [&](auto& item, auto& name) { return GroupId(origin, item, name); }); }},
      {"socket_mode", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->socket_mode, Mode(origin, n, k)); return Status::OK(); }},
      {"segment_mode", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->segment_mode, Mode(origin, n, k)); return Status::OK(); }},
      {"group", [&](auto& n, auto& k) {
         if (n.IsScalar() && n.Scalar().empty()) { c->group.reset(); return Status::OK(); }
         NANOKV_ASSIGN_OR_RETURN(gid_t gid, GroupId(origin, n, k));
         c->group = gid;
         return Status::OK(); }},
      {"log_level", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(c->log_level, Scalar(origin, n, k));
         static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
         for (const char* level : kLevels) if (c->log_level == level) return Status::OK();
         return Bad(origin, n, k, "'" + c->log_level + "' is not one of trace, debug, info, warn, error, critical, off"); }},
      {"recovery_window", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(c->recovery_window, Duration(origin, n, k, std::chrono::milliseconds(0),
                                                              std::chrono::minutes(60), "[0, 60m]"));
         return Status::OK();
       }},
      {"run_dir", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->run_dir, Scalar(origin, n, k)); return Status::OK(); }},
      {"host_devices", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 1, 16)); c->host_devices = static_cast<int>(v); return Status::OK(); }},
      {"host_device_memory", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, n, k));
         auto bytes = ParseBytes(text);
         if (!bytes.ok()) return Bad(origin, n, k, std::string(bytes.status().message()));
         c->host_device_bytes = *bytes;
         return Status::OK(); }},
      {"instances", [&](auto& n, auto& k) { return ParseInstances(origin, base_dir, n, k, &c->instances); }},
      {"object_store", [&](auto& n, auto& k) { return ParseObjectStoreConfig(origin, n, k, &c->object_store); }},
      {"max_connections", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 0, 1 << 20)); c->max_connections = static_cast<uint32_t>(v); return Status::OK(); }},
      {"max_connections_per_process", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 1, 1 << 20)); c->max_connections_per_process = static_cast<uint32_t>(v); return Status::OK(); }},
      {"busy_poll_us", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 0, 10'000)); c->busy_poll_us = static_cast<uint32_t>(v); return Status::OK(); }},
      {"check_invariants", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, n, k));
         if (text == "true") c->check_invariants = true;
         else if (text == "false") c->check_invariants = false;
         else return Bad(origin, n, k, "'" + text + "' is not true or false");
         return Status::OK(); }},
  };
  if (root.IsNull()) return Status::OK();  // an empty file: all defaults
  if (!root.IsMap()) return Bad(origin, root, "(top level)", "expected a mapping of key: value");
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    auto it = keys.find(key);
    if (it == keys.end()) return Bad(origin, entry.first, key, "unknown key");
    NANOKV_RETURN_IF_ERROR(it->second(entry.second, key));
  }
  return Status::OK();
}

}  // namespace

std::string LimitText(const SizeOrShare& limit) {
  if (!limit.is_fraction()) return std::to_string(limit.bytes);
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g%%", limit.fraction * 100);
  return text;
}

Result<KvdConfig> LoadConfigText(const std::string& text, const std::string& origin,
                                 const std::string& base_dir) {
  KvdConfig config;
  try {
    YAML::Node root = YAML::Load(text);
    std::error_code ignored;
    std::string base = base_dir.empty() ? std::filesystem::current_path(ignored).string() : base_dir;
    NANOKV_RETURN_IF_ERROR(Apply(origin, base, root, &config));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  NANOKV_RETURN_IF_ERROR(Validate(config));
  return config;
}

Result<KvdConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::error_code ignored;
  std::string base_dir = std::filesystem::absolute(path, ignored).parent_path().string();
  return LoadConfigText(text.str(), path, base_dir);
}

Status Validate(const KvdConfig& config) {
  if (!ipc::ValidIpcName(config.ipc_name)) {
    return Status::InvalidArgument("ipc_name '" + config.ipc_name +
                                   "' is not 1-48 of [A-Za-z0-9_.-]");
  }
  if (config.page_bytes == 0 || (config.page_bytes & (config.page_bytes - 1)) != 0) {
    return Status::InvalidArgument("page_size " + std::to_string(config.page_bytes) +
                                   " is not a power of two");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
