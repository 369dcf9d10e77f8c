// A metrics registry for a daemon (kvd; the master uses the same), rendered
// in Prometheus's text format (exposition.h) by the HTTP server
// (http_server.h), which is the only reader.
//
// Two kinds of series:
//   - fixed ones, registered at start: Counter, Gauge, Histogram. Their
//     values are atomics. The daemon's threads update them with relaxed
//     stores and adds, lock-free and allocation-free; a scrape on the
//     server's thread reads them. Nothing a scrape does waits on the daemon,
//     and nothing the daemon does waits on a scrape.
//   - collected ones, written at each scrape by a collector function from a
//     snapshot the daemon published (kvd's /dev/shm segment): rows that come
//     and go (tenants, instances) never leave a stale series behind.
//
// Registration takes a mutex that Render also takes: register at start, not
// on a hot path. A family's children share its name, help and type, and a
// collector must not write a family the registry holds.
#ifndef NANOKV_OPS_METRICS_H_
#define NANOKV_OPS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ops/exposition.h"

namespace nanokv::ops {

// Only goes up (Add), or mirrors a count kept elsewhere that only goes up (Set).
class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  void Set(uint64_t total) { value_.store(total, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into buckets by upper bound (`le`, inclusive), plus
// their sum. Observe is a search over the bounds and two relaxed adds.
class Histogram {
 public:
  // REQUIRES: `bounds` ascending, finite. +Inf is implied.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);

  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts per bound, then +Inf's (the count), and the sum. Each
  // bucket is read once, so the cumulative counts never go down even while
  // Observe runs; _count is +Inf's bucket.
  void Read(std::vector<uint64_t>* cumulative, double* sum) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1, not cumulative
  std::atomic<double> sum_{0};
};

// Latency buckets in seconds from 5 µs to 1 s: a request to kvd takes tens of
// µs on the host backend and up to a few ms when it creates pages on a GPU.
std::vector<double> LatencyBuckets();

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The child of family `name` with `labels`, made on first use. The
  // reference stays valid while the registry lives.
  // REQUIRES: ValidMetricName(name), valid label names, the same type (and
  // for a histogram the same bounds) for every child of a family. A
  // counter's name ends in _total (Prometheus's rule; promtool checks it).
  Counter& AddCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& AddGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& AddHistogram(std::string_view name, std::string_view help, std::vector<double> bounds,
                          const Labels& labels = {});

  // Called at every Render, after the fixed families, in the order added.
  void AddCollector(std::function<void(TextWriter&)> collect);

  // The whole exposition: every fixed family, then what the collectors write.
  std::string Render() const;

 private:
  struct Child {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    std::string name;
    std::string help;
    MetricType type;
    std::vector<Child> children;
  };
  Child& FindOrAdd(std::string_view name, std::string_view help, MetricType type, const Labels& labels);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;  // in registration order
  std::vector<std::function<void(TextWriter&)>> collectors_;
};

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_METRICS_H_
