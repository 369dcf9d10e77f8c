// Files someone else may have put in the way: a FIFO, a folder, a link, one
// too large. Each is refused at once and named; before ReadSmallFile opened
// without blocking, the FIFO case hung here in open(2) until ctest's timeout.
#include "base/small_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "ipc/master/token.h"
#include "tests/integration/process_util.h"

namespace nanokv {
namespace {

TEST(SmallFile, ReadsARegularFileWhole) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/config.yaml";
  std::ofstream(path) << "socket: /run/nanokv/kvd.sock\n";
  auto file = ReadSmallFile(path, 1024, "config file");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->text, "socket: /run/nanokv/kvd.sock\n");
  EXPECT_TRUE(S_ISREG(file->st.st_mode));
}

TEST(SmallFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/token";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto file = ReadSmallFile(path, 1024, "token file");
  EXPECT_EQ(file.status().code(), Code::kPermissionDenied);
  EXPECT_NE(file.status().ToString().find("token file " + path + ": not a regular file"), std::string::npos)
      << file.status().ToString();
  // The cluster token, the master's and kvctl's first read, the same way.
  EXPECT_EQ(master::ReadTokenFile(path).status().code(), Code::kPermissionDenied);
  unlink(path.c_str());
}

TEST(SmallFile, AFolderALinkAndTooLargeAreRefusedByName) {
  testing::TempDir dir;
  EXPECT_EQ(ReadSmallFile(dir.path(), 1024, "config file").status().code(), Code::kPermissionDenied);
  const std::string path = dir.path() + "/big";
  std::ofstream(path) << std::string(2048, 'x');
  auto big = ReadSmallFile(path, 1024, "config file");
  EXPECT_EQ(big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(big.status().ToString().find("over 1024 bytes"), std::string::npos);
  const std::string link = dir.path() + "/link";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  EXPECT_EQ(ReadSmallFile(link, 4096, "token file", /*no_follow=*/true).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(ReadSmallFile(link, 4096, "config file").ok()) << "a config may be a link";
  EXPECT_EQ(ReadSmallFile(dir.path() + "/none", 1024, "config file").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace nanokv
