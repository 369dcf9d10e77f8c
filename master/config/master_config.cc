#include "master/config/master_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "base/small_file.h"
#include "ipc/master/master_checks.h"
#include "ipc/master/master_protocol.h"
#include "ops/observability_keys.h"

namespace nanokv::master {
namespace {

using KeyReader = std::function<Status(const YamlField&)>;

Status Text(const YamlField& f, std::string* out) {
  NANOKV_ASSIGN_OR_RETURN(*out, f.Scalar());
  return Status::OK();
}

// "host:port" with a port in 1..65535 (":0" for listen: any free port).
Status Address(const YamlField& f, bool port_zero_ok, std::string* out) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
  size_t colon = text.rfind(':');
  std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  long value = digits ? std::stol(port) : -1;
  if (colon == 0 || !digits || value > 65535 || (value == 0 && !port_zero_ok) ||
      text.size() > kMaxAddressBytes) {
    return f.Bad("'" + text + "' is not host:port");
  }
  *out = text;
  return Status::OK();
}

Status Tls(const YamlField& field, TlsFiles* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping (cert: ..., key: ..., ca: ...)");
  TlsFiles tls;
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    const YamlField value = field.At(entry.second, field.key() + "." + name);
    if (name == "cert") NANOKV_RETURN_IF_ERROR(Text(value, &tls.cert));
    else if (name == "key") NANOKV_RETURN_IF_ERROR(Text(value, &tls.key));
    else if (name == "ca") NANOKV_RETURN_IF_ERROR(Text(value, &tls.ca));
    else return field.At(entry.first, value.key()).Bad("unknown key (cert, key, ca)");
  }
  if (tls.any() && (tls.cert.empty() || tls.key.empty())) {
    return field.Bad("a master serving TLS needs both cert and key");
  }
  *out = tls;
  return Status::OK();
}

// etcd's endpoint: host:port, optionally behind http:// or https://.
Result<std::string> EtcdEndpoint(const YamlField& f) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
  std::string bare = text;
  for (const char* scheme : {"http://", "https://"}) {
    if (bare.rfind(scheme, 0) == 0) bare = bare.substr(std::string(scheme).size());
  }
  size_t colon = bare.rfind(':');
  std::string port = colon == std::string::npos ? "" : bare.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stol(port) == 0 || std::stol(port) > 65535 || text.size() > kMaxAddressBytes) {
    return f.Bad("'" + text + "' is not host:port (http:// or https:// may lead)");
  }
  return text;
}

// A key prefix in etcd: "/" then printable bytes, not ending in "/".
Status EtcdPrefix(const YamlField& f, std::string* out) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
  bool printable = std::all_of(text.begin(), text.end(), [](char ch) { return ch > ' ' && ch < 127; });
  if (text.size() < 2 || text.size() > 256 || text.front() != '/' || text.back() == '/' || !printable) {
    return f.Bad("'" + text + "' is not a key prefix: '/' then 1-255 printable bytes, not ending in '/'");
  }
  *out = text;
  return Status::OK();
}

Status Etcd(const YamlField& field, EtcdLink* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping (endpoints: [host:port], prefix: ..., ...)");
  EtcdLink etcd;
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    const YamlField value = field.At(entry.second, field.key() + "." + name);
    if (name == "endpoints") {
      if (value.node().IsScalar()) {
        NANOKV_ASSIGN_OR_RETURN(std::string one, EtcdEndpoint(value));
        etcd.endpoints = {one};
      } else {
        NANOKV_RETURN_IF_ERROR(value.List(&etcd.endpoints, EtcdEndpoint, "[\"10.0.0.1:2379\", \"10.0.0.2:2379\"]"));
      }
    } else if (name == "prefix") {
      NANOKV_RETURN_IF_ERROR(EtcdPrefix(value, &etcd.prefix));
    } else if (name == "lease_ttl") {
      // etcd's leases are whole seconds.
      NANOKV_ASSIGN_OR_RETURN(etcd.lease_ttl, value.Duration(std::chrono::seconds(1), std::chrono::minutes(10),
                                                             "[1s, 10m]"));
    } else if (name == "tls") {
      const YAML::Node& tls = value.node();
      if (!tls.IsMap()) return value.Bad("expected a mapping (ca: ..., cert: ..., key: ...)");
      for (const auto& file : tls) {
        std::string which = file.first.as<std::string>();
        const YamlField path = value.At(file.second, value.key() + "." + which);
        if (which == "ca") NANOKV_RETURN_IF_ERROR(Text(path, &etcd.tls.ca));
        else if (which == "cert") NANOKV_RETURN_IF_ERROR(Text(path, &etcd.tls.cert));
        else if (which == "key") NANOKV_RETURN_IF_ERROR(Text(path, &etcd.tls.key));
        else return value.At(file.first, path.key()).Bad("unknown key (ca, cert, key)");
      }
      if (etcd.tls.cert.empty() != etcd.tls.key.empty()) return value.Bad("cert and key go together");
    } else {
      return field.At(entry.first, value.key()).Bad("unknown key (endpoints, prefix, lease_ttl, tls)");
    }
  }
  if (etcd.endpoints.empty()) return field.Bad("endpoints: name at least one etcd member (host:port)");
  *out = etcd;
  return Status::OK();
}

Status Duration(const YamlField& f, std::chrono::milliseconds lo, std::chrono::milliseconds hi, const char* range,
                std::chrono::milliseconds* out) {
  NANOKV_ASSIGN_OR_RETURN(*out, f.Duration(lo, hi, range));
  return Status::OK();
}

// `base_dir`: where a relative log_file resolves (the config file's folder).
std::map<std::string, KeyReader> TopLevelKeys(const std::string& base_dir, MasterConfig* c) {
  using std::chrono::milliseconds;
  using std::chrono::minutes;
  std::map<std::string, KeyReader> keys = {
      {"id", [c](const YamlField& f) {
         NANOKV_RETURN_IF_ERROR(Text(f, &c->id));
         if (!c->id.empty() && !ValidNodeId(c->id)) return f.Bad("'" + c->id + "' is not 1-63 of [A-Za-z0-9_.-]");
         return Status::OK(); }},
      {"listen", [c](const YamlField& f) { return Address(f, true, &c->listen); }},
      {"advertise", [c](const YamlField& f) {
         if (f.node().IsScalar() && f.node().Scalar().empty()) { c->advertise.clear(); return Status::OK(); }
         return Address(f, false, &c->advertise); }},
      {"token_file", [c](const YamlField& f) { return Text(f, &c->token_file); }},
      {"tls", [c](const YamlField& f) { return Tls(f, &c->tls); }},
      {"lease_ttl", [c](const YamlField& f) {
         return Duration(f, milliseconds(100), minutes(10), "[100ms, 10m]", &c->lease_ttl); }},
      {"heartbeat_interval", [c](const YamlField& f) {
         return Duration(f, milliseconds(10), minutes(5), "[10ms, 5m]", &c->heartbeat_interval); }},
      {"instruction_timeout", [c](const YamlField& f) {
         return Duration(f, milliseconds(10), minutes(10), "[10ms, 10m]", &c->instruction_timeout); }},
      {"rebuild_window", [c](const YamlField& f) {
         return Duration(f, milliseconds(0), minutes(10), "[0, 10m]", &c->rebuild_window); }},
      {"expected_nodes", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(int64_t n, f.Integer(0, 4096));
         c->expected_nodes = static_cast<uint32_t>(n);
         return Status::OK(); }},
      {"max_objects_per_node", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(int64_t n, f.Integer(1, int64_t{1} << 32));
         c->max_objects_per_node = static_cast<uint64_t>(n);
         return Status::OK(); }},
      {"term", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(int64_t n, f.Integer(1, INT64_MAX));
         c->term = static_cast<uint64_t>(n);
         return Status::OK(); }},
      {"etcd", [c](const YamlField& f) { return Etcd(f, &c->etcd); }},
      {"log_level", [c](const YamlField& f) {
         NANOKV_ASSIGN_OR_RETURN(c->log_level, f.OneOf({"trace", "debug", "info", "warn", "error", "critical", "off"}));
         return Status::OK(); }},
  };
  ops::AddObservabilityKeys(base_dir, {&c->log_file, &c->log_format, &c->metrics_port, &c->metrics_address}, &keys);
  return keys;
}

}  // namespace

Result<MasterConfig> LoadMasterConfigText(const std::string& text, const std::string& origin) {
  MasterConfig config;
  try {
    YAML::Node root = YAML::Load(text);
    if (!root.IsNull()) {
      const YamlField top(origin, root, "(top level)");
      if (!root.IsMap()) return top.Bad("expected a mapping of key: value");
      const auto keys = TopLevelKeys(std::filesystem::path(origin).parent_path().string(), &config);
      for (const auto& entry : root) {
        std::string key = entry.first.as<std::string>();
        auto it = keys.find(key);
        if (it == keys.end()) return top.At(entry.first, key).Bad("unknown key");
        NANOKV_RETURN_IF_ERROR(it->second(top.At(entry.second, key)));
      }
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(origin + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  NANOKV_RETURN_IF_ERROR(ValidateMasterConfig(config));
  return config;
}

Result<MasterConfig> LoadMasterConfigFile(const std::string& path) {
  NANOKV_ASSIGN_OR_RETURN(SmallFile file, ReadSmallFile(path, kMaxConfigFileBytes, "config file"));
  return LoadMasterConfigText(file.text, path);
}

Status ApplyMasterOverride(const std::string& key, const YamlField& value, MasterConfig* config) {
  const auto keys = TopLevelKeys("", config);  // a flag's relative path: the working folder
  auto it = keys.find(key);
  if (it == keys.end()) return Status::InvalidArgument(value.key() + ": the master's config has no key " + key);
  try {
    return it->second(value);
  } catch (const YAML::Exception& e) {
    return value.Bad(e.msg);
  }
}

Status ValidateMasterConfig(const MasterConfig& config) {
  if (config.heartbeat_interval * 2 > config.lease_ttl) {
    return Status::InvalidArgument("heartbeat_interval " + std::to_string(config.heartbeat_interval.count()) +
                                   "ms is over half of lease_ttl " + std::to_string(config.lease_ttl.count()) +
                                   "ms: one lost heartbeat would end a live node's lease");
  }
  return Status::OK();
}

}  // namespace nanokv::master
