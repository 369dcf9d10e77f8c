#include "daemon/config/config.h"

#include <grp.h>
#include <pwd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>

#include "base/naming.h"
#include "base/run_dir.h"
#include "base/small_file.h"
#include "daemon/config/group_config.h"
#include "daemon/config/observability_keys.h"

namespace nanokv::kvd {
namespace {

Result<mode_t> Mode(const YamlField& field) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, field.Scalar());
  try {
    size_t used = 0;
    unsigned long value = std::stoul(text, &used, 8);
    if (used != text.size() || value > 0777) throw std::invalid_argument(text);
    return static_cast<mode_t>(value);
  } catch (const std::exception&) {
    return field.Bad("'" + text + "' is not an octal file mode like \"0660\"");
  }
}

Result<gid_t> GroupId(const YamlField& field) { return ReadGroupId(field); }
Result<uid_t> UserId(const YamlField& field) { return ReadUserId(field); }

// Reads an unsigned key that fits 32 bits, in [lo, hi].
Status Unsigned(const YamlField& field, int64_t lo, int64_t hi, uint32_t* out) {
  NANOKV_ASSIGN_OR_RETURN(int64_t value, field.Integer(lo, hi));
  *out = static_cast<uint32_t>(value);
  return Status::OK();
}

// Every top-level key of the file, each reading its value into *c: what a
// file's key and a flag over it (ApplyOverride) both go through.
using KeyReader = std::function<Status(const YamlField&)>;
std::map<std::string, KeyReader> TopLevelKeys(const std::string& base_dir, KvdConfig* c) {
  std::map<std::string, KeyReader> keys = {
      {"ipc_name", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->ipc_name, f.Scalar()); return Status::OK(); }},
      {"backend", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->backend, f.OneOf({"auto", "cuda", "hip", "host"})); return Status::OK(); }},
      {"devices", [c](const YamlField& f) {
         if (f.node().IsScalar() && f.node().Scalar() == "all") { c->devices.clear(); return Status::OK(); }
         return f.List(&c->devices, [](const YamlField& item) -> Result<int> {
           NANOKV_ASSIGN_OR_RETURN(int64_t d, item.Integer(0, 15));
           return static_cast<int>(d); }); }},
      {"page_size", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(uint64_t bytes, f.Bytes());
         if (bytes == 0 || (bytes & (bytes - 1)) != 0) {
           return f.Bad("'" + f.node().Scalar() + "' is not a power of two");
         }
         c->page_bytes = bytes;
         return Status::OK(); }},
      {"capacity", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->capacity, f.SizeOrFraction(false)); return Status::OK(); }},
      {"reserve_pages", [c](const YamlField& f) { return Unsigned(f, 0, 1 << 20, &c->reserve_pages); }},
      {"default_limit", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->default_limit, f.SizeOrFraction(true)); return Status::OK(); }},
      {"limit_ceiling", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->limit_ceiling, f.SizeOrFraction(true)); return Status::OK(); }},
      {"allowed_uids", [c](const YamlField& f) { return f.List(&c->allowed_uids, UserId); }},
      {"allowed_gids", [c](const YamlField& f) { return f.List(&c->allowed_gids, GroupId); }},
      {"groups", [c](const YamlField& f) { return ParseGroupAccess(f, &c->groups); }},
      {"socket_mode", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->socket_mode, Mode(f)); return Status::OK(); }},
      {"segment_mode", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(c->segment_mode, Mode(f));
         // Only kvd writes its segment: a reader that could write one odd
         // word into seq would make every kvctl answer "busy" (issue 19).
         if ((c->segment_mode & 022) != 0) {
           return f.Bad("'" + ModeText(c->segment_mode) + "' lets others write the segment; "
                        "readers need read access only (e.g. \"0640\")");
         }
         return Status::OK(); }},
      {"group", [c](const YamlField& f) {
         if (f.node().IsScalar() && f.node().Scalar().empty()) { c->group.reset(); return Status::OK(); }
         NANOKV_ASSIGN_OR_RETURN(c->group, GroupId(f));
         return Status::OK(); }},
      {"log_level", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(c->log_level, f.OneOf({"trace", "debug", "info", "warn", "error", "critical", "off"}));
         return Status::OK(); }},
      {"recovery_window", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(c->recovery_window, f.Duration(std::chrono::milliseconds(0),
                                                                std::chrono::minutes(60), "[0, 60m]"));
         return Status::OK(); }},
      {"run_dir", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(c->run_dir, f.Scalar());
         // Published in the segment for engines and kvctl: it must not
         // depend on kvd's working directory.
         if (!c->run_dir.empty() && c->run_dir[0] != '/') return f.Bad("'" + c->run_dir + "' is not an absolute path");
         return Status::OK(); }},
      {"host_devices", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(int64_t v, f.Integer(1, 16));
         c->host_devices = static_cast<int>(v);
         return Status::OK(); }},
      {"host_device_memory", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->host_device_bytes, f.Bytes()); return Status::OK(); }},
      {"instances", [c, &base_dir](const YamlField& f) { return ParseInstances(f, base_dir, &c->instances); }},
      {"object_store", [c](const YamlField& f) { return ParseObjectStoreConfig(f, &c->object_store); }},
      {"master", [c](const YamlField& f) { return ParseMasterLinkConfig(f, &c->master); }},
      {"max_connections", [c](const YamlField& f) { return Unsigned(f, 0, 1 << 20, &c->max_connections); }},
      {"max_connections_per_process", [c](const YamlField& f) { return Unsigned(f, 1, 1 << 20, &c->max_connections_per_process); }},
      {"busy_poll_us", [c](const YamlField& f) { return Unsigned(f, 0, 10'000, &c->busy_poll_us); }},
      {"check_invariants", [c](const YamlField& f) { NANOKV_ASSIGN_OR_RETURN(c->check_invariants, f.Bool()); return Status::OK(); }},
  };
  AddObservabilityKeys(base_dir, c, &keys);  // log_file, log_format, metrics_*
  return keys;
}

// kvd's deepest key is a few levels down; a file nested deeper, or a node
// that holds itself (`a: &a [*a]`), is refused before the walk below could
// run out of stack (found by fuzz_config_load).
constexpr int kMaxConfigDepth = 32;

// yaml-cpp keeps the last of two equal keys without a word: a second
// `capacity:` further down would silently win. Every mapping, at any depth.
Status CheckDuplicateKeys(const YamlField& top, const YAML::Node& node, const std::string& path, int depth = 0) {
  if (depth > kMaxConfigDepth) {
    return top.At(node, path.empty() ? "(top level)" : path)
        .Bad("nested deeper than " + std::to_string(kMaxConfigDepth) + " levels: no key of kvd's is");
  }
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      NANOKV_RETURN_IF_ERROR(CheckDuplicateKeys(top, node[i], path + "[" + std::to_string(i) + "]", depth + 1));
    }
  }
  if (!node.IsMap()) return Status::OK();
  std::map<std::string, int> seen;  // key -> its first line
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) continue;  // not a key kvd reads: "unknown key" says so
    const std::string key = entry.first.Scalar();
    const std::string full = path.empty() ? key : path + "." + key;
    auto [it, fresh] = seen.emplace(key, entry.first.Mark().line + 1);
    if (!fresh) return top.At(entry.first, full).Bad("given twice (first at line " + std::to_string(it->second) + ")");
    NANOKV_RETURN_IF_ERROR(CheckDuplicateKeys(top, entry.second, full, depth + 1));
  }
  return Status::OK();
}

Status Apply(const std::string& origin, const std::string& base_dir, const YAML::Node& root,
             KvdConfig* c) {
  // An empty file is more often a mistake (a truncated copy, the wrong
  // path) than a wish for every default, which `{}` says plainly.
  if (root.IsNull()) return Status::InvalidArgument(origin + ":1: the file is empty (write {} for every default)");
  const YamlField top(origin, root, "(top level)");
  if (!root.IsMap()) return top.Bad("expected a mapping of key: value");
  NANOKV_RETURN_IF_ERROR(CheckDuplicateKeys(top, root, ""));
  const std::map<std::string, KeyReader> keys = TopLevelKeys(base_dir, c);
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    auto it = keys.find(key);
    if (it == keys.end()) return top.At(entry.first, key).Bad("unknown key");
    NANOKV_RETURN_IF_ERROR(it->second(top.At(entry.second, key)));
    c->where[key] = top.At(entry.first, key).Where();
    // The store's keys kvd checks against the machine once devices are open.
    for (const char* sub : {"size", "host_tier"}) {
      if (key == "object_store" && entry.second.IsMap() && entry.second[sub]) {
        const std::string name = std::string("object_store.") + sub;
        c->where[name] = top.At(entry.second[sub], name).Where();
      }
    }
  }
  return Status::OK();
}

std::string CurrentDirectory() {
  std::error_code ignored;
  return std::filesystem::current_path(ignored).string();
}

}  // namespace

Result<KvdConfig> LoadConfigText(const std::string& text, const std::string& origin,
                                 const std::string& base_dir) {
  KvdConfig config;
  try {
    YAML::Node root = YAML::Load(text);
    NANOKV_RETURN_IF_ERROR(Apply(origin, base_dir.empty() ? CurrentDirectory() : base_dir, root, &config));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  NANOKV_RETURN_IF_ERROR(Validate(config));
  return config;
}

Result<KvdConfig> LoadConfigFile(const std::string& path) {
  NANOKV_ASSIGN_OR_RETURN(SmallFile file, ReadSmallFile(path, kMaxConfigFileBytes, "config file"));
  std::error_code ignored;
  std::string base_dir = std::filesystem::absolute(path, ignored).parent_path().string();
  return LoadConfigText(file.text, path, base_dir);
}

Status ApplyOverride(const std::string& key, const YamlField& value, KvdConfig* config) {
  const std::map<std::string, KeyReader> keys = TopLevelKeys(CurrentDirectory(), config);
  auto it = keys.find(key);
  if (it == keys.end()) return Status::InvalidArgument(value.key() + ": kvd's config has no key " + key);
  try {
    NANOKV_RETURN_IF_ERROR(it->second(value));
  } catch (const YAML::Exception& e) {
    return value.Bad(e.msg);
  }
  config->where[key] = value.Where();
  if (key == "object_store") {
    config->where.erase("object_store.size");
    config->where.erase("object_store.host_tier");
  }
  return Status::OK();
}

std::string KvdConfig::Origin(const std::string& key) const {
  auto it = where.find(key);
  if (it == where.end()) return key;
  if (it->second.starts_with("--")) return it->second;  // the flag names the key
  return it->second + ": " + key;
}

Status Validate(const KvdConfig& config) {
  if (!ipc::ValidIpcName(config.ipc_name)) {
    return Status::InvalidArgument(config.Origin("ipc_name") + ": '" + config.ipc_name +
                                   "' is not 1-48 of [A-Za-z0-9_.-]");
  }
  if (config.master.enabled() && !config.object_store.enabled()) {
    return Status::InvalidArgument(config.Origin("master") + ": a node joins the cluster with its object store: set object_store.size");
  }
  if (config.page_bytes == 0 || (config.page_bytes & (config.page_bytes - 1)) != 0) {
    return Status::InvalidArgument(config.Origin("page_size") + ": " + std::to_string(config.page_bytes) +
                                   " is not a power of two");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
