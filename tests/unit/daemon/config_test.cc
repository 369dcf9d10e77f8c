#include "daemon/config.h"

#include <gtest/gtest.h>

namespace nanokv::kvd {
namespace {

TEST(Config, EmptyTextGivesDefaults) {
  auto config = LoadConfigText("", "empty.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ipc_name, "nanokv");
  EXPECT_EQ(config->page_size, 2u << 20);
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
)", "full.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ipc_name, "node-a");
  EXPECT_EQ(config->backend, "host");
  EXPECT_EQ(config->devices, (std::vector<int>{0, 1}));
  EXPECT_EQ(config->page_size, 4u << 20);
  EXPECT_DOUBLE_EQ(config->capacity.fraction, 0.4);
  EXPECT_EQ(config->reserve_pages, 3u);
  EXPECT_EQ(config->default_limit.bytes, 1u << 30);
  EXPECT_EQ(config->allowed_uids, (std::vector<uid_t>{0, 1000}));
  EXPECT_EQ(config->socket_mode, 0600u);
  EXPECT_EQ(config->segment_mode, 0640u);
  EXPECT_EQ(config->group, gid_t{0});
  EXPECT_EQ(config->host_devices, 2);
  EXPECT_EQ(config->host_device_bytes, 512u << 20);
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
      {"instances: []\n", "c.yaml:1: instances:"},
      {"ipc_name: \"has space\"\n", "ipc_name 'has space' is not"},
  };
  for (const auto& c : cases) {
    auto config = LoadConfigText(c.text, "c.yaml");
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
    EXPECT_NE(config.status().message().find(c.expect), std::string_view::npos)
        << "for:\n" << c.text << "got: " << config.status().ToString();
  }
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
  EXPECT_EQ(config->page_size, defaults.page_size);
  EXPECT_DOUBLE_EQ(config->capacity.fraction, defaults.capacity.fraction);
  EXPECT_EQ(config->reserve_pages, defaults.reserve_pages);
  EXPECT_EQ(config->socket_mode, defaults.socket_mode);
  EXPECT_FALSE(config->group.has_value());
}

}  // namespace
}  // namespace nanokv::kvd
