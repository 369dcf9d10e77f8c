#include "ops/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace nanokv::ops {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  assert(std::is_sorted(bounds_.begin(), bounds_.end()));
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // The first bound >= value: buckets are inclusive upper bounds.
  size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                      bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

void Histogram::Read(std::vector<uint64_t>* cumulative, double* sum) const {
  cumulative->assign(bounds_.size() + 1, 0);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    (*cumulative)[i] = running;
  }
  *sum = sum_.load(std::memory_order_relaxed);
}

std::vector<double> LatencyBuckets() {
  return {5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 1};
}

Registry::Child& Registry::FindOrAdd(std::string_view name, std::string_view help, MetricType type,
                                     const Labels& labels) {
  assert(ValidMetricName(name));
  assert(type != MetricType::kCounter || name.ends_with("_total"));
  for (const auto& label : labels) {
    assert(ValidLabelName(label.first));
    (void)label;
  }
  auto it = std::find_if(families_.begin(), families_.end(),
                         [&](const std::unique_ptr<Family>& f) { return f->name == name; });
  if (it == families_.end()) {
    families_.push_back(std::make_unique<Family>(Family{std::string(name), std::string(help), type, {}}));
    it = families_.end() - 1;
  }
  Family& family = **it;
  assert(family.type == type);
  for (Child& child : family.children) {
    if (child.labels == labels) return child;
  }
  family.children.push_back(Child{labels, nullptr, nullptr, nullptr});
  return family.children.back();
}

Counter& Registry::AddCounter(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Child& child = FindOrAdd(name, help, MetricType::kCounter, labels);
  if (!child.counter) child.counter = std::make_unique<Counter>();
  return *child.counter;
}

Gauge& Registry::AddGauge(std::string_view name, std::string_view help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Child& child = FindOrAdd(name, help, MetricType::kGauge, labels);
  if (!child.gauge) child.gauge = std::make_unique<Gauge>();
  return *child.gauge;
}

Histogram& Registry::AddHistogram(std::string_view name, std::string_view help,
                                  std::vector<double> bounds, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Child& child = FindOrAdd(name, help, MetricType::kHistogram, labels);
  if (!child.histogram) {
    child.histogram = std::make_unique<Histogram>(std::move(bounds));
  } else {
    assert(child.histogram->bounds() == bounds);
  }
  return *child.histogram;
}

void Registry::AddCollector(std::function<void(TextWriter&)> collect) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(collect));
}

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  TextWriter out;
  std::vector<uint64_t> cumulative;
  for (const auto& family : families_) {
    out.Family(family->name, family->help, family->type);
    for (const Child& child : family->children) {
      switch (family->type) {
        case MetricType::kCounter:
          out.Sample(family->name, child.labels, child.counter->value());
          break;
        case MetricType::kGauge:
          out.Sample(family->name, child.labels, child.gauge->value());
          break;
        case MetricType::kHistogram: {
          double sum = 0;
          child.histogram->Read(&cumulative, &sum);
          out.Histogram(family->name, child.labels, child.histogram->bounds(), cumulative, sum);
          break;
        }
      }
    }
  }
  for (const auto& collect : collectors_) collect(out);
  return out.Take();
}

}  // namespace nanokv::ops
