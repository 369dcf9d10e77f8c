// The /dev/shm state segment with real shared memory and real processes:
// writers are forked children where it matters (a crashed kvd, a writer in
// another process than its reader). Every test uses its own IPC names
// ("test_<pid>_<n>") and unlinks them at the end.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ipc/segment/layout.h"
#include "ipc/segment/process_identity.h"
#include "ipc/segment/segment_reader.h"
#include "ipc/segment/segment_writer.h"
#include "ipc/segment/seqlock.h"
#include "ipc/segment/shm_file.h"
#include "tests/unit/ipc/segment_test_util.h"

namespace nanokv::ipc {
namespace {

class SegmentTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& name : names_) (void)RemoveShm(ShmName(name));
  }

  std::string NewName() {
    static int counter = 0;
    names_.push_back("test_" + std::to_string(getpid()) + "_" + std::to_string(++counter));
    return names_.back();
  }

  static SegmentOptions Options(const std::string& name) {
    SegmentOptions options;
    options.ipc_name = name;
    options.backend = "host";
    options.page_bytes = 2u << 20;
    return options;
  }

  // A segment as a writer of this build would leave it, owned by (pid, ticks).
  static std::unique_ptr<Segment> RawSegment(const std::string& name, pid_t pid, uint64_t ticks) {
    auto s = std::make_unique<Segment>();
    s->header.magic = kSegmentMagic;
    s->header.layout_version = kSegmentLayoutVersion;
    s->header.total_bytes = sizeof(Segment);
    s->header.kvd_pid = pid;
    s->header.kvd_start_ticks = ticks;
    CopyString(s->header.ipc_name, name);
    return s;
  }

  // Writes `bytes` as the whole object /dev/shm/nanokv_<name>, bypassing the writer.
  static void WriteRaw(const std::string& name, const void* data, size_t bytes) {
    int fd = shm_open(("/" + ShmName(name)).c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(write(fd, data, bytes), static_cast<ssize_t>(bytes));
    close(fd);
  }

  static uint64_t OwnTicks() { return ProcessStartTicks(getpid()).value(); }

  // A pid that named a process which has exited and been reaped.
  static pid_t DeadPid() {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, nullptr, 0);
    return pid;
  }

  static bool Listed(const std::string& name) {
    auto entries = ListSegments();
    EXPECT_TRUE(entries.ok()) << entries.status().ToString();
    return entries.ok() && std::any_of(entries->begin(), entries->end(), [&](const SegmentEntry& e) {
             return e.ipc_name == name && e.kind == SegmentEntry::Kind::kReadable;
           });
  }

  std::vector<std::string> names_;
};

TEST(ProcessIdentityTest, ParsesStatLinesWhoseCommHasSpacesAndParentheses) {
  std::string line = "1234 (a) (b c)) S";
  for (int field = 4; field <= 21; ++field) line += " " + std::to_string(field);
  line += " 424242 999 0\n";
  auto stat = ParseProcStat(line);
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->start_ticks, 424242u);
  EXPECT_EQ(ParseProcStat("1234 no comm S 1 2").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseProcStat("1234 (x) S 1 2 3").status().code(), Code::kInvalidArgument);
}

TEST(ProcessIdentityTest, TellsLiveFromDeadZombieAndReused) {
  auto ticks = ProcessStartTicks(getpid());
  ASSERT_TRUE(ticks.ok()) << ticks.status().ToString();
  EXPECT_TRUE(ProcessAlive(getpid(), *ticks));
  EXPECT_FALSE(ProcessAlive(getpid(), *ticks + 1));  // the pid, reused by "another" process
  EXPECT_FALSE(ProcessAlive(0, 0));
  EXPECT_EQ(ProcessStartTicks(-1).status().code(), Code::kInvalidArgument);

  pid_t child = fork();
  if (child == 0) _exit(0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // a zombie now
  auto child_ticks = ProcessStartTicks(child);
  ASSERT_TRUE(child_ticks.ok());
  EXPECT_FALSE(ProcessAlive(child, *child_ticks));
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(ProcessAlive(child, *child_ticks));
  EXPECT_EQ(ProcessStartTicks(child).status().code(), Code::kNotFound);
}

TEST_F(SegmentTest, RoundTripsHeaderDevicesTenantsAndInstances) {
  const std::string name = NewName();
  auto writer = SegmentWriter::Create(Options(name));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();

  auto empty = ReadSegment(name);  // created, nothing published yet
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->segment.header.publish_count, 0u);
  EXPECT_EQ(empty->segment.header.tenant_count, 0u);

  ASSERT_OK((*writer)->Publish([](Segment& s) {
    FillFromCounter(s, 1);
    s.header.magic = 0;  // identity fields belong to the writer: restored
    s.header.kvd_pid = 1;
  }));
  auto snapshot = ReadSegment(name);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  const SegmentHeader& h = snapshot->segment.header;
  EXPECT_TRUE(snapshot->kvd_alive);
  EXPECT_EQ(h.magic, kSegmentMagic);
  EXPECT_EQ(h.layout_version, kSegmentLayoutVersion);
  EXPECT_EQ(h.total_bytes, sizeof(Segment));
  EXPECT_EQ(h.kvd_pid, getpid());
  EXPECT_EQ(h.kvd_start_ticks, OwnTicks());
  EXPECT_EQ(h.publish_count, 1u);
  EXPECT_EQ(h.seq % 2, 0u);
  EXPECT_GE(h.update_unix_ns, h.start_unix_ns);
  EXPECT_EQ(ReadString(h.ipc_name), name);
  EXPECT_EQ(ReadString(h.backend), "host");
  EXPECT_EQ(h.page_bytes, 2u << 20);
  EXPECT_EQ(h.device_count, 2u);
  EXPECT_EQ(h.tenant_count, kMaxTenants - 1);
  EXPECT_EQ(h.instance_count, 1u);
  EXPECT_EQ(ReadString(snapshot->segment.tenants[3].name), "tenant-1-3");
  EXPECT_EQ(snapshot->segment.devices[1].capacity_pages, 6u);
  EXPECT_TRUE(Consistent(snapshot->segment));

  // Fewer rows next time: the dropped ones read as zero, not as old data.
  ASSERT_OK((*writer)->Publish([](Segment& s) { s.header.tenant_count = 2; }));
  snapshot = ReadSegment(name);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->segment.header.publish_count, 2u);
  EXPECT_EQ(snapshot->segment.tenants[1].id, 2u);  // kept: fill edits the previous state
  EXPECT_EQ(snapshot->segment.tenants[2].id, 0u);
  EXPECT_EQ(ReadString(snapshot->segment.tenants[2].name), "");
}

TEST_F(SegmentTest, RefusesCountsPastCapacity) {
  const std::string name = NewName();
  auto writer = SegmentWriter::Create(Options(name));
  ASSERT_TRUE(writer.ok());
  Status status = (*writer)->Publish([](Segment& s) { s.header.tenant_count = kMaxTenants + 1; });
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_EQ((*writer)->publish_count(), 0u);
}

TEST_F(SegmentTest, RefusesASecondWriterForALiveName) {
  const std::string name = NewName();
  auto first = SegmentWriter::Create(Options(name));
  ASSERT_TRUE(first.ok());
  auto second = SegmentWriter::Create(Options(name));
  ASSERT_EQ(second.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("pid " + std::to_string(getpid())), std::string::npos);
  EXPECT_NE(second.status().message().find(name), std::string::npos);
  EXPECT_TRUE(ReadSegment(name).ok());  // the first one's segment is untouched
  EXPECT_EQ(RemoveStaleSegment(name).code(), Code::kFailedPrecondition);
}

TEST_F(SegmentTest, ReplacesTheSegmentOfACrashedKvd) {
  const std::string name = NewName();
  Child child;
  child.pid = fork();
  if (child.pid == 0) {  // a kvd that publishes, then dies without cleaning up
    auto writer = SegmentWriter::Create(Options(name));
    if (!writer.ok() || !(*writer)->Publish([](Segment& s) { FillFromCounter(s, 9); }).ok()) _exit(2);
    _exit(0);
  }
  ASSERT_EQ(child.Wait(), 0);
  auto left = ReadSegment(name);
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  EXPECT_FALSE(left->kvd_alive);
  EXPECT_EQ(left->segment.header.publish_count, 1u);
  EXPECT_TRUE(Listed(name));  // listed, marked dead by kvd_alive

  auto writer = SegmentWriter::Create(Options(name));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  auto now = ReadSegment(name);
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->kvd_alive);
  EXPECT_EQ(now->segment.header.kvd_pid, getpid());
  EXPECT_EQ(now->segment.header.publish_count, 0u);
}

TEST_F(SegmentTest, ReplacesSegmentsOfDeadOrReusedPidsAndForeignFiles) {
  struct Case {
    std::unique_ptr<Segment> segment;
    size_t bytes;
  };
  std::vector<Case> cases;
  cases.push_back({RawSegment("x", DeadPid(), 1), sizeof(Segment)});
  cases.push_back({RawSegment("x", getpid(), OwnTicks() + 1), sizeof(Segment)});  // pid reused
  cases.push_back({RawSegment("x", getpid(), OwnTicks()), sizeof(Segment)});
  cases.back().segment->header.magic = 0x1122334455667788ULL;  // not ours
  cases.push_back({RawSegment("x", getpid(), OwnTicks()), sizeof(Segment)});
  cases.back().segment->header.magic = 0;  // never initialised (no writer names it so)
  cases.push_back({RawSegment("x", getpid(), OwnTicks()), 16});  // too small
  cases.push_back({RawSegment("x", DeadPid(), 1), sizeof(Segment)});
  cases.back().segment->header.layout_version = 7;  // another version, dead
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const std::string name = NewName();
    WriteRaw(name, cases[i].segment.get(), cases[i].bytes);
    auto writer = SegmentWriter::Create(Options(name));
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    auto snapshot = ReadSegment(name);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    EXPECT_TRUE(snapshot->kvd_alive);
  }
}

TEST_F(SegmentTest, NeverReplacesALiveKvdOfAnotherLayoutVersion) {
  const std::string name = NewName();
  auto segment = RawSegment(name, getpid(), OwnTicks());
  segment->header.layout_version = kSegmentLayoutVersion + 1;
  WriteRaw(name, segment.get(), sizeof(Segment));
  EXPECT_EQ(SegmentWriter::Create(Options(name)).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(RemoveStaleSegment(name).code(), Code::kFailedPrecondition);
}

TEST_F(SegmentTest, ExactlyOneOfManyConcurrentKvdsWins) {
  const std::string name = NewName();
  constexpr int kContenders = 4;
  int start[2], results[2], quit[2];
  ASSERT_EQ(pipe(start), 0);
  ASSERT_EQ(pipe(results), 0);
  ASSERT_EQ(pipe(quit), 0);
  Child children[kContenders];
  for (Child& child : children) {
    child.pid = fork();
    if (child.pid != 0) continue;
    close(start[1]);
    close(quit[1]);
    char byte;
    // Returns (0 bytes) when the parent closes start[1]: all go at once.
    if (read(start[0], &byte, 1) < 0) _exit(3);
    auto writer = SegmentWriter::Create(Options(name));
    char result = writer.ok() ? 'W' : writer.status().code() == Code::kFailedPrecondition ? 'R' : 'E';
    if (write(results[1], &result, 1) != 1) _exit(2);
    if (read(quit[0], &byte, 1) < 0) _exit(4);  // a live kvd until the parent has looked
    _exit(0);  // no clean shutdown: TearDown unlinks
  }
  close(start[0]);
  close(start[1]);
  int winners = 0, refused = 0;
  for (int i = 0; i < kContenders; ++i) {
    char result = 0;
    ASSERT_EQ(read(results[0], &result, 1), 1);
    winners += result == 'W';
    refused += result == 'R';
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(refused, kContenders - 1);
  auto snapshot = ReadSegment(name);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  EXPECT_TRUE(snapshot->kvd_alive);
  close(quit[1]);
  for (Child& child : children) EXPECT_EQ(child.Wait(), 0);
  close(quit[0]);
  close(results[0]);
  close(results[1]);
}

TEST_F(SegmentTest, RefusesMalformedNames) {
  const std::string too_long(49, 'a');
  for (std::string bad : {std::string(), too_long, std::string(".hidden"), std::string("a/b"),
                          std::string("a b"), std::string("caf\xc3\xa9")}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(SegmentWriter::Create(Options(bad)).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(ReadSegment(bad).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(RemoveStaleSegment(bad).code(), Code::kInvalidArgument);
  }
  std::string longest = NewName();
  longest.resize(48, 'x');
  names_.push_back(longest);
  EXPECT_TRUE(SegmentWriter::Create(Options(longest)).ok());
}

TEST_F(SegmentTest, JudgesFilesByMagicAndVersionNotBySize) {
  const std::string live = NewName();
  auto writer = SegmentWriter::Create(Options(live));
  ASSERT_TRUE(writer.ok());
  EXPECT_TRUE(Listed(live));

  const std::string foreign = NewName(), newer = NewName(), small = NewName(), resized = NewName();
  auto segment = RawSegment(foreign, getpid(), OwnTicks());
  segment->header.magic = 0x1122334455667788ULL;  // right size, wrong magic
  WriteRaw(foreign, segment.get(), sizeof(Segment));
  segment = RawSegment(newer, getpid(), OwnTicks());
  segment->header.layout_version = kSegmentLayoutVersion + 1;
  WriteRaw(newer, segment.get(), sizeof(Segment));
  WriteRaw(small, segment.get(), 8);
  segment = RawSegment(resized, getpid(), OwnTicks());
  segment->header.total_bytes = sizeof(Segment) - 8;
  WriteRaw(resized, segment.get(), sizeof(Segment));

  EXPECT_FALSE(Listed(foreign));
  EXPECT_FALSE(Listed(newer));
  EXPECT_FALSE(Listed(small));
  EXPECT_EQ(ReadSegment(foreign).status().code(), Code::kInvalidArgument);
  Status status = ReadSegment(newer).status();
  EXPECT_EQ(status.code(), Code::kUnsupported);
  EXPECT_NE(status.message().find("layout version " + std::to_string(kSegmentLayoutVersion + 1)),
            std::string::npos) << status.ToString();
  EXPECT_EQ(ReadSegment(small).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadSegment(resized).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ReadSegment(NewName()).status().code(), Code::kNotFound);

  const std::string overfull = NewName();
  segment = RawSegment(overfull, getpid(), OwnTicks());
  segment->header.tenant_count = kMaxTenants + 1;  // a stable copy that would overrun
  WriteRaw(overfull, segment.get(), sizeof(Segment));
  EXPECT_EQ(ReadSegment(overfull).status().code(), Code::kInvalidArgument);
}

TEST_F(SegmentTest, AppliesModeWhateverTheUmaskAndGroup) {
  const std::string name = NewName();
  mode_t old_umask = umask(077);
  SegmentOptions options = Options(name);
  options.gid = getegid();
  auto writer = SegmentWriter::Create(options);
  umask(old_umask);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  struct stat st {};
  ASSERT_EQ(stat(ShmPath(name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u) << "readers only read: no write bit but kvd's";
  EXPECT_EQ(st.st_gid, getegid());
  EXPECT_EQ(st.st_size, static_cast<off_t>(sizeof(Segment)));
}

TEST_F(SegmentTest, RemovesItsSegmentAndOnlyItsOwn) {
  const std::string name = NewName();
  auto writer = SegmentWriter::Create(Options(name));
  ASSERT_TRUE(writer.ok());
  writer->reset();  // clean shutdown
  struct stat st {};
  EXPECT_NE(stat(ShmPath(name).c_str(), &st), 0);
  EXPECT_EQ(ReadSegment(name).status().code(), Code::kNotFound);

  // Someone else now holds the name (another kvd took over): left alone.
  auto again = SegmentWriter::Create(Options(name));
  ASSERT_TRUE(again.ok());
  ASSERT_OK(RemoveShm(ShmName(name)));
  auto other = RawSegment(name, DeadPid(), 1);
  WriteRaw(name, other.get(), sizeof(Segment));
  ASSERT_OK((*again)->Remove());
  ASSERT_OK((*again)->Remove());  // idempotent
  EXPECT_EQ(stat(ShmPath(name).c_str(), &st), 0);
  ASSERT_OK(RemoveStaleSegment(name));
  EXPECT_EQ(RemoveStaleSegment(name).code(), Code::kNotFound);
}

}  // namespace
}  // namespace nanokv::ipc
