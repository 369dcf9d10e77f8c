// What tells a cluster client that a node's kvd is on its own host.
#include "base/host_identity.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace nanokv {
namespace {

TEST(HostIdentity, TheConfiguredNameWinsThenTheVariableThenTheBootId) {
  unsetenv(kHostIdVariable);
  std::string boot;
  std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot);
  ASSERT_FALSE(boot.empty()) << "this kernel has no boot id";
  EXPECT_EQ(HostIdentity(), "boot:" + boot);
  EXPECT_EQ(HostIdentity(), HostIdentity()) << "one host, one answer";
  setenv(kHostIdVariable, "rack4-gpu7", 1);
  EXPECT_EQ(HostIdentity(), "rack4-gpu7");
  EXPECT_EQ(HostIdentity("configured"), "configured");
  setenv(kHostIdVariable, "", 1);
  EXPECT_EQ(HostIdentity(), "boot:" + boot) << "an empty variable names nothing";
  unsetenv(kHostIdVariable);
}

}  // namespace
}  // namespace nanokv
