#include "ipc/uds/fd_passing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

namespace nanokv::ipc {
namespace {

class FdPassingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    close(fds_[0]);
    close(fds_[1]);
  }
  int fds_[2];
};

TEST_F(FdPassingTest, PassesBytesAndDescriptors) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  std::byte data[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  ASSERT_TRUE(SendWithFds(fds_[0], data, {pipe_fds, 2}).ok());
  std::byte got[8];
  std::vector<int> received;
  auto n = ReceiveWithFds(fds_[1], got, &received);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3u);
  ASSERT_EQ(received.size(), 2u);
  EXPECT_NE(fcntl(received[0], F_GETFD) & FD_CLOEXEC, 0);
  // The received write end really is the pipe's.
  ASSERT_EQ(write(received[1], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  for (int fd : received) close(fd);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST_F(FdPassingTest, RefusesBadRequests) {
  int fd = 0;
  EXPECT_EQ(SendWithFds(fds_[0], {}, {&fd, 1}).code(), Code::kInvalidArgument);
  std::vector<int> many(kMaxFdsPerMessage + 1, 0);
  std::byte b{1};
  EXPECT_EQ(SendWithFds(fds_[0], {&b, 1}, many).code(), Code::kInvalidArgument);
}

TEST_F(FdPassingTest, ClosesDescriptorsBeyondTheLimit) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  std::byte b{1};
  ASSERT_TRUE(SendWithFds(fds_[0], {&b, 1}, {pipe_fds, 2}).ok());
  std::vector<int> received;
  auto n = ReceiveWithFds(fds_[1], {&b, 1}, &received, /*max_fds=*/1);
  EXPECT_EQ(n.status().code(), Code::kProtocolError);
  EXPECT_TRUE(received.empty());
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST_F(FdPassingTest, ReportsPeerClose) {
  close(fds_[0]);
  fds_[0] = socket(AF_UNIX, SOCK_STREAM, 0);  // keep TearDown's close valid
  std::byte b;
  std::vector<int> received;
  auto n = ReceiveWithFds(fds_[1], {&b, 1}, &received);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

}  // namespace
}  // namespace nanokv::ipc
