// kvd's keys for logs and /metrics (daemon/config/observability_keys.h):
// their defaults, their rules, and errors that name file:line: key or the flag.
#include <gtest/gtest.h>

#include "daemon/config/config.h"
#include "daemon/config/observability_keys.h"

namespace nanokv::kvd {
namespace {

TEST(ObservabilityKeysTest, DefaultsAreStderrTextAndNoMetrics) {
  auto config = LoadConfigText("ipc_name: x\n", "kvd.yaml", "/etc/nanokv");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->log_file, "");
  EXPECT_EQ(config->log_format, "text");
  EXPECT_FALSE(config->metrics_port.has_value());
  EXPECT_EQ(config->metrics_address, "127.0.0.1");
  EXPECT_EQ(LogOptionsOf(*config).format, ops::LogFormat::kText);
}

TEST(ObservabilityKeysTest, KeysAreRead) {
  auto config = LoadConfigText("log_file: logs/kvd.log\nlog_format: json\nmetrics_port: 9464\n"
                               "metrics_address: \"::1\"\nlog_level: debug\n",
                               "kvd.yaml", "/etc/nanokv");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->log_file, "/etc/nanokv/logs/kvd.log");  // relative to the config's folder
  EXPECT_EQ(config->metrics_port, 9464);
  ops::LogOptions log = LogOptionsOf(*config);
  EXPECT_EQ(log.format, ops::LogFormat::kJson);
  EXPECT_EQ(log.level, "debug");
  EXPECT_EQ(log.file, "/etc/nanokv/logs/kvd.log");
  ops::MetricsServerOptions metrics = MetricsOptionsOf(*config);
  EXPECT_EQ(metrics.address, "::1");
  EXPECT_EQ(metrics.port, 9464);
}

TEST(ObservabilityKeysTest, BadValuesNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : {Case{"\nlog_format: xml\n", "kvd.yaml:2: log_format: 'xml' is not one of text, json"},
                        Case{"metrics_port: 70000\n", "kvd.yaml:1: metrics_port:"},
                        Case{"metrics_port: -1\n", "kvd.yaml:1: metrics_port:"},
                        Case{"metrics_address: localhost\n",
                             "kvd.yaml:1: metrics_address: 'localhost' is not an IPv4 or IPv6 address"}}) {
    auto config = LoadConfigText(c.text, "kvd.yaml");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_NE(config.status().ToString().find(c.error), std::string::npos) << config.status().ToString();
  }
}

TEST(ObservabilityKeysTest, FlagsGoThroughTheSameRules) {
  KvdConfig config;
  Status bad = ApplyOverride("metrics_address", YamlField::Flag(YAML::Node("10.0.0.300"), "--metrics-address"),
                             &config);
  EXPECT_NE(bad.ToString().find("--metrics-address: '10.0.0.300' is not an IPv4"), std::string::npos)
      << bad.ToString();
  ASSERT_TRUE(ApplyOverride("metrics_port", YamlField::Flag(YAML::Node("0"), "--metrics-port"), &config).ok());
  EXPECT_EQ(config.metrics_port, 0);  // on, at a free port
  ASSERT_TRUE(ApplyOverride("metrics_port", YamlField::Flag(YAML::Node(""), "--metrics-port"), &config).ok());
  EXPECT_FALSE(config.metrics_port.has_value());  // "" turns it off again
}

}  // namespace
}  // namespace nanokv::kvd
