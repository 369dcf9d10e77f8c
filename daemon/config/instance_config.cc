#include "daemon/config/instance_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "base/naming.h"
#include "ipc/segment/layout.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvd {
namespace {

std::string Absolute(const std::string& path, const std::string& base_dir) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
  return p.lexically_normal().string();
}

// An instance's command as an absolute path to an executable file: a path
// (one with a '/') relative to `base_dir`, or a bare name found on `path_env`.
Result<std::string> ResolveCommand(const YamlField& field, const std::string& command,
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
      return field.Bad("'" + command + "' " + why + (file != command ? " (resolved to " + file + ")" : ""));
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
  return field.Bad("'" + command + "' is not found on PATH (" + path_env +
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

// One entry of `instances:`; its key is "instances[i]".
Result<InstanceConfig> ParseInstance(const YamlField& entry, const std::string& base_dir) {
  const std::string& prefix = entry.key();
  if (!entry.node().IsMap()) return entry.Bad("expected a mapping with at least name: and command:");
  InstanceConfig in;
  in.where = entry.Where();
  // Where the paths were given, for their errors once they are resolved.
  std::optional<YamlField> command_field, workdir_field, log_field;
  using Reader = std::function<Status(const YamlField&)>;
  const std::map<std::string, Reader> keys = {
      {"name", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.name, f.Scalar());
         if (!ipc::ValidIpcName(in.name)) {
           return f.Bad("'" + in.name + "' is not 1-48 of [A-Za-z0-9_.-] (not starting with '.')");
         }
         return Status::OK(); }},
      {"command", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.command, f.Scalar());
         if (in.command.empty()) return f.Bad("must not be empty");
         command_field = f;
         return Status::OK(); }},
      {"args", [&](const YamlField& f) {
         return f.List(&in.args, [](const YamlField& item) { return item.Scalar(); }, "[--pages, \"16\"]"); }},
      {"workdir", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.workdir, f.Scalar());
         workdir_field = f;
         return Status::OK(); }},
      {"env", [&](const YamlField& f) {
         if (!f.node().IsMap()) return f.Bad("expected a mapping of NAME: value");
         in.env.clear();
         for (const auto& var : f.node()) {
           std::string name = var.first.as<std::string>();
           const YamlField variable = f.At(var.first, f.key() + "." + name);
           if (!ValidVariableName(name)) return variable.Bad("not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
           if (const char* why = KvdSetVariable(name)) return variable.Bad(std::string("not allowed here: ") + why);
           NANOKV_ASSIGN_OR_RETURN(std::string value, f.At(var.second, variable.key()).Scalar());
           in.env.emplace_back(name, value);
         }
         return Status::OK(); }},
      {"limit", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.limit, f.SizeOrFraction(false));
         return Status::OK(); }},
      {"group", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.group, f.Scalar());
         if (!in.group.empty() && !wire::ValidName(in.group)) {
           return f.Bad("'" + in.group + "' is not 1-63 of [A-Za-z0-9_.:@-]");
         }
         return Status::OK(); }},
      {"device", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(int64_t d, f.Integer(0, ipc::kMaxDevices - 1));
         in.device = static_cast<int>(d);
         return Status::OK(); }},
      {"restart", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
         if (text == "never") in.restart = RestartPolicy::kNever;
         else if (text == "on-failure") in.restart = RestartPolicy::kOnFailure;
         else if (text == "always") in.restart = RestartPolicy::kAlways;
         else return f.Bad("'" + text + "' is not one of never, on-failure, always");
         return Status::OK(); }},
      {"max_restarts", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(int64_t v, f.Integer(0, 1000000));
         in.max_restarts = static_cast<uint32_t>(v);
         return Status::OK(); }},
      {"backoff", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.backoff, f.Duration(std::chrono::milliseconds(10),
                                                        std::chrono::minutes(10), "[10ms, 10m]"));
         return Status::OK(); }},
      {"start_delay", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.start_delay, f.Duration(std::chrono::milliseconds(0),
                                                            std::chrono::hours(24), "[0, 1440m]"));
         return Status::OK(); }},
      {"grace", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.grace, f.Duration(std::chrono::milliseconds(0),
                                                      std::chrono::minutes(10), "[0, 10m]"));
         return Status::OK(); }},
      {"log", [&](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(in.log, f.Scalar());
         log_field = f;
         return Status::OK(); }},
  };
  std::set<std::string> seen;
  for (const auto& item : entry.node()) {
    std::string key = item.first.as<std::string>();
    const std::string full = prefix + "." + key;
    auto it = keys.find(key);
    if (it == keys.end()) {
      return entry.At(item.first, full).Bad("unknown key (an instance has name, command, args, workdir, "
                                            "env, limit, group, device, restart, max_restarts, "
                                            "backoff, start_delay, grace, log)");
    }
    if (!seen.insert(key).second) return entry.At(item.first, full).Bad("given twice");
    NANOKV_RETURN_IF_ERROR(it->second(entry.At(item.second, full)));
  }
  if (in.name.empty()) return entry.At(entry.node(), prefix + ".name").Bad("missing: every instance needs a name");
  if (in.command.empty()) {
    return entry.At(entry.node(), prefix + ".command").Bad("missing: instance '" + in.name + "' has no command");
  }

  // Paths: relative ones against the config's directory; the command exists now.
  std::string path_env;
  for (const auto& [name, value] : in.env) if (name == "PATH") path_env = value;
  if (path_env.empty()) {
    const char* path = std::getenv("PATH");
    path_env = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  }
  NANOKV_ASSIGN_OR_RETURN(in.command, ResolveCommand(*command_field, in.command, base_dir, path_env));
  if (!in.workdir.empty()) {
    in.workdir = Absolute(in.workdir, base_dir);
    struct stat st{};
    if (stat(in.workdir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return workdir_field->Bad("'" + in.workdir + "' is not a directory");
    }
  }
  if (!in.log.empty()) {
    in.log = Absolute(in.log, base_dir);
    std::string dir = std::filesystem::path(in.log).parent_path().string();
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return log_field->Bad("directory '" + dir + "' does not exist");
    }
  }
  return in;
}

}  // namespace

std::string LimitText(const SizeOrShare& limit) {
  if (!limit.is_fraction()) return std::to_string(limit.bytes);
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g%%", limit.fraction * 100);
  return text;
}

Status ParseInstances(const YamlField& field, const std::string& base_dir,
                      std::vector<InstanceConfig>* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) { out->clear(); return Status::OK(); }
  if (!node.IsSequence()) return field.Bad("expected a list of instances (- name: ...)");
  if (node.size() > ipc::kMaxInstances) {
    return field.Bad(std::to_string(node.size()) + " instances; at most " +
                     std::to_string(ipc::kMaxInstances) + " (the segment's rows)");
  }
  std::vector<InstanceConfig> instances;
  std::map<std::string, size_t> names;
  for (size_t i = 0; i < node.size(); ++i) {
    const YamlField entry = field.At(node[i], field.key() + "[" + std::to_string(i) + "]");
    NANOKV_ASSIGN_OR_RETURN(InstanceConfig instance, ParseInstance(entry, base_dir));
    auto [it, fresh] = names.emplace(instance.name, i);
    if (!fresh) {
      return entry.At(entry.node()["name"], entry.key() + ".name")
          .Bad("'" + instance.name + "' is already the name of " + field.key() + "[" +
               std::to_string(it->second) + "] (" + instances.at(it->second).where + ")");
    }
    instances.push_back(std::move(instance));
  }
  *out = std::move(instances);
  return Status::OK();
}

}  // namespace nanokv::kvd
