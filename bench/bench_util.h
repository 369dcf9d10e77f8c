// Small helpers shared by the benchmarks: a monotonic clock, percentiles, and
// a flat JSON object writer (benchmarks print one JSON object on stdout).
#ifndef NANOKV_BENCH_BENCH_UTIL_H_
#define NANOKV_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace nanokv::bench {

// stdout carries the one JSON object; the libraries' log lines go to stderr.
inline void LogToStderr(const std::string& name) {
  spdlog::set_default_logger(spdlog::stderr_color_st(name));
}

inline double NowMicros() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

// The q-quantile (0..1) of `samples`, nearest rank. Sorts a copy.
inline double Quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t rank = static_cast<size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(rank, samples.size() - 1)];
}

// Builds {"key": value, ...} in insertion order.
class JsonObject {
 public:
  JsonObject& Add(const std::string& key, double value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.4g", value);
    return Raw(key, buf);
  }
  JsonObject& Add(const std::string& key, long long value) { return Raw(key, std::to_string(value)); }
  JsonObject& Add(const std::string& key, bool value) { return Raw(key, value ? "true" : "false"); }
  JsonObject& Add(const std::string& key, const std::string& value) {
    std::string quoted = "\"";
    for (char c : value) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    return Raw(key, quoted + "\"");
  }
  JsonObject& Add(const std::string& key, const char* value) { return Add(key, std::string(value)); }
  JsonObject& Add(const std::string& key, const JsonObject& value) { return Raw(key, value.str()); }
  // p50 and p99 of `samples` as {"p50": .., "p99": .., "n": ..}.
  JsonObject& AddPercentiles(const std::string& key, const std::vector<double>& samples) {
    JsonObject p;
    p.Add("p50", Quantile(samples, 0.5))
        .Add("p99", Quantile(samples, 0.99))
        .Add("n", static_cast<long long>(samples.size()));
    return Add(key, p);
  }
  JsonObject& Raw(const std::string& key, const std::string& json) {
    fields_.emplace_back(key, json);
    return *this;
  }
  std::string str() const {
    std::string out = "{";
    for (size_t i = 0; i < fields_.size(); ++i) {
      if (i > 0) out += ", ";
      out += "\"" + fields_[i].first + "\": " + fields_[i].second;
    }
    return out + "}";
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace nanokv::bench

#endif  // NANOKV_BENCH_BENCH_UTIL_H_
