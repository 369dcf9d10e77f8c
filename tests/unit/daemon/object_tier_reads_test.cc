// Gets of host-tier objects read the host tier's pages where they are
// (ARCHITECTURE.md, "The host tier"): the plan names the host tier's pages,
// a reader maps them read-only by the fd kvd hands out and copies; the get
// queues a promotion, which waits for the host tier's readers' leases.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/unit/daemon/object_store_fixture.h"

namespace nanokv::kvd {
namespace {

// Whether a child process of uid and gid 65534 (nobody), holding `fd`,
// opens /proc/self/fd/<fd> read-write. False where this process cannot
// change uid (not root): nothing to try then.
bool AnotherUidReopensReadWrite(int fd) {
  if (geteuid() != 0) return false;
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    _exit(open(path.c_str(), O_RDWR) >= 0 ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

class ObjectTierReadsTest : public ObjectStoreTest {
 protected:
  void SetUp() override {
    ObjectStoreTest::SetUp();
    config_.host_tier = 8 * kPage;
  }

  void Demote(uint64_t now_ns) {
    auto move = store_->BeginDemotion(0, now_ns);
    ASSERT_TRUE(move.has_value());
    ASSERT_TRUE(store_->FinishMove(*move, store_->CopyMove(*move), now_ns));
  }

  StoreDeviceStats Stats() { return store_->Stats()[0]; }
};

TEST_F(ObjectTierReadsTest, AGetOfAHostTierObjectReadsItsHostPagesByteExact) {
  Open();
  // Down first, so "h" lies across host pages at an odd offset.
  ASSERT_OK(PutByPlan("filler", Pattern(kMiB + 300, 1), 0, 1 * kMs));
  Demote(2 * kMs);
  const auto bytes = Pattern(3 * kMiB + 17, 5);
  ASSERT_OK(PutByPlan("h", bytes, 0, 3 * kMs));
  Demote(4 * kMs);
  Check();
  auto plan = store_->GetLocation("h", 5 * kMs);
  ASSERT_OK(plan.status());
  EXPECT_EQ(plan->tier, ObjectTier::kHost);
  EXPECT_EQ(plan->state, ObjectState::kReady);
  EXPECT_EQ(plan->store_bytes, 8 * kPage);  // the host tier's size
  EXPECT_EQ(plan->header_offset, 0u);
  ASSERT_FALSE(plan->spans.empty());
  for (size_t i = 0; i < plan->spans.size(); ++i) {
    EXPECT_EQ(plan->spans[i].page_id, plan->payload_offset / kPage + i);  // the tier's own page numbers
  }
  auto got = GetUnderLease("h", 6 * kMs);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, bytes);
  EXPECT_EQ(Stats().host_hits, 2u);  // a host hit each get
  EXPECT_EQ(Stats().gpu_hits, 0u);
  // The gets queued it for promotion: the next get reads the store's copy.
  EXPECT_GE(store_->RunTierWork(7 * kMs), 1u);
  Check();
  auto after = store_->GetLocation("h", 8 * kMs);
  ASSERT_OK(after.status());
  EXPECT_EQ(after->tier, ObjectTier::kGpu);
  got = GetUnderLease("h", 9 * kMs);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, bytes);
  EXPECT_EQ(Stats().gpu_hits, 2u);
}

TEST_F(ObjectTierReadsTest, HostTierFdsReadOnlyAndOnlyForItsPages) {
  Open();
  auto fd = store_->HostTierReadOnlyFd(0, 0);
  ASSERT_OK(fd.status());
  EXPECT_EQ(mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0), MAP_FAILED);
  void* page = mmap(nullptr, kPage, PROT_READ, MAP_SHARED, *fd, 0);
  ASSERT_NE(page, MAP_FAILED);
  EXPECT_NE(mprotect(page, kPage, PROT_READ | PROT_WRITE), 0);
  munmap(page, kPage);
  // Nor by opening it again read-write as another uid: the page is 0600.
  struct stat st {};
  ASSERT_EQ(fstat(*fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(AnotherUidReopensReadWrite(*fd));
  close(*fd);
  EXPECT_EQ(store_->HostTierReadOnlyFd(0, 8).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->HostTierReadOnlyFd(0, 0xffffffffu).status().code(), Code::kNotFound);
  EXPECT_FALSE(store_->HostTierReadOnlyFd(7, 0).ok());
}

TEST_F(ObjectTierReadsTest, NoHostTierNoHostFds) {
  config_.host_tier = 0;
  Open();
  EXPECT_EQ(store_->HostTierReadOnlyFd(0, 0).status().code(), Code::kNotFound);
}

// A reader copying out of the host tier holds a lease: the promotion its get
// asked for waits (its host space must not go under the reader), and a
// promotion already copying when the lease came is cancelled, then done
// once the reader is gone.
TEST_F(ObjectTierReadsTest, APromotionWaitsForTheHostTierReaders) {
  Open();
  const auto bytes = Pattern(2 * kMiB + 5, 8);
  ASSERT_OK(PutByPlan("p", bytes, 0, 1 * kMs));
  Demote(2 * kMs);
  auto lease = store_->AcquireLease("p", kHolder, 3 * kMs);
  ASSERT_OK(lease.status());
  auto read = CopyOut("p", 3 * kMs);  // queues the promotion
  ASSERT_OK(read.status());
  EXPECT_EQ(store_->RunTierWork(4 * kMs), 0u);  // leased: it waits
  EXPECT_EQ(store_->GetLocation("p", 4 * kMs)->tier, ObjectTier::kHost);
  ASSERT_OK(store_->ReleaseLease("p", lease->id, 5 * kMs));
  // A promotion under way when a reader comes: cancelled, the bytes stay.
  auto move = store_->BeginPromotion(0, 6 * kMs);
  ASSERT_TRUE(move.has_value());
  lease = store_->AcquireLease("p", kHolder, 6 * kMs);
  ASSERT_OK(lease.status());
  EXPECT_FALSE(store_->FinishMove(*move, store_->CopyMove(*move), 7 * kMs));
  Check();
  read = CopyOut("p", 7 * kMs);
  ASSERT_OK(read.status());
  EXPECT_EQ(*read, bytes);
  EXPECT_EQ(store_->RunTierWork(8 * kMs), 0u);  // still leased
  ASSERT_OK(store_->ReleaseLease("p", lease->id, 9 * kMs));
  EXPECT_EQ(store_->RunTierWork(10 * kMs), 1u);  // still wanted: up it goes
  Check();
  auto got = GetUnderLease("p", 11 * kMs);
  ASSERT_OK(got.status());
  EXPECT_EQ(*got, bytes);
  EXPECT_EQ(Stats().promotions, 1u);
  EXPECT_EQ(Stats().host_used, 0u);
}

// A remove races a reader of the host tier: refused while it reads, then
// gone; a remove mid-promotion still wins.
TEST_F(ObjectTierReadsTest, ARemoveWaitsForAHostTierReader) {
  Open();
  ASSERT_OK(PutByPlan("r", Pattern(kMiB, 2), 0, 1 * kMs));
  Demote(2 * kMs);
  auto lease = store_->AcquireLease("r", kHolder, 3 * kMs);
  ASSERT_OK(lease.status());
  EXPECT_EQ(store_->Remove("r", 3 * kMs).code(), Code::kFailedPrecondition);
  auto read = CopyOut("r", 3 * kMs);
  ASSERT_OK(read.status());
  EXPECT_EQ(*read, Pattern(kMiB, 2));
  ASSERT_OK(store_->ReleaseLease("r", lease->id, 4 * kMs));
  ASSERT_OK(store_->Remove("r", 4 * kMs));
  Check();
  EXPECT_EQ(store_->GetLocation("r", 5 * kMs).status().code(), Code::kNotFound);
  EXPECT_EQ(Stats().host_used, 0u);
}

}  // namespace
}  // namespace nanokv::kvd
