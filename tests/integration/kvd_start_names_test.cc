// What was left at kvd's names before it started, by another uid or by an
// earlier kvd of its own: a segment squatted by a live process of another
// uid is not a kvd's (kvd replaces it; kvctl says so, and removes it when
// named), and a page journal of a million held pages beyond the capacity
// costs a few lines of log, not a million.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "daemon/node/page_journal.h"
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

// The finding: a page journal of 4 million entries, written by kvd's own
// uid, made 4.2 million warning lines (481 MB of log), one per page beyond
// the capacity. The first few are logged, then how many more.
TEST_F(KvctlTest, AJournalOfAMillionPagesBeyondTheCapacityLogsAFewLines) {
  constexpr uint32_t kListed = 1u << 20;
  const std::string path = dir_.path() + "/" + ipc_ + ".journal";
  {
    auto journal = kvd::PageJournal::Create(path, kPage, {{0, kListed}}, 1000);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    (*journal)->SetGroup(0, "g");
    for (uint32_t id = 0; id < kListed; ++id) (*journal)->SetPage(0, id, 0, 0, true);
    ASSERT_TRUE((*journal)->Install().ok());
  }
  StartKvd(16);  // 16 pages: every listed page past the 16th is beyond the capacity
  const std::string log = kvd_.Log();
  EXPECT_NE(log.find("kvd: page 16 of device 0 is beyond the capacity now: not re-adopted"), std::string::npos)
      << log.substr(0, 4096);
  EXPECT_NE(log.find("kvd: device 0: pages beyond the capacity now, not re-adopted: " +
                     std::to_string(kListed - 16 - 5) + " more (only the first 5 were logged)"),
            std::string::npos) << log.substr(0, 4096);
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 200) << "the log grows with the journal";
  StopKvd();
}

}  // namespace
}  // namespace nanokv::testing
