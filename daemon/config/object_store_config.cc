#include "daemon/config/object_store_config.h"

#include <cmath>
#include <cstdlib>

namespace nanokv::kvd {
namespace {

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

// A fraction in (0, 1].
Result<double> Fraction(const std::string& origin, const YAML::Node& node, const std::string& key) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value > 0 && value <= 1)) {
    return Bad(origin, node, key, "'" + text + "' is not a fraction in (0, 1] like 0.9");
  }
  return value;
}

// "500ms", "2s", "1m"; at least 1 ms, at most an hour.
Result<std::chrono::milliseconds> Millis(const std::string& origin, const YAML::Node& node,
                                         const std::string& key) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, node, key));
  char* end = nullptr;
  double number = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = unit == "ms" ? 1 : unit == "s" ? 1e3 : unit == "m" ? 60e3 : -1;
  double ms = std::round(number * scale);
  if (end == text.c_str() || scale < 0 || !std::isfinite(number) || ms < 1 || ms > 3600e3) {
    return Bad(origin, node, key, "'" + text + "' is not a duration in [1ms, 60m] like 500ms or 2s");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

}  // namespace

Status ParseObjectStoreConfig(const std::string& origin, const YAML::Node& node,
                              const std::string& key, ObjectStoreConfig* out) {
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return Bad(origin, node, key, "expected a mapping (size: 10%, policy: lru, ...)");
  ObjectStoreConfig c = *out;
  for (const auto& entry : node) {
    std::string field = entry.first.as<std::string>();
    std::string name = key + "." + field;
    const YAML::Node value = entry.second;
    if (field == "size") {
      NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, value, name));
      auto parsed = ParseSizeOrShare(text);
      if (!parsed.ok()) return Bad(origin, value, name, std::string(parsed.status().message()));
      c.size = *parsed;
    } else if (field == "high_watermark") {
      NANOKV_ASSIGN_OR_RETURN(c.high_watermark, Fraction(origin, value, name));
    } else if (field == "low_watermark") {
      NANOKV_ASSIGN_OR_RETURN(c.low_watermark, Fraction(origin, value, name));
    } else if (field == "policy") {
      auto text = Scalar(origin, value, name);
      if (!text.ok()) return text.status();
      if (*text == "fifo") c.policy = EvictionPolicy::kFifo;
      else if (*text == "lru") c.policy = EvictionPolicy::kLru;
      else return Bad(origin, value, name, "'" + *text + "' is not fifo or lru");
    } else if (field == "lease_ttl") {
      NANOKV_ASSIGN_OR_RETURN(c.lease_ttl, Millis(origin, value, name));
    } else if (field == "write_timeout") {
      NANOKV_ASSIGN_OR_RETURN(c.write_timeout, Millis(origin, value, name));
    } else if (field == "max_objects") {
      NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar(origin, value, name));
      char* end = nullptr;
      unsigned long long n = std::strtoull(text.c_str(), &end, 10);
      if (end == text.c_str() || *end != '\0' || n > (1u << 24)) {
        return Bad(origin, value, name, "'" + text + "' is not an integer in [0, 16777216]");
      }
      c.max_objects = static_cast<uint32_t>(n);
    } else {
      return Bad(origin, entry.first, name, "unknown key (size, high_watermark, low_watermark, "
                                            "policy, lease_ttl, write_timeout, max_objects)");
    }
  }
  if (c.low_watermark > c.high_watermark) {
    return Bad(origin, node, key, "low_watermark " + std::to_string(c.low_watermark) +
                                      " is above high_watermark " + std::to_string(c.high_watermark));
  }
  *out = c;
  return Status::OK();
}

}  // namespace nanokv::kvd
