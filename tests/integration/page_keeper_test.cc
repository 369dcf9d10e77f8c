// The page keeper (daemon/node/page_keeper.h) on its own, as kvd's binary
// runs it: pages it was given outlive their sender and come back whole to
// the next taker, once, a host tier's page told apart; a clean stop drops them; nobody coming within the
// wait, it gives up; and a keeper's socket that is not a keeper's is
// harmless to a taker.
#include "daemon/node/page_keeper.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/process_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

using namespace std::chrono_literals;

class PageKeeperTest : public ::testing::Test {
 protected:
  std::string Path() const { return dir_.path() + "/k.keeper"; }
  static int Page(char fill) {
    int fd = memfd_create("page", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    std::string bytes(4096, fill);
    EXPECT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), 4096);
    return fd;
  }
  static char FirstByte(int fd) {
    char c = 0;
    EXPECT_EQ(pread(fd, &c, 1, 100), 1);
    return c;
  }
  // The keeper is this test's child (in kvd's life, its dead kvd's orphan):
  // gone once reaped.
  static bool Exited(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, WNOHANG) == pid || kill(pid, 0) != 0;
  }

  nanokv::testing::TempDir dir_;
};

TEST_F(PageKeeperTest, PagesOutliveTheirSenderAndGoToTheNextTakerOnce) {
  auto keeper = PageKeeper::Start(NANOKV_KVD_BINARY, Path(), 10'000);
  ASSERT_TRUE(keeper.ok()) << keeper.status().ToString();
  const pid_t pid = (*keeper)->pid();
  for (uint32_t id = 0; id < 3; ++id) {
    int fd = Page(static_cast<char>('a' + id));
    ASSERT_OK((*keeper)->Keep(static_cast<int>(id % 2), id + 10, id + 100, fd));
    close(fd);  // the keeper's copy is the only one now
  }
  // A host tier's page: told apart from the store's pages.
  int host = Page('h');
  ASSERT_OK((*keeper)->KeepHost(1, 0, host));
  close(host);
  keeper->reset();  // the sender "dies": no goodbye
  std::vector<KeptPage> pages = PageKeeper::TakeOver(Path());
  ASSERT_EQ(pages.size(), 4u);
  EXPECT_TRUE(pages[3].host);
  EXPECT_EQ(pages[3].device, 1);
  EXPECT_EQ(pages[3].id, 0u);
  EXPECT_EQ(FirstByte(pages[3].fd), 'h');
  close(pages[3].fd);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(pages[i].host);
    EXPECT_EQ(pages[i].device, static_cast<int>(i % 2));
    EXPECT_EQ(pages[i].id, i + 10);
    EXPECT_EQ(pages[i].generation, i + 100);
    EXPECT_EQ(FirstByte(pages[i].fd), 'a' + static_cast<char>(i)) << "the same memory";
    close(pages[i].fd);
  }
  // Handed over, it leaves.
  EXPECT_TRUE(nanokv::testing::WaitFor([&] { return Exited(pid); }, 10s));
  EXPECT_TRUE(PageKeeper::TakeOver(Path()).empty()) << "once";
}

TEST_F(PageKeeperTest, AStopDropsThePages) {
  auto keeper = PageKeeper::Start(NANOKV_KVD_BINARY, Path(), 10'000);
  ASSERT_TRUE(keeper.ok()) << keeper.status().ToString();
  int fd = Page('x');
  ASSERT_OK((*keeper)->Keep(0, 1, 1, fd));
  close(fd);
  const pid_t pid = (*keeper)->pid();
  (*keeper)->Stop();  // reaps it
  EXPECT_NE(kill(pid, 0), 0) << "exited and reaped";
  EXPECT_TRUE(PageKeeper::TakeOver(Path()).empty());
  EXPECT_EQ(access(Path().c_str(), F_OK), -1) << "its socket goes with it";
}

TEST_F(PageKeeperTest, NobodyComingItGivesUp) {
  auto keeper = PageKeeper::Start(NANOKV_KVD_BINARY, Path(), 200);
  ASSERT_TRUE(keeper.ok()) << keeper.status().ToString();
  int fd = Page('y');
  ASSERT_OK((*keeper)->Keep(0, 1, 1, fd));
  close(fd);
  const pid_t pid = (*keeper)->pid();
  keeper->reset();
  EXPECT_TRUE(nanokv::testing::WaitFor([&] { return Exited(pid); }, 10s)) << "it exits after its wait";
  EXPECT_TRUE(PageKeeper::TakeOver(Path()).empty()) << "nothing answers: no pages, no hang";
}

TEST_F(PageKeeperTest, NotAKeepersSocketGivesNothing) {
  // A plain file, then a socket that accepts and says nothing.
  { FILE* f = fopen(Path().c_str(), "w"); fclose(f); }
  EXPECT_TRUE(PageKeeper::TakeOver(Path()).empty());
  unlink(Path().c_str());
  int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", Path().c_str());
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  std::thread silent([&] {
    int peer = accept(listener, nullptr, nullptr);
    char byte;
    if (peer >= 0) {
      (void)recv(peer, &byte, 1, 0);
      close(peer);  // hangs up without a page
    }
  });
  EXPECT_TRUE(PageKeeper::TakeOver(Path()).empty());
  silent.join();
  close(listener);
}

}  // namespace
}  // namespace nanokv::kvd
