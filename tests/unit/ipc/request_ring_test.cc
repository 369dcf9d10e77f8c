// The request ring (ipc/ring/request_ring.h), both ends in one process:
// messages in order across the wrap, a full ring refused, the peer's
// impossible indices and cells reported (never read past the ring), the
// memfd's checks, and the futex wake-up between two threads.
#include "ipc/ring/request_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/status_matchers.h"

namespace nanokv::ipc {
namespace {

std::vector<std::byte> Bytes(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string Text(const std::vector<std::byte>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// kvd's end and the client's, over one memfd.
struct Pair {
  RequestRing kvd;
  RequestRing client;
  void* raw = nullptr;  // a third mapping, to scribble through
  int fd = -1;
  ~Pair() {
    if (raw != nullptr) munmap(raw, kRingFileBytes);
    if (fd >= 0) close(fd);
  }
};

std::unique_ptr<Pair> MakePair() {
  auto p = std::make_unique<Pair>();
  auto kvd = RequestRing::Create(&p->fd);
  EXPECT_TRUE(kvd.ok()) << kvd.status().ToString();
  p->kvd = std::move(*kvd);
  auto client = RequestRing::Attach(p->fd);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  p->client = std::move(*client);
  p->raw = mmap(nullptr, kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
  EXPECT_NE(p->raw, MAP_FAILED);
  return p;
}

RingHeader& Header(Pair& p) { return *static_cast<RingHeader*>(p.raw); }

TEST(RequestRingTest, MessagesArriveWholeAndInOrderAcrossTheWrap) {
  auto p = MakePair();
  std::vector<std::byte> got;
  ASSERT_FALSE(*p->kvd.Pop(&got));
  // Enough rounds of odd sizes that both rings wrap many times.
  for (int i = 0; i < 2000; ++i) {
    const std::string request = "request " + std::to_string(i) + std::string(i % 997, 'x');
    ASSERT_OK(p->client.Push(Bytes(request)));
    ASSERT_TRUE(p->kvd.HasIncoming());
    ASSERT_TRUE(*p->kvd.Pop(&got));
    EXPECT_EQ(Text(got), request);
    const std::string reply = "reply " + std::to_string(i) + std::string(i % 1013, 'y');
    ASSERT_OK(p->kvd.Push(Bytes(reply)));
    ASSERT_TRUE(*p->client.Pop(&got));
    EXPECT_EQ(Text(got), reply);
  }
  EXPECT_FALSE(p->kvd.HasIncoming());
  EXPECT_FALSE(*p->client.Pop(&got));
}

TEST(RequestRingTest, AFullRingAndAnOversizedMessageAreRefused) {
  auto p = MakePair();
  const std::vector<std::byte> big(kMaxRingMessageBytes, std::byte{7});
  int pushed = 0;
  Status last;
  while ((last = p->client.Push(big)).ok()) ++pushed;
  EXPECT_EQ(last.code(), Code::kResourceExhausted);
  const size_t cells_each = (kMaxRingMessageBytes + kRingCellDataBytes - 1) / kRingCellDataBytes;
  EXPECT_EQ(pushed, static_cast<int>(kRingCells / cells_each));
  EXPECT_EQ(p->client.Push(std::vector<std::byte>(kMaxRingMessageBytes + 1)).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(p->client.Push({}).code(), Code::kInvalidArgument);
  std::vector<std::byte> got;
  ASSERT_TRUE(*p->kvd.Pop(&got));  // room again
  EXPECT_EQ(got, big);
  EXPECT_OK(p->client.Push(big));
}

RingCell* ToKvdCells(Pair& p) {
  return reinterpret_cast<RingCell*>(static_cast<std::byte*>(p.raw) + kRingHeaderBytes);
}

TEST(RequestRingTest, ImpossibleIndicesAndEntriesAreFaultsNotReads) {
  std::vector<std::byte> got;
  {  // a cell whose stamp is of no lap (neither this one nor the last)
    auto p = MakePair();
    ToKvdCells(*p)[0].stamp = 12345;
    EXPECT_TRUE(p->kvd.HasIncoming());
    EXPECT_EQ(p->kvd.Pop(&got).status().code(), Code::kProtocolError);
  }
  {  // the last lap's stamp, or none: nothing there
    auto p = MakePair();
    ToKvdCells(*p)[0].stamp = static_cast<uint32_t>(1 - kRingCells);
    EXPECT_FALSE(p->kvd.HasIncoming());
    EXPECT_FALSE(*p->kvd.Pop(&got));
  }
  {  // a first cell's length of nothing, or more than any message
    auto p = MakePair();
    ASSERT_OK(p->client.Push(Bytes("hello")));
    const uint32_t lies[] = {0, kMaxRingMessageBytes + 1, 0xffffffffu};
    for (uint32_t lie : lies) {
      ToKvdCells(*p)[0].length = lie;
      EXPECT_EQ(p->kvd.Pop(&got).status().code(), Code::kProtocolError) << lie;
    }
  }
  {  // a message whose other cells are not its: a stale stamp, or a length
    auto p = MakePair();
    ASSERT_OK(p->client.Push(Bytes(std::string(100, 'm'))));  // two cells
    ToKvdCells(*p)[1].stamp = 0;
    EXPECT_EQ(p->kvd.Pop(&got).status().code(), Code::kProtocolError);
    ToKvdCells(*p)[1].stamp = 2;
    ToKvdCells(*p)[1].length = 7;
    EXPECT_EQ(p->kvd.Pop(&got).status().code(), Code::kProtocolError);
    ToKvdCells(*p)[1].length = 0;
    ASSERT_TRUE(*p->kvd.Pop(&got));
    EXPECT_EQ(Text(got), std::string(100, 'm'));
  }
  {  // the reader's index (for kvd's replies) runs ahead of what kvd wrote:
     // read when kvd's own copy says the ring is full, and a fault then
    auto p = MakePair();
    Header(*p).to_client.head = uint64_t{1} << 40;
    Status pushed;
    size_t pushes = 0;
    while (pushes <= kRingCells && (pushed = p->kvd.Push(Bytes("reply"))).ok()) ++pushes;
    EXPECT_EQ(pushed.code(), Code::kProtocolError) << pushed.ToString();
    EXPECT_EQ(pushes, kRingCells);  // one cell a message; never past the ring
  }
}

// Stamps are 32 bits: every 2^32 cells a cell's own stamp is 0, which in
// the first lap alone means "never written".
TEST(RequestRingTest, StampsAcrossTheirWrap) {
  const uint64_t wrap = (uint64_t{1} << 32) - 1;  // the cell whose stamp is 0
  EXPECT_EQ(RingStampAt(wrap), 0u);
  EXPECT_FALSE(RingCellHoldsNothing(wrap, 0)) << "its own stamp: a message";
  EXPECT_TRUE(RingCellHoldsNothing(wrap, static_cast<uint32_t>(wrap + 1 - kRingCells))) << "last lap's";
  EXPECT_TRUE(RingCellHoldsNothing(5, 0)) << "never written, first lap";
  EXPECT_FALSE(RingCellHoldsNothing(5, 6));
  EXPECT_FALSE(RingCellHoldsNothing(kRingCells + 5, 0)) << "0 after the first lap is a scribble";
  EXPECT_TRUE(RingCellHoldsNothing(kRingCells + 5, 6)) << "last lap's";
  EXPECT_FALSE(RingCellHoldsNothing(kRingCells + 5, 12345)) << "of no lap: a scribble";
}

TEST(RequestRingTest, RandomScribblesNeverReadOutsideTheRing) {
  std::mt19937_64 rng(20261126);
  std::vector<std::byte> got;
  for (int round = 0; round < 2000; ++round) {
    auto p = MakePair();
    for (int i = 0; i < round % 5; ++i) ASSERT_OK(p->client.Push(Bytes("request")));
    auto* words = static_cast<uint64_t*>(p->raw);
    const size_t header_words = sizeof(RingHeader) / 8;
    for (int i = 0; i < 4; ++i) {
      size_t at = rng() % (header_words + 64);
      if (at >= header_words) at = (kRingHeaderBytes / 8) + (at - header_words);
      words[at] = rng() % 3 == 0 ? rng() : rng() % (2 * kRingDataBytes);
    }
    for (int i = 0; i < 8; ++i) {
      auto popped = p->kvd.Pop(&got);
      if (!popped.ok() || !*popped) break;
      EXPECT_LE(got.size(), kMaxRingMessageBytes);
    }
    (void)p->kvd.Push(Bytes("reply"));
  }
}

TEST(RequestRingTest, AttachChecksTheMemory) {
  int fd = memfd_create("not-a-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, kRingFileBytes), 0);
  EXPECT_EQ(RequestRing::Attach(fd).status().code(), Code::kProtocolError);  // not sealed
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  EXPECT_EQ(RequestRing::Attach(fd).status().code(), Code::kProtocolError);  // no magic
  close(fd);
  fd = memfd_create("small", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  auto small = RequestRing::Attach(fd);
  EXPECT_EQ(small.status().code(), Code::kProtocolError);
  EXPECT_NE(small.status().message().find("4096 bytes"), std::string::npos);
  close(fd);
  // kvd's memory cannot be made to fault it: its size is sealed.
  int ring_fd = -1;
  auto ring = RequestRing::Create(&ring_fd);
  ASSERT_TRUE(ring.ok());
  EXPECT_NE(ftruncate(ring_fd, 4096), 0);
  EXPECT_NE(ftruncate(ring_fd, 2 * kRingFileBytes), 0);
  close(ring_fd);
}

TEST(RequestRingTest, ASleepingClientIsWokenByKvdsReply) {
  auto p = MakePair();
  std::atomic<bool> got_it{false};
  std::thread client([&] {
    std::vector<std::byte> got;
    while (true) {
      auto popped = p->client.Pop(&got);
      ASSERT_TRUE(popped.ok());
      if (*popped) break;
      p->client.WaitIncoming(std::chrono::hours(1));  // only the wake ends it
    }
    got_it = true;
  });
  // Wait until the client sleeps: kvd's reply must wake it, not a timeout.
  auto* header = &Header(*p);
  while (std::atomic_ref<uint32_t>(header->to_client.sleeping).load() == 0) std::this_thread::yield();
  EXPECT_TRUE(p->kvd.PeerAsleep());
  ASSERT_OK(p->kvd.Push(Bytes("reply")));
  p->kvd.WakeClient();
  client.join();
  EXPECT_TRUE(got_it);
}

}  // namespace
}  // namespace nanokv::ipc
