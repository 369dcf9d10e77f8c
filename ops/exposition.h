// Prometheus's text exposition format, version 0.0.4: what a scrape of
// /metrics answers (https://prometheus.io/docs/instrumenting/exposition_formats/).
// A family is a HELP line, a TYPE line, then its samples, each
// `name{label="value",...} value`; every family's samples come together and
// a name appears in one family only. Label values are another process's text
// at times (a tenant's name): they are escaped here, so any bytes make a
// valid line.
#ifndef NANOKV_OPS_EXPOSITION_H_
#define NANOKV_OPS_EXPOSITION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nanokv::ops {

// Label name -> value, in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };
const char* MetricTypeName(MetricType type);

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool ValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved to Prometheus).
bool ValidLabelName(std::string_view name);

// A value as the format writes it: integers exactly, others with the fewest
// digits that read back the same, "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

// Writes families into one text.
class TextWriter {
 public:
  // Starts a family: its HELP and TYPE lines.
  // REQUIRES: ValidMetricName(name); no family of this name written before.
  void Family(std::string_view name, std::string_view help, MetricType type);
  // One sample of the family begun last: `name` is the family's name, or it
  // with _bucket, _sum or _count for a histogram.
  // REQUIRES: every label name valid.
  void Sample(std::string_view name, const Labels& labels, double value);
  void Sample(std::string_view name, const Labels& labels, uint64_t value);
  // A histogram's _bucket, _sum and _count samples from cumulative bucket
  // counts (one per bound, ascending, then +Inf's).
  void Histogram(std::string_view name, const Labels& labels, const std::vector<double>& bounds,
                 const std::vector<uint64_t>& cumulative, double sum);

  const std::string& text() const { return text_; }
  std::string Take() { return std::move(text_); }

 private:
  void Line(std::string_view name, const Labels& labels, std::string_view value,
            const std::pair<std::string, std::string>* extra = nullptr);

  std::string text_;
};

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_EXPOSITION_H_
