#include "daemon/config/config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include "daemon/config/kvd_flags.h"

namespace nanokv::kvd {
namespace {

TEST(Config, AnEmptyMappingGivesDefaults) {
  auto config = LoadConfigText("{}", "empty.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ipc_name, "nanokv");
  EXPECT_EQ(config->page_bytes, 2u << 20);
  EXPECT_DOUBLE_EQ(config->capacity.fraction, 0.95);
  EXPECT_EQ(config->socket_mode, 0660u);
}

TEST(Config, ReadsEveryKey) {
  auto config = LoadConfigText(R"(
ipc_name: node-a
backend: host
devices: [0, 1]
page_size: 4MiB
capacity: 40%
reserve_pages: 3
default_limit: 1GiB
allowed_uids: [0, 1000]
allowed_gids: [0]
socket_mode: "0600"
segment_mode: "0640"
group: 0
log_level: debug
run_dir: /tmp/somewhere
host_devices: 2
host_device_memory: 512MiB
max_connections: 300
max_connections_per_process: 4
busy_poll_us: 40
)", "full.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ipc_name, "node-a");
  EXPECT_EQ(config->backend, "host");
  EXPECT_EQ(config->devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(config->page_bytes, 4u << 20);
  EXPECT_DOUBLE_EQ(config->capacity.fraction, 0.4);
  EXPECT_EQ(config->reserve_pages, 3u);
  EXPECT_EQ(config->default_limit.bytes, 1u << 30);
  EXPECT_EQ(config->allowed_uids, (std::vector<uid_t>{0, 1000}));
  EXPECT_EQ(config->socket_mode, 0600u);
  EXPECT_EQ(config->segment_mode, 0640u);
  EXPECT_EQ(config->group, gid_t{0});
  EXPECT_EQ(config->host_devices, 2);
  EXPECT_EQ(config->host_device_bytes, 512u << 20);
  EXPECT_EQ(config->max_connections, 300u);
  EXPECT_EQ(config->max_connections_per_process, 4u);
  EXPECT_EQ(config->busy_poll_us, 40u);
}

TEST(Config, BareFractionIsKvcachedsGpuUtilization) {
  auto config = LoadConfigText("capacity: 0.8\n", "f.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_DOUBLE_EQ(config->capacity.fraction, 0.8);
  config = LoadConfigText("capacity: 16GiB\n", "f.yaml");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->capacity.bytes, 16ull << 30);
}

// Each error names the file, the line and the key.
TEST(Config, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"ipc_name: a\nbogus: 1\n", "c.yaml:2: bogus: unknown key"},
      {"page_size: 3MiB\n", "c.yaml:1: page_size: '3MiB' is not a power of two"},
      {"\n\nreserve_pages: many\n", "c.yaml:3: reserve_pages: 'many' is not an integer"},
      {"devices: 0\n", "c.yaml:1: devices: expected a list"},
      {"devices: [0, 99]\n", "c.yaml:1: devices[1]: '99' is outside [0, 15]"},
      {"backend: tpu\n", "c.yaml:1: backend: 'tpu' is not one of"},
      {"socket_mode: rw\n", "c.yaml:1: socket_mode: 'rw' is not an octal"},
      {"capacity: 150%\n", "c.yaml:1: capacity:"},
      {"log_level: loud\n", "c.yaml:1: log_level:"},
      {"ipc_name: [a, b]\n", "c.yaml:1: ipc_name: expected a single value"},
      {"key: [unclosed\n", "c.yaml:"},
      {"- a\n- b\n", "c.yaml:1: (top level): expected a mapping"},
      {"instances: {a: 1}\n", "c.yaml:1: instances: expected a list of instances"},
      {"ipc_name: \"has space\"\n", "c.yaml:1: ipc_name: 'has space' is not"},
      // Issue 21: refused, not read as something else.
      {"", "c.yaml:1: the file is empty (write {} for every default)"},
      {"# only a comment\n", "c.yaml:1: the file is empty"},
      {"capacity: 1.5\n", "c.yaml:1: capacity: '1.5' is a fraction above 1"},
      {"default_limit: 2.5\n", "c.yaml:1: default_limit: '2.5' is a fraction above 1"},
      {"capacity: 1GiB\nreserve_pages: 2\ncapacity: 2GiB\n", "c.yaml:3: capacity: given twice (first at line 1)"},
      {"object_store:\n  size: 8MiB\n  size: 9MiB\n", "c.yaml:3: object_store.size: given twice (first at line 2)"},
      {"instances:\n  - name: a\n    command: /bin/true\n    name: b\n",
       "c.yaml:4: instances[0].name: given twice (first at line 2)"},
      {"max_connections_per_process: 0\n", "c.yaml:1: max_connections_per_process: '0' is outside"},
      {"max_connections: -1\n", "c.yaml:1: max_connections:"},
      {"busy_poll_us: 20000\n", "c.yaml:1: busy_poll_us: '20000' is outside"},
  };
  for (const auto& c : cases) {
    auto config = LoadConfigText(c.text, "c.yaml");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
    EXPECT_NE(config.status().message().find(c.expect), std::string_view::npos)
        << "for:\n" << c.text << "got: " << config.status().ToString();
  }
}

// fuzz_config_load: a node that holds itself (an alias of its own anchor)
// ran the duplicate-key walk out of stack.
TEST(Config, NestingDeeperThanAnyKeyIsRefused) {
  const std::string text = "a: &a [*a]\nunknown_key: 1\n";
  auto config = LoadConfigText(text, "c.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  EXPECT_NE(config.status().message().find("nested deeper than 32 levels"), std::string_view::npos)
      << config.status().ToString();
}

TEST(Config, MissingFileIsNotFound) {
  EXPECT_EQ(LoadConfigFile("/nonexistent/kvd.yaml").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace nanokv::kvd

namespace nanokv::kvd {
namespace {

// The documented example must load exactly as the defaults it documents.
TEST(Config, ShippedExampleLoadsAsTheDefaults) {
  auto config = LoadConfigFile(std::string(NANOKV_SOURCE_DIR) + "/configs/kvd.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  KvdConfig defaults;
  EXPECT_EQ(config->ipc_name, defaults.ipc_name);
  EXPECT_EQ(config->backend, defaults.backend);
  EXPECT_EQ(config->page_bytes, defaults.page_bytes);
  EXPECT_DOUBLE_EQ(config->capacity.fraction, defaults.capacity.fraction);
  EXPECT_EQ(config->reserve_pages, defaults.reserve_pages);
  EXPECT_EQ(config->socket_mode, defaults.socket_mode);
  EXPECT_FALSE(config->group.has_value());
}

}  // namespace
}  // namespace nanokv::kvd

namespace nanokv::kvd {
namespace {

using std::chrono::milliseconds;

TEST(ConfigInstances, ReadsEveryKey) {
  auto config = LoadConfigText(R"(
instances:
  - name: engine-a
    command: sh
    args: [-c, "exit 0", "16"]
    workdir: /tmp
    env: {FOO: bar, N: 3}
    limit: 2GiB
    group: team-a
    device: 0
    restart: always
    max_restarts: 2
    backoff: 250ms
    start_delay: 1.5s
    grace: 1m
    log: /tmp/a.log
  - name: engine-b
    command: /bin/sh
    limit: 0.5
)", "i.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->instances.size(), 2u);
  const InstanceConfig& a = config->instances[0];
  EXPECT_EQ(a.name, "engine-a");
  EXPECT_EQ(a.command.front(), '/') << a.command;  // found on PATH, made absolute
  EXPECT_EQ(a.command.substr(a.command.size() - 3), "/sh");
  EXPECT_EQ(a.args, (std::vector<std::string>{"-c", "exit 0", "16"}));
  EXPECT_EQ(a.workdir, "/tmp");
  ASSERT_EQ(a.env.size(), 2u);
  EXPECT_EQ(a.env[0], (std::pair<std::string, std::string>{"FOO", "bar"}));
  EXPECT_EQ(a.env[1], (std::pair<std::string, std::string>{"N", "3"}));
  ASSERT_TRUE(a.limit.has_value());
  EXPECT_EQ(LimitText(*a.limit), std::to_string(2ull << 30));
  EXPECT_EQ(a.group, "team-a");
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.restart, RestartPolicy::kAlways);
  EXPECT_EQ(a.max_restarts, 2u);
  EXPECT_EQ(a.backoff, milliseconds(250));
  EXPECT_EQ(a.start_delay, milliseconds(1500));
  EXPECT_EQ(a.grace, milliseconds(60000));
  EXPECT_EQ(a.log, "/tmp/a.log");
  EXPECT_EQ(a.where, "i.yaml:3");

  // The defaults.
  const InstanceConfig& b = config->instances[1];
  EXPECT_EQ(b.command, "/bin/sh");
  EXPECT_TRUE(b.args.empty());
  EXPECT_TRUE(b.workdir.empty());
  EXPECT_EQ(LimitText(*b.limit), "50%");
  EXPECT_TRUE(b.group.empty());
  EXPECT_FALSE(b.device.has_value());
  EXPECT_EQ(b.restart, RestartPolicy::kOnFailure);
  EXPECT_EQ(b.max_restarts, 5u);
  EXPECT_EQ(b.backoff, milliseconds(1000));
  EXPECT_EQ(b.start_delay, milliseconds(0));
  EXPECT_EQ(b.grace, milliseconds(10000));
  EXPECT_TRUE(b.log.empty());
}

TEST(ConfigInstances, RelativePathsResolveAgainstTheConfigsDirectory) {
  auto config = LoadConfigText(R"(
instances:
  - name: a
    command: bin/../bin/sh
    workdir: ./bin
    log: ../tmp/a.log
)", "/x/kvd.yaml", "/usr");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->instances[0].command, "/usr/bin/sh");
  EXPECT_EQ(config->instances[0].workdir, "/usr/bin");
  EXPECT_EQ(config->instances[0].log, "/tmp/a.log");
}

TEST(ConfigInstances, Durations) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {{"500ms", 500}, {"2s", 2000}, {"1.5s", 1500}, {"1m", 60000}, {"0", 0}, {"0s", 0}};
  for (const auto& c : cases) {
    auto config = LoadConfigText(std::string("instances:\n  - {name: a, command: /bin/sh, start_delay: ") +
                                     c.text + "}\n", "d.yaml");
    ASSERT_TRUE(config.ok()) << c.text << ": " << config.status().ToString();
    EXPECT_EQ(config->instances[0].start_delay, milliseconds(c.ms)) << c.text;
  }
}

// Every bad instance names the file, the line and the key, down to the field.
TEST(ConfigInstances, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      // unknown key
      {"instances:\n  - name: a\n    command: /bin/sh\n    bogus: 1\n",
       "c.yaml:4: instances[0].bogus: unknown key"},
      // wrong types
      {"instances:\n  - name: a\n    command: /bin/sh\n    args: --pages\n",
       "c.yaml:4: instances[0].args: expected a list like"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    args: [[1]]\n",
       "c.yaml:4: instances[0].args[0]: expected a single value"},
      {"instances:\n  - name: a\n    command: [/bin/sh]\n",
       "c.yaml:3: instances[0].command: expected a single value"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    max_restarts: many\n",
       "c.yaml:4: instances[0].max_restarts: 'many' is not an integer"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    env: [A]\n",
       "c.yaml:4: instances[0].env: expected a mapping of NAME: value"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    env: {A: [1]}\n",
       "c.yaml:4: instances[0].env.A: expected a single value"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    device: first\n",
       "c.yaml:4: instances[0].device: 'first' is not an integer"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    device: 16\n",
       "c.yaml:4: instances[0].device: '16' is outside [0, 15]"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    restart: sometimes\n",
       "c.yaml:4: instances[0].restart: 'sometimes' is not one of never, on-failure, always"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    backoff: 5\n",
       "c.yaml:4: instances[0].backoff: '5' is not a duration like 500ms, 2s or 1m"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    backoff: 1ms\n",
       "c.yaml:4: instances[0].backoff: '1ms' is outside [10ms, 10m]"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    grace: -1s\n",
       "c.yaml:4: instances[0].grace: '-1s' is not a duration"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    limit: 0\n",
       "c.yaml:4: instances[0].limit: must not be 0"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    limit: lots\n",
       "c.yaml:4: instances[0].limit:"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    group: \"a b\"\n",
       "c.yaml:4: instances[0].group: 'a b' is not 1-63"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    env: {NANOKV_LIMIT: 1G}\n",
       "c.yaml:4: instances[0].env.NANOKV_LIMIT: not allowed here: use the limit key"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    env: {1X: y}\n",
       "c.yaml:4: instances[0].env.1X: not a variable name"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    command: /bin/true\n",
       "c.yaml:4: instances[0].command: given twice"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    workdir: /nonexistent-dir\n",
       "c.yaml:4: instances[0].workdir: '/nonexistent-dir' is not a directory"},
      {"instances:\n  - name: a\n    command: /bin/sh\n    log: /nonexistent-dir/a.log\n",
       "c.yaml:4: instances[0].log: directory '/nonexistent-dir' does not exist"},
      // missing command, missing name, bad name
      {"instances:\n  - name: a\n    args: [x]\n",
       "c.yaml:2: instances[0].command: missing: instance 'a' has no command"},
      {"instances:\n  - command: /bin/sh\n", "c.yaml:2: instances[0].name: missing"},
      {"instances:\n  - name: \"a b\"\n    command: /bin/sh\n",
       "c.yaml:2: instances[0].name: 'a b' is not 1-48 of [A-Za-z0-9_.-]"},
      // duplicate names
      {"instances:\n  - name: a\n    command: /bin/sh\n  - name: b\n    command: /bin/sh\n"
       "  - name: a\n    command: /bin/sh\n",
       "c.yaml:6: instances[2].name: 'a' is already the name of instances[0] (c.yaml:2)"},
      // commands that cannot run
      {"instances:\n  - name: a\n    command: no-such-command-4711\n",
       "c.yaml:3: instances[0].command: 'no-such-command-4711' is not found on PATH"},
      {"instances:\n  - name: a\n    command: /etc/passwd\n",
       "c.yaml:3: instances[0].command: '/etc/passwd' is not executable"},
      {"instances:\n  - name: a\n    command: /tmp\n", "c.yaml:3: instances[0].command: '/tmp' is not a file"},
      {"instances:\n  - name: a\n    command: ./missing-engine\n",
       "c.yaml:3: instances[0].command: './missing-engine' does not exist (resolved to /usr/missing-engine)"},
      // the list itself
      {"instances:\n  - just-a-name\n", "c.yaml:2: instances[0]: expected a mapping"},
      {"instances: engine\n", "c.yaml:1: instances: expected a list of instances"},
  };
  for (const auto& c : cases) {
    auto config = LoadConfigText(c.text, "c.yaml", "/usr");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
    EXPECT_NE(config.status().message().find(c.expect), std::string_view::npos)
        << "for:\n" << c.text << "got: " << config.status().ToString();
  }
}

TEST(ConfigInstances, AtMostOneRowPerInstanceInTheSegment) {
  std::string text = "instances:\n";
  for (int i = 0; i < 65; ++i) text += "  - {name: e" + std::to_string(i) + ", command: /bin/sh}\n";
  auto config = LoadConfigText(text, "many.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("many.yaml:2: instances: 65 instances; at most 64"),
            std::string_view::npos) << config.status().ToString();
}

// configs/demo.yaml (what `make demo` runs) loads, with the engine found
// where this build put it.
TEST(ConfigInstances, ShippedDemoLoads) {
  std::ifstream in(std::string(NANOKV_SOURCE_DIR) + "/configs/demo.yaml");
  ASSERT_TRUE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const std::string shipped = "../build/examples/nanokv_example_engine";
  size_t at = text.find(shipped);
  ASSERT_NE(at, std::string::npos);
  while (at != std::string::npos) {
    text.replace(at, shipped.size(), NANOKV_ENGINE_BINARY);
    at = text.find(shipped, at);
  }
  auto config = LoadConfigText(text, "demo.yaml", std::string(NANOKV_SOURCE_DIR) + "/configs");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->instances.size(), 2u);
  EXPECT_NE(config->instances[0].group, config->instances[1].group);
  EXPECT_NE(LimitText(*config->instances[0].limit), LimitText(*config->instances[1].limit));
}

}  // namespace
}  // namespace nanokv::kvd

namespace nanokv::kvd {
namespace {

TEST(ConfigObjectStore, ReadsEveryKeyAndDefaultsToNoStore) {
  auto none = LoadConfigText("{}", "o.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->object_store.enabled());
  auto config = LoadConfigText(R"(
object_store:
  size: 10%
  high_watermark: 0.9
  low_watermark: 0.6
  policy: fifo
  lease_ttl: 2s
  write_timeout: 500ms
  max_objects: 1000
  slab_ttl: 2m
  max_slabs: 4
  host_tier: 64MiB
)",
                               "o.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const ObjectStoreConfig& o = config->object_store;
  EXPECT_TRUE(o.enabled());
  EXPECT_DOUBLE_EQ(o.size.fraction, 0.1);
  EXPECT_DOUBLE_EQ(o.high_watermark, 0.9);
  EXPECT_DOUBLE_EQ(o.low_watermark, 0.6);
  EXPECT_EQ(o.policy, EvictionPolicy::kFifo);
  EXPECT_EQ(o.lease_ttl.count(), 2000);
  EXPECT_EQ(o.write_timeout.count(), 500);
  EXPECT_EQ(o.max_objects, 1000u);
  EXPECT_EQ(o.slab_ttl.count(), 120000);
  EXPECT_EQ(o.max_slabs, 4u);
  EXPECT_EQ(o.host_tier, uint64_t{64} << 20);
  EXPECT_EQ(none->object_store.host_tier, 0u);  // no host tier unless asked for
}

TEST(ConfigObjectStore, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"object_store:\n  policy: mru\n", "o.yaml:2: object_store.policy: 'mru' is not fifo or lru"},
      {"object_store:\n  size: lots\n", "o.yaml:2: object_store.size:"},
      {"object_store:\n  high_watermark: 1.5\n", "o.yaml:2: object_store.high_watermark:"},
      {"object_store:\n  lease_ttl: 0\n", "o.yaml:2: object_store.lease_ttl:"},
      {"object_store:\n  colour: red\n", "o.yaml:2: object_store.colour: unknown key"},
      {"object_store:\n  high_watermark: 0.5\n  low_watermark: 0.8\n", "object_store: low_watermark"},
      {"object_store: 4GiB\n", "o.yaml:1: object_store: expected a mapping"},
      {"object_store:\n  host_tier: 10%\n", "o.yaml:2: object_store.host_tier:"},
      {"object_store:\n  slab_ttl: 0\n", "o.yaml:2: object_store.slab_ttl:"},
      {"object_store:\n  slab_ttl: 2d\n", "o.yaml:2: object_store.slab_ttl:"},
      {"object_store:\n  max_slabs: 0\n", "o.yaml:2: object_store.max_slabs:"},
  };
  for (const Case& c : cases) {
    auto config = LoadConfigText(c.text, "o.yaml");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_NE(config.status().ToString().find(c.expect), std::string::npos)
        << config.status().ToString();
  }
}

}  // namespace
}  // namespace nanokv::kvd

namespace nanokv::kvd {
namespace {

// kvd's command line as kvd reads it: CLI11 parses, KvdFlags loads.
Result<KvdConfig> LoadFlags(std::vector<std::string> args) {
  CLI::App app;
  KvdFlags flags(&app);
  std::reverse(args.begin(), args.end());  // CLI11 takes the last argument first
  app.parse(args);
  return flags.Load();
}

std::string WriteConfig(const std::string& name, const std::string& text) {
  std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFlags, AFlagBeatsTheFileAndLeavesTheRest) {
  std::string path = WriteConfig("flags.yaml", "page_size: 4MiB\ncapacity: 40%\ndevices: [0]\n"
                                               "check_invariants: true\n");
  auto config = LoadFlags({"--config", path, "--page-size", "8MiB", "--devices", "1,0",
                           "--check-invariants=false"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->page_bytes, 8u << 20);
  EXPECT_EQ(config->devices, (std::vector<int>{1, 0}));
  EXPECT_FALSE(config->check_invariants);
  EXPECT_DOUBLE_EQ(config->capacity.fraction, 0.4);  // no flag: the file's
}

TEST(ConfigFlags, EveryFlagSetsItsKey) {
  auto config = LoadFlags({"--ipc-name", "node-b", "--backend", "host", "--devices", "2",
                           "--page-size", "4MiB", "--capacity", "1GiB", "--reserve-pages", "3",
                           "--default-limit", "25%", "--log-level", "warn", "--run-dir", "/tmp/r",
                           "--host-devices", "4", "--host-device-memory", "512MiB",
                           "--recovery-window", "1500ms", "--max-connections", "300",
                           "--max-connections-per-process", "4", "--busy-poll-us", "40",
                           "--check-invariants"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ipc_name, "node-b");
  EXPECT_EQ(config->backend, "host");
  EXPECT_EQ(config->devices, (std::vector<int>{2}));
  EXPECT_EQ(config->page_bytes, 4u << 20);
  EXPECT_EQ(config->capacity.bytes, 1u << 30);
  EXPECT_EQ(config->reserve_pages, 3u);
  EXPECT_DOUBLE_EQ(config->default_limit.fraction, 0.25);
  EXPECT_EQ(config->log_level, "warn");
  EXPECT_EQ(config->run_dir, "/tmp/r");
  EXPECT_EQ(config->host_devices, 4);
  EXPECT_EQ(config->host_device_bytes, 512u << 20);
  EXPECT_EQ(config->recovery_window, std::chrono::milliseconds(1500));
  EXPECT_EQ(config->max_connections, 300u);
  EXPECT_EQ(config->max_connections_per_process, 4u);
  EXPECT_EQ(config->busy_poll_us, 40u);
  EXPECT_TRUE(config->check_invariants);
}

// A flag's value is read by its key's reader: the key's rule, the flag's name.
TEST(ConfigFlags, ErrorsNameTheFlagAndSayTheKeysRule) {
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  } cases[] = {
      {{"--page-size", "3MiB"}, "--page-size: '3MiB' is not a power of two"},
      {{"--backend", "tpu"}, "--backend: 'tpu' is not one of auto, cuda, hip, host"},
      {{"--devices", "0,99"}, "--devices[1]: '99' is outside [0, 15]"},
      {{"--reserve-pages", "many"}, "--reserve-pages: 'many' is not an integer"},
      {{"--host-devices", "17"}, "--host-devices: '17' is outside [1, 16]"},
      {{"--recovery-window", "5"}, "--recovery-window: '5' is not a duration like 500ms, 2s or 1m"},
      {{"--busy-poll-us", "20000"}, "--busy-poll-us: '20000' is outside [0, 10000]"},
      {{"--check-invariants=maybe"}, "--check-invariants: 'maybe' is not true or false"},
  };
  for (const Case& c : cases) {
    auto config = LoadFlags(c.args);
    ASSERT_FALSE(config.ok()) << c.args[0];
    EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(config.status().message(), c.expect);
  }
  // The file's key says the same rule.
  auto file = LoadConfigText("page_size: 3MiB\n", "c.yaml");
  EXPECT_EQ(file.status().message(), "c.yaml:1: page_size: '3MiB' is not a power of two");
}

// A value is taken as given, quotes and colons included: it is never pasted
// into YAML text to be parsed again.
// Checks made once devices are open start with where the key was given.
TEST(ConfigFlags, OriginNamesTheFileLineOrTheFlag) {
  auto file = LoadConfigText("\nipc_name: a\npage_size: 4MiB\nobject_store:\n  size: 8MiB\n", "c.yaml");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->Origin("page_size"), "c.yaml:3: page_size");
  EXPECT_EQ(file->Origin("object_store.size"), "c.yaml:5: object_store.size");
  EXPECT_EQ(file->Origin("devices"), "devices") << "a default names the key alone";
  auto flags = LoadFlags({"--page-size", "4MiB", "--ipc-name", "has space"});
  EXPECT_EQ(flags.status().message(), "--ipc-name: 'has space' is not 1-48 of [A-Za-z0-9_.-]");
  flags = LoadFlags({"--page-size", "4MiB"});
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->Origin("page_size"), "--page-size");
}

TEST(ConfigFlags, ValuesAreTakenAsGiven) {
  auto config = LoadFlags({"--run-dir", "/tmp/a \"b\": c"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->run_dir, "/tmp/a \"b\": c");
}

TEST(ConfigFlags, TheFileIsCheckedBeforeTheFlags) {
  std::string path = WriteConfig("bad.yaml", "page_size: 3MiB\n");
  auto config = LoadFlags({"--config", path, "--page-size", "4MiB"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), path + ":1: page_size: '3MiB' is not a power of two");
}

}  // namespace
}  // namespace nanokv::kvd
