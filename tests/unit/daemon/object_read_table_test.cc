// kvd's read table (daemon/objects/read_table.h; ARCHITECTURE.md, "Reads
// without a lease"): a located READY copy in the store names its epoch at
// its record, and every way its space can go (remove, eviction, a demotion,
// a reclaim) withdraws it first; readers get a fd that cannot write it.
// CheckInvariants (Check) checks every entry against the index after each
// step.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "tests/unit/daemon/object_store_fixture.h"

namespace nanokv::kvd {
namespace {

class ObjectReadTableTest : public ObjectStoreTest {
 protected:
  // The word a reader of the shared table finds for `plan`.
  uint32_t Entry(const ObjectPlan& plan) {
    auto share = store_->ShareReadTable();
    EXPECT_OK(share.status());
    if (!share.ok() || plan.read_entry == 0) return 0;
    size_t d = 0;
    while (d < share->devices.size() && share->devices[d] != plan.device) ++d;
    const size_t bytes = share->devices.size() * share->entries * sizeof(uint32_t);
    void* at = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, share->fd, 0);
    close(share->fd);
    EXPECT_NE(at, MAP_FAILED);
    if (at == MAP_FAILED) return 0;
    uint32_t word = 0;
    std::memcpy(&word, static_cast<const uint32_t*>(at) + d * share->entries + plan.read_entry - 1, sizeof(word));
    munmap(at, bytes);
    return word;
  }
};

TEST_F(ObjectReadTableTest, ALocatedCopyNamesItsEpochUntilRemoved) {
  Open();
  ASSERT_OK(PutByPlan("a", Pattern(kMiB, 1), 1, 1 * kMs));
  auto plan = store_->LocateUnleased("a", 2 * kMs);
  ASSERT_OK(plan.status());
  ASSERT_TRUE(plan->has_value());
  EXPECT_NE((*plan)->read_entry, 0u);
  EXPECT_EQ((*plan)->device, 1);
  EXPECT_EQ(Entry(**plan), (*plan)->epoch);
  EXPECT_EQ(store_->lease_count(), 0u) << "no lease";
  Check();
  ASSERT_OK(store_->Remove("a", 3 * kMs));
  EXPECT_EQ(Entry(**plan), 0u);
  Check();
  // The next object on that record names its own epoch, never the old one.
  ASSERT_OK(PutByPlan("b", Pattern(kMiB, 2), 1, 4 * kMs));
  auto next = store_->LocateUnleased("b", 5 * kMs);
  ASSERT_OK(next.status());
  ASSERT_TRUE(next->has_value());
  EXPECT_NE((*next)->epoch, (*plan)->epoch);
  EXPECT_EQ(Entry(**next), (*next)->epoch);
  Check();
  EXPECT_EQ(store_->LocateUnleased("a", 6 * kMs).status().code(), Code::kNotFound);
}

TEST_F(ObjectReadTableTest, EvictionAndReclaimWithdrawBeforeTheSpaceIsReused) {
  Open();
  std::vector<ObjectPlan> plans;
  for (int i = 0; i < 4; ++i) {
    const std::string key = "e" + std::to_string(i);
    ASSERT_OK(PutByPlan(key, Pattern(2 * kMiB, static_cast<uint8_t>(i)), 0, (1 + i) * kMs));
    auto plan = store_->LocateUnleased(key, (1 + i) * kMs);
    ASSERT_OK(plan.status());
    ASSERT_TRUE(plan->has_value());
    plans.push_back(**plan);
  }
  ASSERT_OK(store_->Evict(0, 0, 10 * kMs).status());
  Check();
  size_t withdrawn = 0;
  for (const ObjectPlan& plan : plans) {
    const bool there = store_->GetLocation(plan.key, 11 * kMs).ok();
    EXPECT_EQ(Entry(plan), there ? plan.epoch : 0u) << plan.key;
    withdrawn += there ? 0 : 1;
  }
  EXPECT_GT(withdrawn, 0u) << "the evict evicted";
  // A write reclaimed past write_timeout was never located: nothing to
  // withdraw, and the invariants hold after it.
  ASSERT_OK(store_->OpenForWrite("stuck", kMiB, 0, 12 * kMs).status());
  store_->Reclaim(12 * kMs + 2'000 * kMs);
  Check();
}

TEST_F(ObjectReadTableTest, ADemotionWithdrawsAndTheHostTierIsLeasedInstead) {
  config_.host_tier = 8 * kPage;
  Open();
  ASSERT_OK(PutByPlan("d", Pattern(2 * kMiB + 3, 4), 0, 1 * kMs));
  auto plan = store_->LocateUnleased("d", 2 * kMs);
  ASSERT_OK(plan.status());
  ASSERT_TRUE(plan->has_value());
  auto move = store_->BeginDemotion(0, 3 * kMs);
  ASSERT_TRUE(move.has_value());
  ASSERT_TRUE(store_->FinishMove(*move, store_->CopyMove(*move), 4 * kMs));
  EXPECT_EQ(Entry(**plan), 0u) << "its store copy is gone";
  Check();
  auto host = store_->LocateUnleased("d", 5 * kMs);
  ASSERT_OK(host.status());
  EXPECT_FALSE(host->has_value()) << "a host-tier read takes a lease";
  // Promoted back (the get above wanted it), it is a new copy, a new epoch.
  ASSERT_OK(CopyOut("d", 6 * kMs).status());
  EXPECT_GE(store_->RunTierWork(7 * kMs), 1u);
  auto back = store_->LocateUnleased("d", 8 * kMs);
  ASSERT_OK(back.status());
  ASSERT_TRUE(back->has_value());
  EXPECT_NE((*back)->epoch, (*plan)->epoch);
  EXPECT_EQ(Entry(**back), (*back)->epoch);
  Check();
}

TEST_F(ObjectReadTableTest, ReadersCannotWriteTheTable) {
  Open();
  auto share = store_->ShareReadTable();
  ASSERT_OK(share.status());
  EXPECT_EQ(share->entries, config_.max_objects == 0 ? kPage / sizeof(ObjectHeader) : config_.max_objects);
  EXPECT_EQ(share->devices, (std::vector<int>{0, 1}));
  const size_t bytes = share->devices.size() * share->entries * sizeof(uint32_t);
  EXPECT_EQ(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, share->fd, 0), MAP_FAILED);
  void* at = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, share->fd, 0);
  ASSERT_NE(at, MAP_FAILED);
  EXPECT_NE(mprotect(at, bytes, PROT_READ | PROT_WRITE), 0);
  const uint32_t forged = 7;
  EXPECT_EQ(write(share->fd, &forged, sizeof(forged)), -1);
  struct stat st {};
  ASSERT_EQ(fstat(share->fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "another uid cannot open it again";
  // Nor by opening it again for writing (as kvd's uid: the seal refuses).
  const std::string path = "/proc/self/fd/" + std::to_string(share->fd);
  const int again = open(path.c_str(), O_RDWR);
  if (again >= 0) {
    EXPECT_EQ(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0), MAP_FAILED);
    EXPECT_EQ(write(again, &forged, sizeof(forged)), -1);
    close(again);
  }
  munmap(at, bytes);
  close(share->fd);
}

}  // namespace
}  // namespace nanokv::kvd
