// kvd's run directory and lock (base/run_dir.h) and who counts as kvd
// (base/kvd_identity.h): a directory another user owns, or that others may
// write, or that is a symlink, is refused naming owner and mode; the lock
// excludes a second kvd and names the holder.
#include "base/run_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "base/kvd_identity.h"
#include "tests/util/other_user.h"

namespace nanokv {
namespace {

class RunDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/nanokv-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    base_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(base_, ignored);
  }
  std::string base_;
};

TEST_F(RunDirTest, MakesItsOwnDirectoryAndAcceptsItAgain) {
  const std::string dir = base_ + "/run";
  ASSERT_TRUE(PrepareRunDirectory(dir).ok());
  struct stat st{};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_TRUE(PrepareRunDirectory(dir).ok()) << "an existing directory of ours is fine";
}

TEST_F(RunDirTest, RefusesADirectoryOthersMayWrite) {
  const std::string dir = base_ + "/open";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  Status status = PrepareRunDirectory(dir);
  EXPECT_EQ(status.code(), Code::kPermissionDenied);
  EXPECT_NE(status.message().find("run directory " + dir + " has mode 0777"), std::string::npos)
      << status.ToString();
}

TEST_F(RunDirTest, RefusesASymlink) {
  const std::string real = base_ + "/real", link = base_ + "/link";
  ASSERT_EQ(mkdir(real.c_str(), 0755), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  Status status = PrepareRunDirectory(link);
  EXPECT_EQ(status.code(), Code::kPermissionDenied);
  EXPECT_NE(status.message().find("is a symbolic link"), std::string::npos) << status.ToString();
}

TEST_F(RunDirTest, RefusesADirectoryInAParentOthersMayWrite) {
  const std::string parent = base_ + "/shared";
  ASSERT_EQ(mkdir(parent.c_str(), 0700), 0);
  ASSERT_EQ(chmod(parent.c_str(), 0777), 0);  // not sticky: others may rename what is in it
  Status status = PrepareRunDirectory(parent + "/run");
  EXPECT_EQ(status.code(), Code::kPermissionDenied);
  EXPECT_NE(status.message().find("lies in " + parent), std::string::npos) << status.ToString();
  ASSERT_EQ(chmod(parent.c_str(), 01777), 0);  // sticky, like /tmp: fine
  EXPECT_TRUE(PrepareRunDirectory(parent + "/run").ok());
}

// The finding: /tmp/nanokv made first by another user, who then swapped
// kvd's socket for their own.
TEST_F(RunDirTest, RefusesADirectoryAnotherUserOwns) {
  NANOKV_SKIP_UNLESS_ROOT();
  const std::string dir = base_ + "/squatted";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(dir.c_str(), testing::kNobody, testing::kNobody), 0);
  Status status = PrepareRunDirectory(dir);
  EXPECT_EQ(status.code(), Code::kPermissionDenied);
  EXPECT_NE(status.message().find("belongs to uid 65534"), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("mode 0755"), std::string::npos) << status.ToString();
}

TEST_F(RunDirTest, TheLockExcludesASecondHolderAndNamesTheFirst) {
  const std::string path = base_ + "/x.lock";
  auto first = RunDirLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = RunDirLock::Acquire(path);
  ASSERT_EQ(second.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("(pid " + std::to_string(getpid()) + ") holds " + path),
            std::string::npos) << second.status().ToString();
  EXPECT_EQ(RunDirLock::TryExisting(path).status().code(), Code::kFailedPrecondition);
  first->reset();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "a holder removes its lock file";
  EXPECT_EQ(RunDirLock::TryExisting(path).status().code(), Code::kNotFound);
  EXPECT_TRUE(RunDirLock::Acquire(path).ok());
}

TEST_F(RunDirTest, TheLockIsNeverASymlinkNorAnotherUsersFile) {
  const std::string target = base_ + "/target", link = base_ + "/link.lock";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  Status status = RunDirLock::Acquire(link).status();
  EXPECT_EQ(status.code(), Code::kPermissionDenied) << status.ToString();
  EXPECT_NE(access(target.c_str(), F_OK), 0) << "nothing created through the link";
  const std::string shared = base_ + "/shared.lock";
  int fd = open(shared.c_str(), O_CREAT | O_WRONLY, 0666);
  ASSERT_GE(fd, 0);
  fchmod(fd, 0666);
  close(fd);
  status = RunDirLock::Acquire(shared).status();
  EXPECT_EQ(status.code(), Code::kPermissionDenied);
  EXPECT_NE(status.message().find("may be written by others"), std::string::npos) << status.ToString();
}

TEST(KvdIdentityTest, TrustsRootOurselvesAndNanokvKvdUid) {
  unsetenv(kKvdUidVariable);
  EXPECT_TRUE(IsTrustedKvdUid(0));
  EXPECT_TRUE(IsTrustedKvdUid(geteuid()));
  EXPECT_FALSE(IsTrustedKvdUid(12345));
  setenv(kKvdUidVariable, "12345, root,54321", 1);
  EXPECT_TRUE(IsTrustedKvdUid(12345));
  EXPECT_TRUE(IsTrustedKvdUid(54321));
  EXPECT_FALSE(IsTrustedKvdUid(777));
  setenv(kKvdUidVariable, "no-such-user-here", 1);
  auto uids = TrustedKvdUids();
  EXPECT_EQ(uids.status().code(), Code::kInvalidArgument);
  EXPECT_NE(uids.status().message().find("NANOKV_KVD_UID: 'no-such-user-here'"), std::string::npos);
  EXPECT_FALSE(IsTrustedKvdUid(12345)) << "a typo trusts nobody more";
  unsetenv(kKvdUidVariable);
  EXPECT_NE(TrustedKvdUidsText().find("NANOKV_KVD_UID"), std::string::npos);
  EXPECT_EQ(DescribeUid(0), "uid 0 (root)");
}

}  // namespace
}  // namespace nanokv
