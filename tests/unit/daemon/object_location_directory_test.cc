// The read table's location directory (ipc/segment/location_directory.h):
// every READY copy in the store listed by key from its commit on, with its
// entry's epoch, taken out before its space or record can go elsewhere; a
// key too long for a record, or whose bucket is full, is left to requests.
// A reader maps the share as libkv does and finds keys with DirectoryFind;
// CheckInvariants (Check) checks every listed record against the index.
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ipc/segment/location_directory.h"
#include "tests/unit/daemon/object_store_fixture.h"

namespace nanokv::kvd {
namespace {

uint64_t Hash(const std::string& key) { return XXH64(key.data(), key.size(), 0); }

class ObjectLocationDirectoryTest : public ObjectStoreTest {
 protected:
  void TearDown() override {
    if (at_ != nullptr) munmap(at_, bytes_);
    ObjectStoreTest::TearDown();
  }

  // Maps the share read-only, as a reader does.
  void MapShare() {
    auto share = store_->ShareReadTable();
    ASSERT_OK(share.status());
    ASSERT_NE(share->buckets, 0u);
    devices_ = share->devices;
    layout_ = {share->devices.size(), share->entries, share->buckets};
    bytes_ = layout_.Bytes();
    at_ = mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, share->fd, 0);
    close(share->fd);
    ASSERT_NE(at_, MAP_FAILED);
  }

  std::optional<ipc::DirectoryEntry> Find(const std::string& key) {
    return ipc::DirectoryFind(static_cast<const uint64_t*>(at_), layout_, key, Hash(key));
  }
  uint32_t Word(const ipc::DirectoryEntry& e) {
    uint32_t word = 0;
    std::memcpy(&word, static_cast<const uint32_t*>(at_) + e.device_index * layout_.entries + e.read_entry - 1,
                sizeof(word));
    return word;
  }
  // The listing matches where kvd says the copy lies, and its entry holds
  // the epoch (what a reader's check after its copy needs).
  void ExpectListedAsLocated(const std::string& key, uint64_t now_ns) {
    auto found = Find(key);
    ASSERT_TRUE(found.has_value()) << key;
    auto plan = store_->GetLocation(key, now_ns);
    ASSERT_OK(plan.status());
    EXPECT_EQ(devices_[found->device_index], plan->device);
    EXPECT_EQ(found->payload_offset, plan->payload_offset);
    EXPECT_EQ(found->bytes, plan->bytes_total);
    EXPECT_EQ(found->epoch, plan->epoch);
    EXPECT_EQ(Word(*found), plan->epoch);
  }

  void* at_ = nullptr;
  size_t bytes_ = 0;
  ipc::DirectoryLayout layout_;
  std::vector<int> devices_;
};

TEST_F(ObjectLocationDirectoryTest, ACommittedCopyIsListedWithNoLocateUntilItIsRemoved) {
  Open();
  MapShare();
  ASSERT_OK(store_->OpenForWrite("w", kMiB, 0, 1 * kMs).status());
  EXPECT_FALSE(Find("w").has_value()) << "WRITING is not listed";
  ASSERT_OK(PutByPlan("a", Pattern(kMiB + 5, 1), 1, 2 * kMs));
  ExpectListedAsLocated("a", 3 * kMs);
  EXPECT_FALSE(Find("b").has_value());
  EXPECT_FALSE(Find("").has_value());
  Check();
  ASSERT_OK(store_->Remove("a", 4 * kMs));
  EXPECT_FALSE(Find("a").has_value());
  Check();
  // Put again: listed at its new epoch.
  ASSERT_OK(PutByPlan("a", Pattern(kMiB, 2), 0, 5 * kMs));
  ExpectListedAsLocated("a", 6 * kMs);
  Check();
}

TEST_F(ObjectLocationDirectoryTest, EvictionTakesTheListingOut) {
  Open();
  MapShare();
  PutMany("e", 4, 2 * kMiB);
  for (int i = 0; i < 4; ++i) ExpectListedAsLocated("e" + std::to_string(i), 10 * kMs);
  ASSERT_OK(store_->Evict(0, 0, 20 * kMs).status());
  Check();
  size_t gone = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string key = "e" + std::to_string(i);
    const bool there = store_->GetLocation(key, 21 * kMs).ok();
    EXPECT_EQ(Find(key).has_value(), there) << key;
    gone += there ? 0 : 1;
  }
  EXPECT_GT(gone, 0u) << "the evict evicted";
}

TEST_F(ObjectLocationDirectoryTest, ADemotionTakesTheListingOutAndAPromotionListsTheNewCopy) {
  config_.host_tier = 8 * kPage;
  Open();
  MapShare();
  ASSERT_OK(PutByPlan("d", Pattern(2 * kMiB + 3, 4), 0, 1 * kMs));
  ExpectListedAsLocated("d", 2 * kMs);
  const uint32_t first = Find("d").value().epoch;
  auto move = store_->BeginDemotion(0, 3 * kMs);
  ASSERT_TRUE(move.has_value());
  ASSERT_TRUE(store_->FinishMove(*move, store_->CopyMove(*move), 4 * kMs));
  EXPECT_FALSE(Find("d").has_value()) << "in the host tier: read under a lease";
  Check();
  ASSERT_OK(CopyOut("d", 5 * kMs).status());  // wanted back
  EXPECT_GE(store_->RunTierWork(6 * kMs), 1u);
  auto back = Find("d");
  ASSERT_TRUE(back.has_value()) << "promoted: listed again";
  EXPECT_NE(back->epoch, first);
  ExpectListedAsLocated("d", 7 * kMs);
  Check();
}

TEST_F(ObjectLocationDirectoryTest, LongKeysAndAFullBucketAreLeftToRequests) {
  Open();
  MapShare();
  std::string long_key(ipc::kDirectoryKeyBytes + 1, 'k');
  ASSERT_OK(PutByPlan(long_key, Pattern(4096, 1), 0, 1 * kMs));
  EXPECT_FALSE(Find(long_key).has_value());
  std::string longest(ipc::kDirectoryKeyBytes, 'k');
  ASSERT_OK(PutByPlan(longest, Pattern(4096, 2), 0, 2 * kMs));
  ExpectListedAsLocated(longest, 3 * kMs);
  // Keys of one bucket, one more than it holds.
  std::vector<std::string> same;
  const uint64_t bucket = Hash("b0") & (layout_.buckets - 1);
  for (int i = 0; same.size() <= ipc::kDirectorySlots; ++i) {
    const std::string key = "b" + std::to_string(i);
    if ((Hash(key) & (layout_.buckets - 1)) == bucket) same.push_back(key);
  }
  for (size_t i = 0; i < same.size(); ++i) {
    ASSERT_OK(PutByPlan(same[i], Pattern(4096, static_cast<uint8_t>(i)), 1, (10 + i) * kMs));
  }
  for (size_t i = 0; i < ipc::kDirectorySlots; ++i) ExpectListedAsLocated(same[i], 30 * kMs);
  EXPECT_FALSE(Find(same.back()).has_value()) << "its bucket was full";
  Check();
  // A slot freed is taken by the next commit there.
  ASSERT_OK(store_->Remove(same[0], 31 * kMs));
  EXPECT_FALSE(Find(same[0]).has_value());
  ASSERT_OK(PutByPlan(same[0], Pattern(4096, 9), 0, 32 * kMs));
  ExpectListedAsLocated(same[0], 33 * kMs);
  Check();
}

// A reader finds nothing outside the file, whatever the words hold (a
// torn read, or a kvd of another layout): every index is range-checked.
TEST(LocationDirectoryFindTest, AnyWordsAreReadWithinTheLayout) {
  const ipc::DirectoryLayout layout{2, 64, 16};
  std::vector<uint64_t> words(layout.Words());
  std::mt19937_64 random(7);
  for (int round = 0; round < 2000; ++round) {
    for (uint64_t& w : words) {
      const uint64_t r = random();
      // Mostly small numbers, so slots name records and keys match lengths.
      w = round % 2 ? r : (r % 3 == 0 ? (r >> 8) % 200 : r);
    }
    const std::string key = "k" + std::to_string(round % 11);
    auto found = ipc::DirectoryFind(words.data(), layout, key, random());
    if (found) {
      EXPECT_LT(found->device_index, layout.devices);
      EXPECT_GE(found->read_entry, 1u);
      EXPECT_LE(found->read_entry, layout.entries);
    }
  }
}

}  // namespace
}  // namespace nanokv::kvd
