// What was left at kvd's names before it started, by another uid or by an
// earlier kvd of its own: a segment squatted by a live process of another
// uid is not a kvd's (kvd replaces it; kvctl says so, and removes it when
// named).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "ipc/segment/process_identity.h"
#include "ipc/segment/shm_file.h"
#include "tests/integration/kvctl_fixture.h"
#include "tests/util/other_user.h"

namespace nanokv::testing {
namespace {

// A segment at kvd's name, owned by `uid`, naming the live process `pid`.
void Squat(const std::string& ipc_name, pid_t pid, uid_t uid) {
  auto forged = std::make_unique<ipc::Segment>();
  forged->header.magic = ipc::kSegmentMagic;
  forged->header.layout_version = ipc::kSegmentLayoutVersion;
  forged->header.total_bytes = sizeof(ipc::Segment);
  forged->header.kvd_pid = pid;
  forged->header.kvd_start_ticks = ipc::ProcessStartTicks(pid).value();
  int fd = open(ipc::ShmPath(ipc_name).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(write(fd, forged.get(), sizeof(ipc::Segment)), static_cast<ssize_t>(sizeof(ipc::Segment)));
  ASSERT_EQ(fchown(fd, uid, uid), 0);
  close(fd);
}

// The finding: a live process of another uid squatted kvd's segment name
// with a segment of its own naming itself, so it looked like a live kvd's:
// kvd refused to start while that process lived, and `kvctl cleanup` left
// it. Now it is not a kvd's: kvd replaces it; kvctl says so, and removes it
// when named.
TEST_F(KvctlTest, ASegmentSquattedByALiveProcessOfAnotherUidIsNotAKvds) {
  NANOKV_SKIP_UNLESS_ROOT();
  LiveProcessAs squatter(kNobody, kNobody);
  ASSERT_GT(squatter.pid(), 0);
  const std::string segment = ipc::ShmPath(ipc_);
  Squat(ipc_, squatter.pid(), kNobody);

  Ran all = Kvctl({"cleanup"});
  EXPECT_EQ(all.code, 0) << all.out << all.err;
  EXPECT_NE(all.out.find("kept segment " + segment + ": it belongs to uid 65534"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("`kvctl cleanup " + ipc_ + "` removes it"), std::string::npos) << all.out;
  EXPECT_TRUE(Exists(segment));
  Ran named = Kvctl({"cleanup", ipc_});
  EXPECT_EQ(named.code, 0) << named.out << named.err;
  EXPECT_NE(named.out.find("removed segment " + segment + " (it belongs to uid 65534"), std::string::npos)
      << named.out;
  EXPECT_FALSE(Exists(segment));

  Squat(ipc_, squatter.pid(), kNobody);
  StartKvd(16);
  const std::string log = kvd_.Log();
  EXPECT_NE(log.find("removed what held the name: not a kvd's: it belongs to uid 65534"), std::string::npos)
      << log;
  EXPECT_EQ(Read().segment.header.kvd_pid, kvd_.pid());
  StopKvd();
}

}  // namespace
}  // namespace nanokv::testing
