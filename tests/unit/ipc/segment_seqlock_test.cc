// No torn rows, ever: a writer publishes tens of thousands of states in which
// every field of every row derives from one counter, while a reader checks
// that each copy it accepts comes whole from one publish. Run twice: between
// threads on one buffer (so ThreadSanitizer can check the seqlock's atomics),
// and between processes through /dev/shm with the real writer and reader
// (which copies with pread: SegmentFile::TryReadStable).
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ipc/segment/layout.h"
#include "ipc/segment/segment_reader.h"
#include "ipc/segment/segment_writer.h"
#include "ipc/segment/seqlock.h"
#include "ipc/segment/shm_file.h"
#include "tests/unit/ipc/segment_test_util.h"
#include "tests/util/stall_watch.h"

namespace nanokv::ipc {
namespace {

// Each publish rewrites the ~68 KiB segment word by word; under TSan every
// word is an instrumented atomic, and 30000 once took over two minutes on a
// loaded 2-core machine. A tenth still races readers thousands of times.
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kPublishes = 3000;
#else
constexpr uint64_t kPublishes = 30000;
#endif
constexpr int kMinReads = 2000;
// The loops run until their work is done, however long that takes; only
// this long without any progress toward it fails them (a stuck writer or a
// starved reader), never a slow machine.
constexpr auto kPatience = std::chrono::seconds(60);

// How far a loop is toward `n` of something: counts past the goal are not progress.
uint64_t Toward(uint64_t count, uint64_t n) { return count < n ? count : n; }

struct ReadCounts {
  int accepted = 0;        // stable copies
  int torn_accepted = 0;   // stable copies that mix publishes: must stay 0
  int rejected = 0;        // copies the seqlock threw away
  int torn_rejected = 0;   // ... which really were torn (shows the check can see tearing)
  int distinct = 0;        // accepted copies of a publish not seen just before
  uint64_t last = 0;       // publish_count of the last accepted copy
  void Accept(const Segment& copy) {
    ++accepted;
    if (!Consistent(copy)) ++torn_accepted;
    if (copy.header.publish_count != last) ++distinct;
    last = copy.header.publish_count;
  }
  void Reject(const Segment& copy) {
    ++rejected;
    if (!Consistent(copy)) ++torn_rejected;
  }
};

void Report(const char* what, const ReadCounts& counts) {
  std::printf("%s: %d accepted (%d distinct publishes), %d rejected of which %d torn\n", what,
              counts.accepted, counts.distinct, counts.rejected, counts.torn_rejected);
}

TEST(SeqlockTest, NoTornCopiesBetweenThreads) {
  auto shared = std::make_unique<Segment>();  // stands in for the mapping
  std::atomic<uint64_t> published{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    auto staged = std::make_unique<Segment>();
    for (uint64_t c = 1; !stop.load(std::memory_order_relaxed); ++c) {
      std::memset(staged.get(), 0, sizeof(Segment));  // SegmentWriter zeroes unused rows
      FillFromCounter(*staged, c);
      staged->header.publish_count = c;
      SeqlockPublish(shared.get(), *staged);
      published.store(c, std::memory_order_relaxed);
    }
  });
  ReadCounts counts;
  auto copy = std::make_unique<Segment>();
  nanokv::testing::StallWatch watch(kPatience);
  bool stalled = false;
  while ((counts.accepted < kMinReads || published.load() < kPublishes / 3) && !stalled) {
    if (SeqlockTryRead(shared.get(), copy.get())) {
      counts.Accept(*copy);
    } else {
      counts.Reject(*copy);
    }
    stalled = watch.Stalled(Toward(counts.accepted, kMinReads) + Toward(published.load(), kPublishes / 3));
  }
  stop = true;
  writer.join();
  Report("threads", counts);
  EXPECT_FALSE(stalled) << "no progress for " << kPatience.count() << " s";
  EXPECT_EQ(counts.torn_accepted, 0);
  EXPECT_GE(counts.accepted, kMinReads);
  EXPECT_GE(published.load(), kPublishes / 3);
  EXPECT_GT(counts.distinct, 1);
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

TEST(SeqlockTest, NoTornReadsAcrossProcesses) {
  const std::string name = "test_" + std::to_string(getpid()) + "_seqlock";
  struct Unlink {
    std::string shm_name;
    ~Unlink() { (void)RemoveShm(shm_name); }
  } unlink_at_exit{ShmName(name)};  // after the child is gone, even on failure
  int ready[2], quit[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(quit), 0);
  Child child;
  child.pid = fork();
  if (child.pid == 0) {
    // The writer: kvd's role. At least kPublishes, then on until told to stop,
    // so the reader always has a moving target. Pauses now and then (a real
    // kvd publishes on changes, not back to back), so readers see even seq.
    close(ready[0]);
    close(quit[1]);
    SegmentOptions options;
    options.ipc_name = name;
    auto writer = SegmentWriter::Create(options);
    if (!writer.ok() || write(ready[1], "r", 1) != 1) _exit(2);
    for (uint64_t c = 1;; ++c) {
      if (!(*writer)->Publish([c](Segment& s) { FillFromCounter(s, c); }).ok()) _exit(3);
      if (c == kPublishes && write(ready[1], "d", 1) != 1) _exit(4);
      if (c % 16 == 0) {
        if (c >= kPublishes && Readable(quit[0])) break;
        usleep(20);
      }
    }
    writer->reset();  // clean shutdown removes the segment
    _exit(0);
  }
  close(ready[1]);
  close(quit[0]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'r');

  // The reader's way in (never a mapping: a truncation would SIGBUS it).
  auto file = SegmentFile::Open(ShmPath(name));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ReadCounts api, raw;
  int busy = 0;
  bool writer_done = false;
  auto copy = std::make_unique<Segment>();
  nanokv::testing::StallWatch watch(kPatience);
  bool stalled = false;
  while (!(writer_done && api.accepted >= kMinReads) && !stalled) {
    // The public reader, as kvctl uses it.
    auto snapshot = ReadSegment(name);
    if (snapshot.ok()) {
      api.Accept(snapshot->segment);
    } else {
      ASSERT_EQ(snapshot.status().code(), Code::kUnavailable) << snapshot.status().ToString();
      ++busy;
    }
    // And single pread attempts on one long-lived open file, keeping the rejects.
    auto stable = file->TryReadStable(copy.get());
    ASSERT_TRUE(stable.ok()) << stable.status().ToString();
    if (*stable) {
      raw.Accept(*copy);
    } else {
      raw.Reject(*copy);
    }
    if (!writer_done && Readable(ready[0])) writer_done = read(ready[0], &byte, 1) == 1 && byte == 'd';
    // The writer's progress shows in the publish counts the reader accepts.
    stalled = watch.Stalled(Toward(api.accepted, kMinReads) + Toward(api.last, kPublishes) +
                            Toward(raw.last, kPublishes) + (writer_done ? 1 : 0));
  }
  EXPECT_FALSE(stalled) << "no progress for " << kPatience.count() << " s";
  // The writer has done at least kPublishes: a reader sees that far, whole.
  bool read_last = false;
  for (int attempt = 0; attempt < 100 && !read_last; ++attempt) {
    auto last = ReadSegment(name);
    if (!last.ok()) continue;
    read_last = true;
    EXPECT_GE(last->segment.header.publish_count, kPublishes);
    EXPECT_TRUE(Consistent(last->segment));
  }
  EXPECT_TRUE(read_last);
  ASSERT_EQ(write(quit[1], "q", 1), 1);
  EXPECT_EQ(child.Wait(), 0);
  close(ready[0]);
  close(quit[1]);
  Report("processes, ReadSegment", api);
  Report("processes, raw", raw);
  std::printf("ReadSegment busy: %d\n", busy);

  EXPECT_TRUE(writer_done);
  EXPECT_EQ(api.torn_accepted, 0);
  EXPECT_EQ(raw.torn_accepted, 0);
  EXPECT_GE(api.accepted, kMinReads);
  EXPECT_GT(api.distinct, 10);  // it read while the writer wrote, not one frozen state
  EXPECT_EQ(ReadSegment(name).status().code(), Code::kNotFound);  // removed by the writer
}

}  // namespace
}  // namespace nanokv::ipc
