#include "daemon/config/object_store_config.h"

#include <cstdlib>

namespace nanokv::kvd {
namespace {

// A fraction in (0, 1].
Result<double> Fraction(const YamlField& field) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, field.Scalar());
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value > 0 && value <= 1)) {
    return field.Bad("'" + text + "' is not a fraction in (0, 1] like 0.9");
  }
  return value;
}

}  // namespace

Status ParseObjectStoreConfig(const YamlField& field, ObjectStoreConfig* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping (size: 10%, policy: lru, ...)");
  ObjectStoreConfig c = *out;
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    const YamlField value = field.At(entry.second, field.key() + "." + name);
    if (name == "size") {
      NANOKV_ASSIGN_OR_RETURN(std::string text, value.Scalar());
      auto parsed = ParseSizeOrShare(text);
      if (!parsed.ok()) return value.Bad(std::string(parsed.status().message()));
      c.size = *parsed;
    } else if (name == "high_watermark") {
      NANOKV_ASSIGN_OR_RETURN(c.high_watermark, Fraction(value));
    } else if (name == "low_watermark") {
      NANOKV_ASSIGN_OR_RETURN(c.low_watermark, Fraction(value));
    } else if (name == "policy") {
      // A Result, not NANOKV_ASSIGN_OR_RETURN into a string: GCC 12 warns
      // that string may be read uninitialized (a false -Wmaybe-uninitialized).
      auto text = value.Scalar();
      if (!text.ok()) return text.status();
      if (*text == "fifo") c.policy = EvictionPolicy::kFifo;
      else if (*text == "lru") c.policy = EvictionPolicy::kLru;
      else return value.Bad("'" + *text + "' is not fifo or lru");
    } else if (name == "lease_ttl") {
      NANOKV_ASSIGN_OR_RETURN(c.lease_ttl, value.Duration(std::chrono::milliseconds(1),
                                                          std::chrono::minutes(60), "[1ms, 60m]"));
    } else if (name == "write_timeout") {
      NANOKV_ASSIGN_OR_RETURN(c.write_timeout, value.Duration(std::chrono::milliseconds(1),
                                                              std::chrono::minutes(60), "[1ms, 60m]"));
    } else if (name == "max_objects") {
      NANOKV_ASSIGN_OR_RETURN(int64_t n, value.Integer(0, 1 << 24));
      c.max_objects = static_cast<uint32_t>(n);
    } else if (name == "max_leases") {
      NANOKV_ASSIGN_OR_RETURN(int64_t n, value.Integer(1, 1 << 20));
      c.max_leases = static_cast<uint32_t>(n);
    } else if (name == "slab_ttl") {
      NANOKV_ASSIGN_OR_RETURN(c.slab_ttl,
                              value.Duration(std::chrono::milliseconds(1), std::chrono::hours(24), "[1ms, 24h]"));
    } else if (name == "max_slabs") {
      NANOKV_ASSIGN_OR_RETURN(int64_t n, value.Integer(1, 4096));
      c.max_slabs = static_cast<uint32_t>(n);
    } else if (name == "host_tier") {
      NANOKV_ASSIGN_OR_RETURN(std::string text, value.Scalar());
      auto bytes = ParseBytes(text);
      if (!bytes.ok()) return value.Bad(std::string(bytes.status().message()) + " (bytes per device, like 8GiB)");
      c.host_tier = *bytes;
    } else {
      return field.At(entry.first, value.key())
          .Bad(
              "unknown key (size, high_watermark, low_watermark, policy, lease_ttl, write_timeout, "
              "max_objects, max_leases, slab_ttl, max_slabs, host_tier)");
    }
  }
  if (c.low_watermark > c.high_watermark) {
    return field.Bad("low_watermark " + std::to_string(c.low_watermark) + " is above high_watermark " +
                     std::to_string(c.high_watermark));
  }
  *out = c;
  return Status::OK();
}

}  // namespace nanokv::kvd
