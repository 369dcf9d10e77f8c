// kvd with /metrics on (--metrics-port 0: a free port, which kvd logs), for
// the operations tests (kvd_ops_test.cc) and the real-Prometheus test
// (kvd_prometheus_test.cc): where kvd serves, a scrape, and the segment's
// figures as the series that must say the same.
#ifndef NANOKV_TESTS_INTEGRATION_METRICS_FIXTURE_H_
#define NANOKV_TESTS_INTEGRATION_METRICS_FIXTURE_H_

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/kvctl_fixture.h"
#include "tests/util/http_get.h"

namespace nanokv::testing {

class MetricsFixture : public KvctlTest {
 protected:
  void StartKvdWithMetrics(size_t pages = 32, std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--metrics-port", "0"});
    StartKvd(pages, extra);
    const std::string marker = "kvd: metrics at http://127.0.0.1:";
    ASSERT_TRUE(WaitFor([&] { return kvd_.Log().find(marker) != std::string::npos; }, 20s)) << kvd_.Log();
    const std::string log = kvd_.Log();
    metrics_port_ = static_cast<uint16_t>(std::stoul(log.substr(log.find(marker) + marker.size())));
  }

  Result<std::string> Scrape() {
    auto reply = HttpGet("127.0.0.1", metrics_port_, "/metrics");
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) return Status::Internal("GET /metrics: HTTP " + std::to_string(reply->status));
    return reply->body;
  }

  // A series' sample without labels, or -1 (not there, or no scrape).
  double Metric(const std::string& name) {
    auto body = Scrape();
    auto samples = body.ok() ? ParseExposition(*body) : Result<std::vector<MetricSample>>(body.status());
    return samples.ok() ? FindSample(*samples, name).value_or(-1) : -1;
  }

  // The series once kvd has published `value` (it does at least once a
  // second), else what it says after 3 s.
  double WaitMetric(const std::string& name, double value) {
    double now = -1;
    WaitFor([&] { return (now = Metric(name)) == value; }, std::chrono::seconds(3));
    return now;
  }

  // Requests kvd has served (its latency histograms' counts): of one kind,
  // or of every kind when `kind` is empty. -1 when the scrape fails.
  double RequestsServed(const std::string& kind = "") {
    auto body = Scrape();
    EXPECT_TRUE(body.ok()) << body.status().ToString();
    auto samples = body.ok() ? ParseExposition(*body) : Result<std::vector<MetricSample>>(body.status());
    if (!samples.ok()) return -1;
    double sum = 0;
    for (const MetricSample& s : *samples) {
      if (s.name != "nanokv_request_duration_seconds_count") continue;
      if (kind.empty() || (s.labels.count("request") != 0 && s.labels.at("request") == kind)) sum += s.value;
    }
    return sum;
  }

  // The series a scrape must show for what the segment says now, keyed
  // `name{label=value,...}` (labels sorted), from the segment alone.
  static std::map<std::string, double> SegmentSeries(const ipc::Snapshot& snap) {
    std::map<std::string, double> want;
    const ipc::Segment& s = snap.segment;
    for (uint32_t d = 0; d < s.header.device_count; ++d) {
      const std::string dev = "{device=" + std::to_string(s.devices[d].device) + "}";
      want["nanokv_device_capacity_pages" + dev] = static_cast<double>(s.devices[d].capacity_pages);
      want["nanokv_device_created_pages" + dev] = static_cast<double>(s.devices[d].created_pages);
      want["nanokv_device_free_pages" + dev] = static_cast<double>(s.devices[d].free_pages);
      want["nanokv_device_granted_pages" + dev] = static_cast<double>(s.devices[d].granted_pages);
    }
    want["nanokv_tenants"] = s.header.tenant_count;
    for (uint32_t t = 0; t < s.header.tenant_count; ++t) {
      const ipc::TenantRow& row = s.tenants[t];
      const std::string who = "{group=" + std::string(ipc::ReadString(row.group)) +
                              ",tenant=" + std::string(ipc::ReadString(row.name)) + "}";
      want["nanokv_tenant_used_bytes" + who] = static_cast<double>(row.used_bytes);
      want["nanokv_tenant_limit_bytes" + who] = static_cast<double>(row.limit_bytes);
    }
    return want;
  }

  // The same series from a scrape, keyed alike; only names SegmentSeries knows.
  static std::map<std::string, double> ScrapedSeries(const std::vector<MetricSample>& samples) {
    static const std::vector<std::string> names = {
        "nanokv_device_capacity_pages", "nanokv_device_created_pages", "nanokv_device_free_pages",
        "nanokv_device_granted_pages",  "nanokv_tenants",              "nanokv_tenant_used_bytes",
        "nanokv_tenant_limit_bytes"};
    std::map<std::string, double> got;
    for (const MetricSample& s : samples) {
      if (std::find(names.begin(), names.end(), s.name) == names.end()) continue;
      std::string key = s.name;
      if (!s.labels.empty()) {
        key += "{";
        for (const auto& [name, value] : s.labels) key += (key.back() == '{' ? "" : ",") + name + "=" + value;
        key += "}";
      }
      got[key] = s.value;
    }
    return got;
  }

  uint16_t metrics_port_ = 0;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_METRICS_FIXTURE_H_
