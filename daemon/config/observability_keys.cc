#include "daemon/config/observability_keys.h"

#include <arpa/inet.h>

#include <filesystem>

#include "daemon/config/config.h"

namespace nanokv::kvd {

void AddObservabilityKeys(const std::string& base_dir, KvdConfig* c,
                          std::map<std::string, std::function<Status(const YamlField&)>>* keys) {
  (*keys)["log_file"] = [c, base_dir](const YamlField& f) -> Status {
    NANOKV_ASSIGN_OR_RETURN(std::string path, f.Scalar());
    std::filesystem::path p(path);
    if (!path.empty() && p.is_relative()) p = std::filesystem::path(base_dir) / p;
    c->log_file = p.lexically_normal().string();
    return Status::OK();
  };
  (*keys)["log_format"] = [c](const YamlField& f) -> Status {
    Result<std::string> text = f.Scalar();
    if (!text.ok()) return text.status();
    auto format = ops::ParseLogFormat(*text);  // the same words SetUpLogging takes
    if (!format.ok()) return f.Bad(std::string(format.status().message()));
    c->log_format = *text;
    return Status::OK();
  };
  (*keys)["metrics_port"] = [c](const YamlField& f) -> Status {
    if (f.node().IsScalar() && f.node().Scalar().empty()) {  // metrics_port: "" turns it off again
      c->metrics_port.reset();
      return Status::OK();
    }
    NANOKV_ASSIGN_OR_RETURN(int64_t port, f.Integer(0, 65535));
    c->metrics_port = static_cast<uint16_t>(port);
    return Status::OK();
  };
  (*keys)["metrics_address"] = [c](const YamlField& f) -> Status {
    NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
    unsigned char parsed[sizeof(in6_addr)];
    if (inet_pton(AF_INET, text.c_str(), parsed) != 1 && inet_pton(AF_INET6, text.c_str(), parsed) != 1) {
      return f.Bad("'" + text + "' is not an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1)");
    }
    c->metrics_address = text;
    return Status::OK();
  };
}

ops::LogOptions LogOptionsOf(const KvdConfig& config) {
  ops::LogOptions options;
  options.program = "kvd";
  options.level = config.log_level;
  options.format = config.log_format == "json" ? ops::LogFormat::kJson : ops::LogFormat::kText;
  options.file = config.log_file;
  return options;
}

ops::MetricsServerOptions MetricsOptionsOf(const KvdConfig& config) {
  ops::MetricsServerOptions options;
  options.address = config.metrics_address;
  options.port = config.metrics_port.value_or(0);
  return options;
}

}  // namespace nanokv::kvd
