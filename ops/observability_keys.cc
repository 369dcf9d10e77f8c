#include "ops/observability_keys.h"

#include <arpa/inet.h>

#include <filesystem>

#include "ops/logging.h"

namespace nanokv::ops {

void AddObservabilityKeys(const std::string& base_dir, ObservabilityFields fields,
                          std::map<std::string, std::function<Status(const YamlField&)>>* keys) {
  (*keys)["log_file"] = [out = fields.log_file, base_dir](const YamlField& f) -> Status {
    NANOKV_ASSIGN_OR_RETURN(std::string path, f.Scalar());
    std::filesystem::path p(path);
    if (!path.empty() && p.is_relative()) p = std::filesystem::path(base_dir) / p;
    *out = p.lexically_normal().string();
    return Status::OK();
  };
  (*keys)["log_format"] = [out = fields.log_format](const YamlField& f) -> Status {
    Result<std::string> text = f.Scalar();
    if (!text.ok()) return text.status();
    auto format = ParseLogFormat(*text);  // the same words SetUpLogging takes
    if (!format.ok()) return f.Bad(std::string(format.status().message()));
    *out = *text;
    return Status::OK();
  };
  (*keys)["metrics_port"] = [out = fields.metrics_port](const YamlField& f) -> Status {
    if (f.node().IsScalar() && f.node().Scalar().empty()) {  // metrics_port: "" turns it off again
      out->reset();
      return Status::OK();
    }
    NANOKV_ASSIGN_OR_RETURN(int64_t port, f.Integer(0, 65535));
    *out = static_cast<uint16_t>(port);
    return Status::OK();
  };
  (*keys)["metrics_address"] = [out = fields.metrics_address](const YamlField& f) -> Status {
    NANOKV_ASSIGN_OR_RETURN(std::string text, f.Scalar());
    unsigned char parsed[sizeof(in6_addr)];
    if (inet_pton(AF_INET, text.c_str(), parsed) != 1 && inet_pton(AF_INET6, text.c_str(), parsed) != 1) {
      return f.Bad("'" + text + "' is not an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1)");
    }
    *out = text;
    return Status::OK();
  };
}

}  // namespace nanokv::ops
