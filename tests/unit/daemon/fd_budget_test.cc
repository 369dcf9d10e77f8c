// kvd's fd budget: pages first, then connections at three fds each.
#include "daemon/server/fd_budget.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace nanokv::kvd {
namespace {

TEST(FdBudget, PagesComeFirstThenThreeFdsAConnection) {
  // A connection's socket, its peer's pidfd, its request ring's doorbell.
  FdBudget b{.limit = 1000, .open_now = 100, .pages_to_come = 200, .fds_per_page = 2, .headroom = 100};
  EXPECT_EQ(b.connections(), (1000u - 100 - 400 - 100) / 3);
  b.pages_to_come = 500;  // the pages alone overrun the limit
  EXPECT_EQ(b.connections(), 0u);
  EXPECT_NE(b.ToString().find("room for 0 connections"), std::string::npos) << b.ToString();
}

TEST(FdBudget, TheLimitIsTheConfiguredOneCappedByTheBudgetNeverBelowTheFloor) {
  FdBudget roomy{.limit = 1u << 20, .open_now = 10, .pages_to_come = 0, .fds_per_page = 1, .headroom = 0};
  EXPECT_EQ(ConnectionLimit(roomy, 0), kDefaultMaxConnections);
  EXPECT_EQ(ConnectionLimit(roomy, 5000), 5000u);
  FdBudget tight{.limit = 300, .open_now = 10, .pages_to_come = 0, .fds_per_page = 1, .headroom = 0};
  EXPECT_EQ(ConnectionLimit(tight, 0), 96u);
  EXPECT_EQ(ConnectionLimit(tight, 90), 90u);
  FdBudget none{.limit = 100, .open_now = 10, .pages_to_come = 1000, .fds_per_page = 1, .headroom = 0};
  EXPECT_EQ(ConnectionLimit(none, 0), kMinConnections);
}

TEST(FdBudget, CountsThisProcesssOpenFds) {
  uint64_t before = CountOpenFds();
  ASSERT_GT(before, 2u);  // stdin, stdout, stderr at least
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(CountOpenFds(), before + 1);
  close(fd);
  EXPECT_EQ(CountOpenFds(), before);
  FdBudget measured = MeasureFdBudget(7, 2);
  EXPECT_EQ(measured.pages_to_come, 7u);
  EXPECT_EQ(measured.fds_per_page, 2u);
  EXPECT_GT(measured.limit, 0u);
}

}  // namespace
}  // namespace nanokv::kvd
