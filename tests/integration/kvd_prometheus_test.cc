// kvd's /metrics scraped by a real Prometheus (Debian's prometheus package):
// started with a scrape config on loopback ports, its HTTP API asked for
// nanokv's series until they say what kvd's segment says. Skips, saying
// so, where prometheus is not installed.
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>

#include <cctype>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/integration/metrics_fixture.h"

namespace nanokv::testing {
namespace {

// A loopback port free now (bound, then let go): Prometheus takes no port 0.
uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class KvdPrometheusTest : public MetricsFixture {
 protected:
  // Starts Prometheus scraping kvd every second; its API port in api_port_.
  void StartPrometheus() {
    Ran which = Shell("command -v prometheus");
    if (which.code != 0) GTEST_SKIP() << "prometheus is not installed (Debian's prometheus package)";
    const std::string binary = which.out.substr(0, which.out.find('\n'));
    const std::string config = dir_.path() + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                             "scrape_configs:\n  - job_name: nanokv\n    static_configs:\n"
                             "      - targets: ['127.0.0.1:" << metrics_port_ << "']\n";
    // The port may be taken between FreePort and Prometheus's bind: try again.
    for (int attempt = 0; attempt < 5; ++attempt) {
      api_port_ = FreePort();
      prometheus_ = Process::Start({binary, "--config.file=" + config,
                                    "--storage.tsdb.path=" + dir_.path() + "/tsdb",
                                    "--web.listen-address=127.0.0.1:" + std::to_string(api_port_),
                                    "--log.level=warn"},
                                   {}, dir_.path() + "/prometheus.log");
      bool up = WaitFor([&] {
        auto ready = HttpGet("127.0.0.1", api_port_, "/-/ready", 2s);
        return (ready.ok() && ready->status == 200) || !prometheus_.Running();
      }, 60s);
      if (up && prometheus_.Running()) return;
      prometheus_.Signal(SIGKILL);
      prometheus_.Wait(10s);
    }
    FAIL() << "prometheus did not start:\n" << prometheus_.Log();
  }

  void TearDown() override {
    if (prometheus_.started() && prometheus_.Running()) {
      prometheus_.Signal(SIGTERM);
      prometheus_.Wait(30s);
    }
    if (HasFailure()) std::printf("--- prometheus log ---\n%s\n", prometheus_.Log().c_str());
    MetricsFixture::TearDown();
  }

  // Every series of metric `name` Prometheus has now, keyed like
  // MetricsFixture::SegmentSeries (labels sorted, job and instance left out).
  std::map<std::string, double> Query(const std::string& name) {
    std::map<std::string, double> out;
    auto reply = HttpGet("127.0.0.1", api_port_, "/api/v1/query?query=" + name, 5s);
    if (!reply.ok() || reply->status != 200) return out;
    nlohmann::json doc = nlohmann::json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || doc["status"] != "success") return out;
    for (const auto& series : doc["data"]["result"]) {
      std::map<std::string, std::string> labels;
      for (const auto& [key, value] : series["metric"].items()) {
        if (key != "__name__" && key != "job" && key != "instance") labels[key] = value.get<std::string>();
      }
      std::string key = name;
      if (!labels.empty()) {
        key += "{";
        for (const auto& [k, v] : labels) key += (key.back() == '{' ? "" : ",") + k + "=" + v;
        key += "}";
      }
      out[key] = std::stod(series["value"][1].get<std::string>());
    }
    return out;
  }

  Process prometheus_;
  uint16_t api_port_ = 0;
};

TEST_F(KvdPrometheusTest, PrometheusScrapesWhatTheSegmentSays) {
  StartKvdWithMetrics(32);
  auto a = AttachClient("prefill", "g1");
  auto b = AttachClient("decode", "g2", 8 * kPage);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Grant(0, 5).ok());
  ASSERT_TRUE(b->Grant(0, 3).ok());
  StartPrometheus();
  if (IsSkipped() || HasFatalFailure()) return;

  // Prometheus scrapes every second; once a scrape after the grants is in,
  // its figures are the segment's (nothing changes meanwhile).
  std::map<std::string, double> want, got;
  bool agreed = WaitFor([&] {
    want = SegmentSeries(Read());
    got.clear();
    for (const char* name : {"nanokv_device_capacity_pages", "nanokv_device_created_pages",
                             "nanokv_device_free_pages", "nanokv_device_granted_pages", "nanokv_tenants",
                             "nanokv_tenant_used_bytes", "nanokv_tenant_limit_bytes"}) {
      got.merge(Query(name));
    }
    return got == want;
  }, 60s);
  std::string diff;
  for (const auto& [key, value] : want) {
    auto it = got.find(key);
    if (it == got.end() || it->second != value) {
      diff += key + ": segment " + std::to_string(value) + ", prometheus " +
              (it == got.end() ? std::string("none") : std::to_string(it->second)) + "\n";
    }
  }
  ASSERT_TRUE(agreed) << diff;
  EXPECT_EQ(want.at("nanokv_device_granted_pages{device=0}"), 8);
  EXPECT_EQ(want.at("nanokv_tenant_used_bytes{group=g1,tenant=prefill}"), 5.0 * kPage);
  // The target is healthy, and a counter and a histogram made it too.
  EXPECT_EQ(Query("up").at("up"), 1);
  EXPECT_TRUE(WaitFor([&] {
    auto pages = Query("nanokv_granted_pages_total");
    auto grants = Query("nanokv_request_duration_seconds_count");
    return pages["nanokv_granted_pages_total{device=0,request=grant}"] == 8 &&
           grants["nanokv_request_duration_seconds_count{request=grant}"] == 2;
  }, 30s));
}

// The Grafana dashboard (packaging/grafana) asks only for series kvd
// serves, in PromQL that Prometheus accepts.
TEST_F(KvdPrometheusTest, TheDashboardsQueriesAreValidAndNameKvdsSeries) {
  const std::string config = dir_.path() + "/kvd.yaml";
  std::ofstream(config) << "object_store:\n  size: 4MiB\n  host_tier: 4MiB\n";  // its series too, the tiers' too
  StartKvdWithMetrics(8, {"--config", config});
  StartPrometheus();
  if (IsSkipped() || HasFatalFailure()) return;
  auto scraped = Scrape();
  ASSERT_TRUE(scraped.ok());
  std::set<std::string> families;  // "# TYPE <name> <type>"
  std::istringstream lines(*scraped);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# TYPE ")) families.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  std::ifstream file(std::string(NANOKV_SOURCE_DIR) + "/packaging/grafana/nanokv-dashboard.json");
  nlohmann::json dashboard = nlohmann::json::parse(file);
  int queries = 0;
  for (const auto& panel : dashboard["panels"]) {
    if (!panel.contains("targets")) continue;
    for (const auto& target : panel["targets"]) {
      std::string expr = target["expr"];
      ++queries;
      for (size_t at = expr.find("nanokv_"); at != std::string::npos; at = expr.find("nanokv_", at + 1)) {
        size_t end = expr.find_first_not_of("abcdefghijklmnopqrstuvwxyz_", at);
        std::string name = expr.substr(at, end - at);
        for (const char* suffix : {"_bucket", "_count", "_sum"}) {
          if (!families.count(name) && name.ends_with(suffix)) name.resize(name.size() - std::strlen(suffix));
        }
        EXPECT_TRUE(families.count(name)) << panel["title"] << ": kvd serves no " << name;
      }
      for (auto [from, to] : {std::pair<std::string, std::string>{"$instance", ".*"}, {"$__rate_interval", "1m"}}) {
        for (size_t at; (at = expr.find(from)) != std::string::npos;) expr.replace(at, from.size(), to);
      }
      std::string encoded;
      for (unsigned char c : expr) {
        if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
          encoded += static_cast<char>(c);
        } else {
          char hex[4];
          std::snprintf(hex, sizeof(hex), "%%%02X", c);
          encoded += hex;
        }
      }
      auto reply = HttpGet("127.0.0.1", api_port_, "/api/v1/query?query=" + encoded, 5s);
      ASSERT_TRUE(reply.ok()) << reply.status().ToString();
      EXPECT_EQ(reply->status, 200) << panel["title"] << ": " << expr << "\n" << reply->body;
    }
  }
  EXPECT_GE(queries, 20);
}

}  // namespace
}  // namespace nanokv::testing
