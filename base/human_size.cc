#include "base/human_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace nanokv {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Result<double> Multiplier(std::string_view suffix_text) {
  std::string suffix = Lower(Trim(suffix_text));
  if (suffix.empty() || suffix == "b") return 1.0;
  static const struct { const char* name; double value; } kUnits[] = {
      {"k", 0x1p10}, {"ki", 0x1p10}, {"kib", 0x1p10}, {"kb", 1e3},
      {"m", 0x1p20}, {"mi", 0x1p20}, {"mib", 0x1p20}, {"mb", 1e6},
      {"g", 0x1p30}, {"gi", 0x1p30}, {"gib", 0x1p30}, {"gb", 1e9},
      {"t", 0x1p40}, {"ti", 0x1p40}, {"tib", 0x1p40}, {"tb", 1e12},
  };
  for (const auto& unit : kUnits) {
    if (suffix == unit.name) return unit.value;
  }
  return Status::InvalidArgument("unknown size unit '" + std::string(suffix_text) + "'");
}

// Splits "1.5GiB" into 1.5 and "GiB".
Result<std::pair<double, std::string_view>> Number(std::string_view text) {
  std::string s(Trim(text));
  if (s.empty()) return Status::InvalidArgument("empty size");
  if (s[0] == '-' || s[0] == '+') return Status::InvalidArgument("size '" + s + "' has a sign");
  char* end = nullptr;
  double value = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(value)) {
    return Status::InvalidArgument("size '" + s + "' does not start with a number");
  }
  size_t used = static_cast<size_t>(end - s.c_str());
  return std::make_pair(value, Trim(text).substr(used));
}

}  // namespace

Result<uint64_t> ParseBytes(std::string_view text) {
  NANOKV_ASSIGN_OR_RETURN(auto parsed, Number(text));
  auto multiplier = Multiplier(parsed.second);
  if (!multiplier.ok()) {
    return Status::InvalidArgument("size '" + std::string(Trim(text)) +
                                   "': " + std::string(multiplier.status().message()));
  }
  double bytes = parsed.first * *multiplier;
  if (bytes >= 0x1p64) return Status::InvalidArgument("size '" + std::string(text) + "' is too large");
  return static_cast<uint64_t>(bytes);
}

Result<SizeOrShare> ParseSizeOrShare(std::string_view text) {
  std::string_view t = Trim(text);
  if (!t.empty() && t.back() == '%') {
    NANOKV_ASSIGN_OR_RETURN(auto parsed, Number(t.substr(0, t.size() - 1)));
    if (!parsed.second.empty() || parsed.first <= 0 || parsed.first > 100) {
      return Status::InvalidArgument("share '" + std::string(t) + "' is not in (0%, 100%]");
    }
    SizeOrShare out;
    out.fraction = parsed.first / 100.0;
    return out;
  }
  NANOKV_ASSIGN_OR_RETURN(uint64_t bytes, ParseBytes(t));
  SizeOrShare out;
  out.bytes = bytes;
  return out;
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), value < 10 ? "%.2f %s" : "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

}  // namespace nanokv
