// OptionsFromEnvironment: every variable and alias, precedence, malformed
// values. Each test starts from an environment with none of them set and
// restores the process's own values afterwards.
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "nanokv/client.h"

namespace nanokv {
namespace {

const char* const kVariables[] = {
    "ENABLE_NANOKV",    "ENABLE_KVCACHED",          "NANOKV_IPC_NAME",  "KVCACHED_IPC_NAME",
    "NANOKV_LIMIT",     "KVCACHED_GPU_UTILIZATION", "NANOKV_GROUP",     "NANOKV_TENANT",
    "NANOKV_PAGE_SIZE", "KVCACHED_PAGE_SIZE_MB",    "NANOKV_LOG_LEVEL",
};

class EnvOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    level_ = spdlog::get_level();
    for (const char* name : kVariables) {
      const char* value = std::getenv(name);
      if (value != nullptr) saved_[name] = value;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) {
      auto it = saved_.find(name);
      if (it == saved_.end()) {
        unsetenv(name);
      } else {
        setenv(name, it->second.c_str(), 1);
      }
    }
    spdlog::set_level(level_);
  }

  static void Set(const char* name, const char* value) { setenv(name, value, 1); }

  // The options, asserting they parse and nanokv is enabled.
  static ClientOptions Parse() {
    auto options = OptionsFromEnvironment();
    EXPECT_TRUE(options.ok()) << options.status().ToString();
    if (!options.ok() || !options->has_value()) {
      ADD_FAILURE() << "nanokv not enabled";
      return {};
    }
    return **options;
  }

  // Asserts kInvalidArgument naming `name` and `value`.
  static void ExpectMalformed(const char* name, const char* value) {
    Set(name, value);
    auto options = OptionsFromEnvironment();
    ASSERT_FALSE(options.ok()) << name << "=" << value << " was accepted";
    EXPECT_EQ(options.status().code(), Code::kInvalidArgument);
    std::string message(options.status().message());
    EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_NE(message.find(value), std::string::npos) << message;
    unsetenv(name);
  }

 private:
  std::map<std::string, std::string> saved_;
  spdlog::level::level_enum level_ = spdlog::level::info;
};

TEST_F(EnvOptionsTest, NotEnabledIsNullopt) {
  auto options = OptionsFromEnvironment();
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->has_value());
  for (const char* off : {"0", "false", "No", "OFF", ""}) {
    Set("ENABLE_NANOKV", off);
    options = OptionsFromEnvironment();
    ASSERT_TRUE(options.ok()) << off;
    EXPECT_FALSE(options->has_value()) << off;
  }
}

TEST_F(EnvOptionsTest, NotEnabledIgnoresEverythingElse) {
  // A stray malformed variable must not break an engine that does not use nanokv.
  Set("NANOKV_LIMIT", "lots");
  Set("NANOKV_LOG_LEVEL", "loud");
  auto options = OptionsFromEnvironment();
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_FALSE(options->has_value());
}

TEST_F(EnvOptionsTest, TruthyValuesEnable) {
  for (const char* on : {"1", "true", "TRUE", "yes", "Yes", "on", "On"}) {
    Set("ENABLE_NANOKV", on);
    auto options = OptionsFromEnvironment();
    ASSERT_TRUE(options.ok()) << on;
    EXPECT_TRUE(options->has_value()) << on;
  }
}

TEST_F(EnvOptionsTest, KvcachedEnableAlias) {
  Set("ENABLE_KVCACHED", "true");
  auto options = OptionsFromEnvironment();
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->has_value());
}

TEST_F(EnvOptionsTest, NanokvEnableWinsOverAlias) {
  Set("ENABLE_NANOKV", "0");
  Set("ENABLE_KVCACHED", "1");
  auto options = OptionsFromEnvironment();
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->has_value());
  Set("ENABLE_NANOKV", "1");
  Set("ENABLE_KVCACHED", "0");
  options = OptionsFromEnvironment();
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->has_value());
}

TEST_F(EnvOptionsTest, MalformedEnable) {
  ExpectMalformed("ENABLE_NANOKV", "maybe");
  ExpectMalformed("ENABLE_KVCACHED", "2");
}

TEST_F(EnvOptionsTest, Defaults) {
  Set("ENABLE_NANOKV", "1");
  ClientOptions options = Parse();
  EXPECT_EQ(options.ipc_name, "nanokv");
  EXPECT_EQ(options.tenant, "");
  EXPECT_EQ(options.group, "");
  EXPECT_EQ(options.limit_bytes, 0u);
  EXPECT_EQ(options.limit_fraction, 0.0);
  EXPECT_EQ(options.expect_page_bytes, 0u);
}

TEST_F(EnvOptionsTest, IpcNameAndAlias) {
  Set("ENABLE_NANOKV", "1");
  Set("KVCACHED_IPC_NAME", "from-kvcached");
  EXPECT_EQ(Parse().ipc_name, "from-kvcached");
  Set("NANOKV_IPC_NAME", "node_a.1");
  EXPECT_EQ(Parse().ipc_name, "node_a.1");  // NANOKV_* wins
}

TEST_F(EnvOptionsTest, MalformedIpcName) {
  Set("ENABLE_NANOKV", "1");
  ExpectMalformed("NANOKV_IPC_NAME", "a/b");
  ExpectMalformed("KVCACHED_IPC_NAME", ".hidden");
  ExpectMalformed("NANOKV_IPC_NAME", std::string(49, 'x').c_str());
}

TEST_F(EnvOptionsTest, LimitAsSize) {
  Set("ENABLE_NANOKV", "1");
  Set("NANOKV_LIMIT", "2G");
  ClientOptions options = Parse();
  EXPECT_EQ(options.limit_bytes, 2ull << 30);
  EXPECT_EQ(options.limit_fraction, 0.0);
  Set("NANOKV_LIMIT", "512M");
  EXPECT_EQ(Parse().limit_bytes, 512ull << 20);
  Set("NANOKV_LIMIT", "1048576");
  EXPECT_EQ(Parse().limit_bytes, 1ull << 20);
}

TEST_F(EnvOptionsTest, LimitAsShare) {
  Set("ENABLE_NANOKV", "1");
  Set("NANOKV_LIMIT", "30%");
  ClientOptions options = Parse();
  EXPECT_DOUBLE_EQ(options.limit_fraction, 0.3);
  EXPECT_EQ(options.limit_bytes, 0u);
}

TEST_F(EnvOptionsTest, GpuUtilizationAlias) {
  Set("ENABLE_KVCACHED", "1");
  Set("KVCACHED_GPU_UTILIZATION", "0.5");
  ClientOptions options = Parse();
  // A share of the engine's GPU as kvcached means it, not of kvd's whole capacity.
  EXPECT_DOUBLE_EQ(options.limit_device_fraction, 0.5);
  EXPECT_EQ(options.limit_fraction, 0.0);
  EXPECT_EQ(options.limit_bytes, 0u);
  Set("KVCACHED_GPU_UTILIZATION", "1");
  EXPECT_DOUBLE_EQ(Parse().limit_device_fraction, 1.0);
}

TEST_F(EnvOptionsTest, NanokvLimitWinsOverGpuUtilization) {
  Set("ENABLE_NANOKV", "1");
  Set("KVCACHED_GPU_UTILIZATION", "0.5");
  Set("NANOKV_LIMIT", "1G");
  ClientOptions options = Parse();
  EXPECT_EQ(options.limit_bytes, 1ull << 30);
  EXPECT_EQ(options.limit_fraction, 0.0);
  EXPECT_EQ(options.limit_device_fraction, 0.0);
}

TEST_F(EnvOptionsTest, MalformedLimits) {
  Set("ENABLE_NANOKV", "1");
  ExpectMalformed("NANOKV_LIMIT", "lots");
  ExpectMalformed("NANOKV_LIMIT", "2X");
  ExpectMalformed("NANOKV_LIMIT", "-1G");
  ExpectMalformed("NANOKV_LIMIT", "0");
  ExpectMalformed("NANOKV_LIMIT", "150%");
  ExpectMalformed("NANOKV_LIMIT", "0%");
  ExpectMalformed("KVCACHED_GPU_UTILIZATION", "0");
  ExpectMalformed("KVCACHED_GPU_UTILIZATION", "1.5");
  ExpectMalformed("KVCACHED_GPU_UTILIZATION", "-0.2");
  ExpectMalformed("KVCACHED_GPU_UTILIZATION", "half");
  ExpectMalformed("KVCACHED_GPU_UTILIZATION", "0.5x");
  ExpectMalformed("KVCACHED_GPU_UTILIZATION", "nan");
}

TEST_F(EnvOptionsTest, GroupAndTenant) {
  Set("ENABLE_NANOKV", "1");
  Set("NANOKV_GROUP", "llama-70b");
  Set("NANOKV_TENANT", "decode@node1:0");
  ClientOptions options = Parse();
  EXPECT_EQ(options.group, "llama-70b");
  EXPECT_EQ(options.tenant, "decode@node1:0");
}

TEST_F(EnvOptionsTest, MalformedGroupAndTenant) {
  Set("ENABLE_NANOKV", "1");
  ExpectMalformed("NANOKV_GROUP", "has space");
  ExpectMalformed("NANOKV_TENANT", "semi;colon");
  ExpectMalformed("NANOKV_TENANT", std::string(64, 't').c_str());
}

TEST_F(EnvOptionsTest, PageSize) {
  Set("ENABLE_KVCACHED", "1");
  Set("KVCACHED_PAGE_SIZE_MB", "2");
  EXPECT_EQ(Parse().expect_page_bytes, 2u << 20);
  Set("KVCACHED_PAGE_SIZE_MB", "64");
  EXPECT_EQ(Parse().expect_page_bytes, 64u << 20);
  Set("NANOKV_PAGE_SIZE", "4M");  // NANOKV_* wins
  EXPECT_EQ(Parse().expect_page_bytes, 4u << 20);
}

TEST_F(EnvOptionsTest, MalformedPageSize) {
  Set("ENABLE_NANOKV", "1");
  ExpectMalformed("KVCACHED_PAGE_SIZE_MB", "two");
  ExpectMalformed("KVCACHED_PAGE_SIZE_MB", "0");
  ExpectMalformed("KVCACHED_PAGE_SIZE_MB", "1.5");
  ExpectMalformed("KVCACHED_PAGE_SIZE_MB", "-2");
  ExpectMalformed("KVCACHED_PAGE_SIZE_MB", "2M");
  ExpectMalformed("NANOKV_PAGE_SIZE", "big");
  ExpectMalformed("NANOKV_PAGE_SIZE", "0");
}

TEST_F(EnvOptionsTest, LogLevelIsApplied) {
  Set("ENABLE_NANOKV", "1");
  Set("NANOKV_LOG_LEVEL", "debug");
  Parse();
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  Set("NANOKV_LOG_LEVEL", "WARN");
  Parse();
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  Set("NANOKV_LOG_LEVEL", "off");
  Parse();
  EXPECT_EQ(spdlog::get_level(), spdlog::level::off);
  Set("NANOKV_LOG_LEVEL", "error");
  Parse();
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
}

TEST_F(EnvOptionsTest, MalformedLogLevel) {
  Set("ENABLE_NANOKV", "1");
  spdlog::set_level(spdlog::level::info);
  ExpectMalformed("NANOKV_LOG_LEVEL", "loud");
  // A typo must not silence the log (spdlog's from_str would give "off").
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info);
}

TEST_F(EnvOptionsTest, AttachFromEnvWhenNotEnabled) {
  auto client = Client::AttachFromEnv();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kNotFound);
  EXPECT_NE(std::string(client.status().message()).find("ENABLE_NANOKV=1"), std::string::npos);
}

TEST_F(EnvOptionsTest, AttachFromEnvWithoutKvd) {
  Set("ENABLE_NANOKV", "1");
  Set("NANOKV_IPC_NAME", "surely-no-kvd-listens-here");
  auto client = Client::AttachFromEnv();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
  EXPECT_NE(std::string(client.status().message()).find("is kvd running?"), std::string::npos)
      << client.status().ToString();
}

TEST_F(EnvOptionsTest, AttachFromEnvMalformed) {
  Set("ENABLE_NANOKV", "1");
  Set("NANOKV_LIMIT", "lots");
  auto client = Client::AttachFromEnv();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace nanokv
