// Issue 16 item 1: a page keeps no exported fd in the pool once granted.
// The export made when a page is created ahead goes out with its first
// TakeFd; a later one exports anew; an adopted page's fd (an engine's, as
// CUDA cannot export an imported handle) is duplicated and kept.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "daemon/node/page_pool.h"
#include "tests/unit/daemon/page_pool_test_util.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

using pool_testing::kGroup;
using pool_testing::PagePoolTest;

// The same memfd (host pages are files): the fd names the page.
bool SameFile(int a, int b) {
  struct stat sa {}, sb {};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

TEST_F(PagePoolTest, AGrantedPageKeepsNoFdOnceItsFirstIsTaken) {
  PagePoolConfig config = Config(16, 4);
  config.export_fds = true;
  auto pool = MakePool(config);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->kept_fds(), 4u) << "the pages created ahead carry their export";
  auto id = pool->Allocate(kGroup);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_GE(pool->kept_fd(*id), 0);
  auto first = pool->TakeFd(*id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(pool->kept_fd(*id), -1) << "taken: the pool keeps none of a granted page";
  auto second = pool->TakeFd(*id);  // a later holder: a fresh export of the same page
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE(*second, *first);
  EXPECT_TRUE(SameFile(*first, *second));
  close(*first);
  close(*second);
  EXPECT_EQ(pool->TakeFd(999).status().code(), Code::kInvalidArgument);
  ASSERT_OK(pool->Free(*id));
  EXPECT_EQ(pool->TakeFd(*id).status().code(), Code::kFailedPrecondition) << "not granted";
  EXPECT_OK(pool->CheckInvariants());
}

TEST_F(PagePoolTest, AnAdoptedPagesFdIsDuplicatedAndKept) {
  PagePoolConfig config = Config(16, 0);
  config.export_fds = true;
  config.held_back = {3};
  auto pool = MakePool(config);
  ASSERT_NE(pool, nullptr);
  auto page = backend_->CreatePage(0, pool_testing::kPage);
  ASSERT_TRUE(page.ok());
  auto engine_fd = backend_->ExportPage(*page);
  ASSERT_TRUE(engine_fd.ok());
  ASSERT_OK(pool->Adopt(3, kGroup, *page, *engine_fd));
  auto taken = pool->TakeFd(3);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_NE(*taken, *engine_fd);
  EXPECT_TRUE(SameFile(*taken, pool->kept_fd(3))) << "kept: an imported handle cannot be exported again";
  close(*taken);
  EXPECT_EQ(pool->kept_fds(), 1u);
  EXPECT_OK(pool->CheckInvariants());
}

}  // namespace
}  // namespace nanokv::kvd
