// ops/metrics.h and ops/exposition.h: the registry's series, Prometheus's
// text format, escaping of label values another process wrote.
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ops/exposition.h"
#include "ops/metrics.h"
#include "tests/util/http_get.h"

namespace nanokv::ops {
namespace {

TEST(ExpositionTest, NamesFollowPrometheusRules) {
  EXPECT_TRUE(ValidMetricName("nanokv_device_free_pages"));
  EXPECT_TRUE(ValidMetricName("job:rate5m"));
  EXPECT_FALSE(ValidMetricName(""));
  EXPECT_FALSE(ValidMetricName("9lives"));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_TRUE(ValidLabelName("device"));
  EXPECT_FALSE(ValidLabelName("__name__"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  EXPECT_FALSE(ValidLabelName("1x"));
}

TEST(ExpositionTest, ValuesAreExactForCountsAndShortestOtherwise) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(1ull << 40), "1099511627776");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(2.5e-6), "2.5e-06");
  EXPECT_EQ(FormatValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(FormatValue(-HUGE_VAL), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(ExpositionTest, LabelValuesAndHelpAreEscaped) {
  TextWriter out;
  out.Family("nanokv_tenant_used_bytes", "Bytes a tenant holds\\now.\nSecond line", MetricType::kGauge);
  out.Sample("nanokv_tenant_used_bytes", {{"tenant", "a\"b\\c\nd"}, {"group", ""}}, uint64_t{7});
  EXPECT_EQ(out.text(),
            "# HELP nanokv_tenant_used_bytes Bytes a tenant holds\\\\now.\\nSecond line\n"
            "# TYPE nanokv_tenant_used_bytes gauge\n"
            "nanokv_tenant_used_bytes{tenant=\"a\\\"b\\\\c\\nd\",group=\"\"} 7\n");
  // The test's reader undoes it: the value comes back as written.
  auto samples = testing::ParseExposition(out.text());
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 1u);
  EXPECT_EQ((*samples)[0].labels.at("tenant"), "a\"b\\c\nd");
}

TEST(HistogramTest, BucketsAreInclusiveUpperBoundsAndCumulative) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 4.0, 9.0}) h.Observe(v);
  std::vector<uint64_t> cumulative;
  double sum = 0;
  h.Read(&cumulative, &sum);
  EXPECT_EQ(cumulative, (std::vector<uint64_t>{2, 4, 5, 6}));
  EXPECT_DOUBLE_EQ(sum, 18.0);

  TextWriter out;
  out.Family("x_seconds", "x", MetricType::kHistogram);
  out.Histogram("x_seconds", {{"request", "grant"}}, h.bounds(), cumulative, sum);
  EXPECT_EQ(out.text(),
            "# HELP x_seconds x\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{request=\"grant\",le=\"1\"} 2\n"
            "x_seconds_bucket{request=\"grant\",le=\"2\"} 4\n"
            "x_seconds_bucket{request=\"grant\",le=\"5\"} 5\n"
            "x_seconds_bucket{request=\"grant\",le=\"+Inf\"} 6\n"
            "x_seconds_sum{request=\"grant\"} 18\n"
            "x_seconds_count{request=\"grant\"} 6\n");
}

// Writers on several threads, a reader beside them: no observation is lost,
// and a read never sees a cumulative count go down (TSan runs this).
TEST(HistogramTest, ConcurrentObserversLoseNothing) {
  Histogram h(LatencyBuckets());
  constexpr int kThreads = 4, kEach = 50'000;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::vector<uint64_t> cumulative;
    double sum = 0;
    while (!done.load()) {
      h.Read(&cumulative, &sum);
      for (size_t i = 1; i < cumulative.size(); ++i) ASSERT_LE(cumulative[i - 1], cumulative[i]);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&h, t] {
      for (int i = 0; i < kEach; ++i) h.Observe(1e-6 * ((i + t) % 2000));
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  std::vector<uint64_t> cumulative;
  double sum = 0;
  h.Read(&cumulative, &sum);
  EXPECT_EQ(cumulative.back(), uint64_t{kThreads} * kEach);
}

TEST(RegistryTest, RendersFixedFamiliesThenCollectors) {
  Registry registry;
  Counter& grants = registry.AddCounter("t_grants_total", "Grants.", {{"device", "0"}});
  Counter& grants1 = registry.AddCounter("t_grants_total", "Grants.", {{"device", "1"}});
  Gauge& up = registry.AddGauge("t_up", "Up.");
  EXPECT_EQ(&registry.AddCounter("t_grants_total", "Grants.", {{"device", "0"}}), &grants);
  grants.Add(3);
  grants1.Add();
  up.Set(1);
  registry.AddCollector([](TextWriter& out) {
    out.Family("t_tenants", "Tenants.", MetricType::kGauge);
    out.Sample("t_tenants", {}, uint64_t{2});
  });
  EXPECT_EQ(registry.Render(),
            "# HELP t_grants_total Grants.\n# TYPE t_grants_total counter\n"
            "t_grants_total{device=\"0\"} 3\nt_grants_total{device=\"1\"} 1\n"
            "# HELP t_up Up.\n# TYPE t_up gauge\nt_up 1\n"
            "# HELP t_tenants Tenants.\n# TYPE t_tenants gauge\nt_tenants 2\n");
}

}  // namespace
}  // namespace nanokv::ops
