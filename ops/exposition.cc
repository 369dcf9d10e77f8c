#include "ops/exposition.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace nanokv::ops {
namespace {

bool NameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

// HELP text escapes backslash and newline; label values also the double quote.
void Escape(std::string_view text, bool quote, std::string* out) {
  for (char c : text) {
    if (c == '\\') {
      *out += "\\\\";
    } else if (c == '\n') {
      *out += "\\n";
    } else if (quote && c == '"') {
      *out += "\\\"";
    } else {
      *out += c;
    }
  }
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, /*colon=*/true)) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, /*colon=*/false)) return false;
  }
  return true;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integral and exact in a double: no exponent, no ".0" (a page count reads as one).
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), value);
  return ec == std::errc() ? std::string(text, end) : "NaN";
}

void TextWriter::Family(std::string_view name, std::string_view help, MetricType type) {
  assert(ValidMetricName(name));
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  Escape(help, /*quote=*/false, &text_);
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += MetricTypeName(type);
  text_ += '\n';
}

void TextWriter::Line(std::string_view name, const Labels& labels, std::string_view value,
                      const std::pair<std::string, std::string>* extra) {
  text_ += name;
  if (!labels.empty() || extra != nullptr) {
    text_ += '{';
    bool first = true;
    auto label = [&](const std::pair<std::string, std::string>& l) {
      assert(ValidLabelName(l.first));
      if (!first) text_ += ',';
      first = false;
      text_ += l.first;
      text_ += "=\"";
      Escape(l.second, /*quote=*/true, &text_);
      text_ += '"';
    };
    for (const auto& l : labels) label(l);
    if (extra != nullptr) label(*extra);
    text_ += '}';
  }
  text_ += ' ';
  text_ += value;
  text_ += '\n';
}

void TextWriter::Sample(std::string_view name, const Labels& labels, double value) {
  Line(name, labels, FormatValue(value));
}

void TextWriter::Sample(std::string_view name, const Labels& labels, uint64_t value) {
  Line(name, labels, std::to_string(value));
}

void TextWriter::Histogram(std::string_view name, const Labels& labels,
                           const std::vector<double>& bounds,
                           const std::vector<uint64_t>& cumulative, double sum) {
  assert(cumulative.size() == bounds.size() + 1);
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i <= bounds.size(); ++i) {
    std::pair<std::string, std::string> le{"le", i < bounds.size() ? FormatValue(bounds[i]) : "+Inf"};
    Line(bucket, labels, std::to_string(cumulative[i]), &le);
  }
  Line(std::string(name) + "_sum", labels, FormatValue(sum));
  Line(std::string(name) + "_count", labels, std::to_string(cumulative.back()));
}

}  // namespace nanokv::ops
