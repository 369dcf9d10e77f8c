#include "daemon/config.h"

#include <grp.h>
#include <pwd.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "ipc/naming.h"

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
            std::vector<T>* out, Parse parse) {
  if (!node.IsSequence()) return Bad(origin, node, key, "expected a list like [0, 1]");
  out->clear();
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string name = key + "[" + std::to_string(i) + "]";
    NANOKV_ASSIGN_OR_RETURN(T value, parse(item, name));
    out->push_back(value);
  }
  return Status::OK();
}

Status Apply(const std::string& origin, const YAML::Node& root, KvdConfig* c) {
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
         c->page_size = *bytes;
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
      {"run_dir", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(c->run_dir, Scalar(origin, n, k)); return Status::OK(); }},
      {"host_devices", [&](auto& n, auto& k) { NANOKV_ASSIGN_OR_RETURN(int64_t v, Integer(origin, n, k, 1, 16)); c->host_devices = static_cast<int>(v); return Status::OK(); }},
      {"host_device_memory", [&](auto& n, auto& k) {
         NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, n, k));
         auto bytes = ParseBytes(text);
         if (!bytes.ok()) return Bad(origin, n, k, std::string(bytes.status().message()));
         c->host_device_bytes = *bytes;
         return Status::OK(); }},
  };
  if (root.IsNull()) return Status::OK();  // an empty file: all defaults
  if (!root.IsMap()) return Bad(origin, root, "(top level)", "expected a mapping of key: value");
  for (const auto& entry : root) {
    std::string key = entry.first.as<std::string>();
    if (key == "instances") {
      return Bad(origin, entry.first, key, "the controller (instances:) is not built yet in this version");
    }
    auto it = keys.find(key);
    if (it == keys.end()) return Bad(origin, entry.first, key, "unknown key");
    NANOKV_RETURN_IF_ERROR(it->second(entry.second, key));
  }
  return Status::OK();
}

}  // namespace

Result<KvdConfig> LoadConfigText(const std::string& text, const std::string& origin) {
  KvdConfig config;
  try {
    YAML::Node root = YAML::Load(text);
    NANOKV_RETURN_IF_ERROR(Apply(origin, root, &config));
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
  return LoadConfigText(text.str(), path);
}

Status Validate(const KvdConfig& config) {
  if (!ipc::ValidIpcName(config.ipc_name)) {
    return Status::InvalidArgument("ipc_name '" + config.ipc_name +
                                   "' is not 1-48 of [A-Za-z0-9_.-]");
  }
  if (config.page_size == 0 || (config.page_size & (config.page_size - 1)) != 0) {
    return Status::InvalidArgument("page_size " + std::to_string(config.page_size) +
                                   " is not a power of two");
  }
  return Status::OK();
}

}  // namespace nanokv::kvd
