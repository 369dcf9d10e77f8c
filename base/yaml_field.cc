#include "base/yaml_field.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <utility>

namespace nanokv {

YamlField::YamlField(std::string origin, YAML::Node node, std::string key)
    : YamlField(std::move(origin), std::move(node), std::move(key), false) {}

YamlField::YamlField(std::string origin, YAML::Node node, std::string key, bool from_flag)
    : origin_(std::move(origin)), node_(std::move(node)), key_(std::move(key)), from_flag_(from_flag) {}

YamlField YamlField::Flag(YAML::Node node, std::string flag) {
  return YamlField(flag, std::move(node), flag, true);
}

YamlField YamlField::At(YAML::Node node, std::string key) const {
  return YamlField(origin_, std::move(node), std::move(key), from_flag_);
}

std::string YamlField::Where() const {
  if (from_flag_) return origin_;
  // A node built in code has no mark (-1): line 0.
  int line = node_.Mark().line >= 0 ? node_.Mark().line + 1 : 0;
  return origin_ + ":" + std::to_string(line);
}

Status YamlField::Bad(const std::string& what) const {
  if (from_flag_) return Status::InvalidArgument(key_ + ": " + what);
  return Status::InvalidArgument(Where() + ": " + key_ + ": " + what);
}

Result<std::string> YamlField::Scalar() const {
  if (!node_.IsScalar()) return Bad("expected a single value");
  return node_.Scalar();
}

Result<int64_t> YamlField::Integer(int64_t lo, int64_t hi) const {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar());
  try {
    size_t used = 0;
    long long value = std::stoll(text, &used, 0);
    if (used != text.size()) throw std::invalid_argument(text);
    if (value < lo || value > hi) {
      return Bad("'" + text + "' is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return static_cast<int64_t>(value);
  } catch (const std::exception&) {
    return Bad("'" + text + "' is not an integer");
  }
}

Result<bool> YamlField::Bool() const {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar());
  if (text == "true") return true;
  if (text == "false") return false;
  return Bad("'" + text + "' is not true or false");
}

Result<std::string> YamlField::OneOf(std::initializer_list<const char*> words) const {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar());
  std::string listed;
  for (const char* word : words) {
    if (text == word) return text;
    listed += (listed.empty() ? "" : ", ") + std::string(word);
  }
  return Bad("'" + text + "' is not one of " + listed);
}

Result<uint64_t> YamlField::Bytes() const {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar());
  auto bytes = ParseBytes(text);
  if (!bytes.ok()) return Bad(std::string(bytes.status().message()));
  return *bytes;
}

Result<SizeOrShare> YamlField::SizeOrFraction(bool allow_zero) const {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar());
  char* end = nullptr;
  double number = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && number > 0 && number <= 1 &&
      text.find('.') != std::string::npos) {
    return SizeOrShare{0, number};
  }
  if (end != text.c_str() && *end == '\0' && text.find('.') != std::string::npos && number > 1) {
    // Not 1 byte (what a size of "1.5" would round to): a fraction is at most 1.
    return Bad("'" + text + "' is a fraction above 1: give a fraction of at most 1 (0.9), a share (90%) "
               "or a size with a unit (40GiB)");
  }
  auto parsed = ParseSizeOrShare(text);
  if (!parsed.ok()) return Bad(std::string(parsed.status().message()));
  if (!allow_zero && !parsed->is_fraction() && parsed->bytes == 0) return Bad("must not be 0");
  return *parsed;
}

Result<std::chrono::milliseconds> YamlField::Duration(std::chrono::milliseconds lo,
                                                      std::chrono::milliseconds hi,
                                                      const char* range) const {
  NANOKV_ASSIGN_OR_RETURN(std::string text, Scalar());
  const char* begin = text.c_str();
  char* end = nullptr;
  double number = std::strtod(begin, &end);
  std::string unit(end);
  double scale = unit == "ms" ? 1 : unit == "s" ? 1e3 : unit == "m" ? 60e3 : -1;
  if (unit.empty() && end != begin && number == 0) scale = 0;  // a bare 0 needs no unit
  if (end == begin || scale < 0 || !std::isfinite(number) || number < 0 || text[0] == '+') {
    return Bad("'" + text + "' is not a duration like 500ms, 2s or 1m");
  }
  double ms = std::round(number * scale);
  if (ms < static_cast<double>(lo.count()) || ms > static_cast<double>(hi.count())) {
    return Bad("'" + text + "' is outside " + range);
  }
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

}  // namespace nanokv
