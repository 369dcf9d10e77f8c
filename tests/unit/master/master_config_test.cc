// The master's config and kvd's `master:` block: every key read, every error
// "<file>:<line>: <key>: <what>", flags through the keys' readers.
#include <gtest/gtest.h>

#include "daemon/config/config.h"
#include "master/config/master_config.h"
#include "tests/util/status_matchers.h"

namespace nanokv {
namespace {

std::string Error(const Result<master::MasterConfig>& r) { return r.ok() ? "" : r.status().ToString(); }
std::string Error(const Result<kvd::KvdConfig>& r) { return r.ok() ? "" : r.status().ToString(); }

TEST(MasterConfig, ReadsEveryKey) {
  auto c = master::LoadMasterConfigText(
      "id: m-1\nlisten: 0.0.0.0:9000\nadvertise: 10.0.0.1:9000\ntoken_file: /etc/t\n"
      "tls:\n  cert: c.pem\n  key: k.pem\n  ca: ca.pem\nlease_ttl: 2s\nheartbeat_interval: 500ms\n"
      "instruction_timeout: 1s\nrebuild_window: 0\nexpected_nodes: 3\nterm: 7\nlog_level: debug\n",
      "m.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->id, "m-1");
  EXPECT_EQ(c->listen, "0.0.0.0:9000");
  EXPECT_EQ(c->advertise, "10.0.0.1:9000");
  EXPECT_EQ(c->token_file, "/etc/t");
  EXPECT_EQ(c->tls.ca, "ca.pem");
  EXPECT_EQ(c->lease_ttl.count(), 2000);
  EXPECT_EQ(c->heartbeat_interval.count(), 500);
  EXPECT_EQ(c->instruction_timeout.count(), 1000);
  EXPECT_EQ(c->rebuild_window.count(), 0);
  EXPECT_EQ(c->expected_nodes, 3u);
  EXPECT_EQ(c->term, 7u);
  EXPECT_EQ(c->log_level, "debug");
  EXPECT_TRUE(master::LoadMasterConfigText("", "empty.yaml").ok());
}

TEST(MasterConfig, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(Error(master::LoadMasterConfigText("id: m\nbogus: 1\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: bogus: unknown key");
  EXPECT_EQ(Error(master::LoadMasterConfigText("\nlisten: nowhere\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: listen: 'nowhere' is not host:port");
  EXPECT_EQ(Error(master::LoadMasterConfigText("lease_ttl: 5\n", "m.yaml")),
            "InvalidArgument: m.yaml:1: lease_ttl: '5' is not a duration like 500ms, 2s or 1m");
  EXPECT_EQ(Error(master::LoadMasterConfigText("term: 0\n", "m.yaml")),
            "InvalidArgument: m.yaml:1: term: '0' is outside [1, 9223372036854775807]");
  EXPECT_EQ(Error(master::LoadMasterConfigText("id: 'a b'\n", "m.yaml")),
            "InvalidArgument: m.yaml:1: id: 'a b' is not 1-63 of [A-Za-z0-9_.-]");
  EXPECT_EQ(Error(master::LoadMasterConfigText("tls:\n  cert: c.pem\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: tls: a master serving TLS needs both cert and key");
  EXPECT_EQ(Error(master::LoadMasterConfigText("tls:\n  cart: c.pem\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: tls.cart: unknown key (cert, key, ca)");
  EXPECT_EQ(Error(master::LoadMasterConfigText("log_level: loud\n", "m.yaml")),
            "InvalidArgument: m.yaml:1: log_level: 'loud' is not one of trace, debug, info, warn, error, "
            "critical, off");
  EXPECT_NE(Error(master::LoadMasterConfigText("lease_ttl: 1s\nheartbeat_interval: 600ms\n", "m.yaml"))
                .find("heartbeat_interval 600ms is over half of lease_ttl"),
            std::string::npos);
  EXPECT_NE(Error(master::LoadMasterConfigText("id: [\n", "m.yaml")).find("m.yaml:"), std::string::npos);
}

// kvd's keys for logs and /metrics, read by the same readers (ops/observability_keys.h).
TEST(MasterConfig, ReadsTheLogAndMetricsKeysAsKvdDoes) {
  auto c = master::LoadMasterConfigText(
      "log_file: logs/master.log\nlog_format: json\nmetrics_port: 9470\nmetrics_address: 0.0.0.0\n",
      "/etc/nanokv/master.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->log_file, "/etc/nanokv/logs/master.log");  // relative to the config's folder
  EXPECT_EQ(c->log_format, "json");
  EXPECT_EQ(c->metrics_port, 9470);
  EXPECT_EQ(c->metrics_address, "0.0.0.0");
  auto off = master::LoadMasterConfigText("id: m\n", "m.yaml");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->metrics_port.has_value());  // off unless configured
  EXPECT_EQ(Error(master::LoadMasterConfigText("id: m\nmetrics_port: 70000\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: metrics_port: '70000' is outside [0, 65535]");
  EXPECT_NE(Error(master::LoadMasterConfigText("log_format: xml\n", "m.yaml")).find("m.yaml:1: log_format:"),
            std::string::npos);
  EXPECT_NE(Error(master::LoadMasterConfigText("metrics_address: localhost\n", "m.yaml"))
                .find("m.yaml:1: metrics_address: 'localhost' is not an IPv4 or IPv6 address"),
            std::string::npos);
  master::MasterConfig flags;
  ASSERT_OK(master::ApplyMasterOverride("metrics_port", YamlField::Flag(YAML::Node("0"), "--metrics-port"), &flags));
  EXPECT_EQ(flags.metrics_port, 0);
}

TEST(MasterConfig, FlagsGoThroughTheKeysReaders) {
  master::MasterConfig c;
  ASSERT_OK(master::ApplyMasterOverride("listen", YamlField::Flag(YAML::Node("127.0.0.1:0"), "--listen"), &c));
  EXPECT_EQ(c.listen, "127.0.0.1:0");
  Status bad = master::ApplyMasterOverride("term", YamlField::Flag(YAML::Node("x"), "--term"), &c);
  EXPECT_EQ(bad.ToString(), "InvalidArgument: --term: 'x' is not an integer");
}

TEST(MasterConfig, ReadsTheEtcdBlockAndNamesItsErrors) {
  auto c = master::LoadMasterConfigText(
      "etcd:\n  endpoints: [\"127.0.0.1:2379\", \"https://e2:2379\"]\n  prefix: /nanokv/prod\n  lease_ttl: 2s\n"
      "  tls:\n    ca: ca.pem\n    cert: c.pem\n    key: k.pem\n",
      "m.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->etcd.enabled());
  EXPECT_EQ(c->etcd.endpoints, (std::vector<std::string>{"127.0.0.1:2379", "https://e2:2379"}));
  EXPECT_EQ(c->etcd.election_key(), "/nanokv/prod/leader");
  EXPECT_EQ(c->etcd.nodes_prefix(), "/nanokv/prod/nodes/");
  EXPECT_EQ(c->etcd.lease_ttl.count(), 2000);
  EXPECT_EQ(c->etcd.tls.key, "k.pem");
  auto one = master::LoadMasterConfigText("etcd:\n  endpoints: e1:2379\n", "m.yaml");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->etcd.prefix, "/nanokv/default");
  EXPECT_FALSE(master::LoadMasterConfigText("", "m.yaml")->etcd.enabled());

  EXPECT_EQ(Error(master::LoadMasterConfigText("etcd:\n  prefix: /a\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: etcd: endpoints: name at least one etcd member (host:port)");
  EXPECT_EQ(Error(master::LoadMasterConfigText("etcd:\n  endpoints: [\"e1\"]\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: etcd.endpoints[0]: 'e1' is not host:port (http:// or https:// may lead)");
  EXPECT_EQ(Error(master::LoadMasterConfigText("etcd:\n  endpoints: e:1\n  prefix: nanokv/\n", "m.yaml")),
            "InvalidArgument: m.yaml:3: etcd.prefix: 'nanokv/' is not a key prefix: '/' then 1-255 printable "
            "bytes, not ending in '/'");
  EXPECT_EQ(Error(master::LoadMasterConfigText("etcd:\n  endpoints: e:1\n  lease_ttl: 500ms\n", "m.yaml")),
            "InvalidArgument: m.yaml:3: etcd.lease_ttl: '500ms' is outside [1s, 10m]");
  EXPECT_EQ(Error(master::LoadMasterConfigText("etcd:\n  endpoints: e:1\n  tls:\n    cert: c\n", "m.yaml")),
            "InvalidArgument: m.yaml:4: etcd.tls: cert and key go together");
  EXPECT_EQ(Error(master::LoadMasterConfigText("etcd:\n  endpoint: e:1\n", "m.yaml")),
            "InvalidArgument: m.yaml:2: etcd.endpoint: unknown key (endpoints, prefix, lease_ttl, tls)");
}

TEST(MasterConfig, TheShippedFileLoads) {
  auto c = master::LoadMasterConfigFile(NANOKV_SOURCE_DIR "/configs/master.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->etcd.enabled());
  EXPECT_EQ(c->max_objects_per_node, master::MasterConfig{}.max_objects_per_node);
}

TEST(MasterConfig, MaxObjectsPerNode) {
  EXPECT_EQ(master::MasterConfig{}.max_objects_per_node, 4194304u);
  auto c = master::LoadMasterConfigText("max_objects_per_node: 1000\n", "m.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->max_objects_per_node, 1000u);
  EXPECT_EQ(Error(master::LoadMasterConfigText("max_objects_per_node: 0\n", "m.yaml")),
            "InvalidArgument: m.yaml:1: max_objects_per_node: '0' is outside [1, 4294967296]");
}

TEST(KvdMasterBlock, ReadsItsKeysAndNamesItsErrors) {
  auto c = kvd::LoadConfigText(
      "object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"10.0.0.1:7470\", \"m2:7470\"]\n  node_id: gpu-7\n"
      "  data_address: 10.0.0.7:7480\n  token_file: /t\n  tls:\n    ca: ca.pem\n  retry_interval: 200ms\n",
      "kvd.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->master.addresses.size(), 2u);
  EXPECT_EQ(c->master.node_id, "gpu-7");
  EXPECT_EQ(c->master.data_address, "10.0.0.7:7480");
  EXPECT_EQ(c->master.tls.ca, "ca.pem");
  EXPECT_EQ(c->master.retry_interval.count(), 200);
  EXPECT_EQ(Error(kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"x\"]\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:4: master.addresses[0]: 'x' is not host:port");
  EXPECT_EQ(Error(kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  node_id: a\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:4: master: addresses: name at least one master (host:port)");
  EXPECT_EQ(Error(kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  adresses: [\"m:1\"]\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:4: master.adresses: unknown key (addresses, node_id, host_id, data_address, "
            "transfer, token_file, tls, retry_interval)");
  // What identifies the host (the same-host path's): printable and short.
  {
    auto named = kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n"
                                     "  host_id: rack4-gpu7\n", "kvd.yaml");
    ASSERT_TRUE(named.ok()) << named.status().ToString();
    EXPECT_EQ(named->master.host_id, "rack4-gpu7");
  }
  EXPECT_EQ(Error(kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n"
                                      "  host_id: \"a b\"\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:5: master.host_id: 'a b' is not 0-64 of [A-Za-z0-9_.:-]");
  // The transfer agent listens on data_address: host:port, port 0 allowed.
  EXPECT_EQ(Error(kvd::LoadConfigText(
                "object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n  data_address: ucx://n0\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:5: master.data_address: 'ucx://n0' is not host:port (the transfer agent "
            "listens there; port 0: any)");
  EXPECT_EQ(Error(kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n"
                                      "  transfer:\n    depth: 0\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:6: master.transfer.depth: not a count in [1, 64]");
  EXPECT_EQ(Error(kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n"
                                      "  transfer:\n    chunk: 1KiB\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:6: master.transfer.chunk: not in [4KiB, 1GiB]");
  {
    auto parsed = kvd::LoadConfigText("object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n"
                                      "  data_address: 127.0.0.1:0\n  transfer:\n    chunk: 1MiB\n    depth: 8\n"
                                      "    staging_buffers: 16\n    timeout: 2s\n", "kvd.yaml");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(parsed->master.data_address, "127.0.0.1:0");
    EXPECT_EQ(parsed->master.transfer.chunk_bytes, 1u << 20);
    EXPECT_EQ(parsed->master.transfer.depth, 8u);
    EXPECT_EQ(parsed->master.transfer.staging_buffers, 16u);
    EXPECT_EQ(parsed->master.transfer.timeout, std::chrono::seconds(2));
  }
  EXPECT_EQ(Error(kvd::LoadConfigText("master:\n  addresses: [\"m:1\"]\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:1: master: a node joins the cluster with its object store: set object_store.size");
  EXPECT_EQ(Error(kvd::LoadConfigText(
                "object_store:\n  size: 8MiB\nmaster:\n  addresses: [\"m:1\"]\n  tls:\n    cert: c.pem\n", "kvd.yaml")),
            "InvalidArgument: kvd.yaml:6: master.tls: a node speaking TLS needs ca (the master's certificate chain)");
}

}  // namespace
}  // namespace nanokv
