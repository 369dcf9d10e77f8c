// The object journal's tiers (object_store.host_tier across a restart):
// a host-tier record round-trips with its tier; a record with a tier that
// is none, or a host-tier record the device's geometry cannot hold, is
// skipped, counted and named, as any forged record is; a version 1 file
// (no tiers) is still read. And the scan: host-tier objects come back
// without a header to vouch for them, a move cut by the kill comes back in
// exactly one tier, and a host tier that did not come back drops its
// objects, naming them.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/objects/object_index.h"
#include "daemon/objects/object_journal.h"
#include "daemon/objects/object_recovery.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

constexpr uint64_t kPage = 64 * 1024;
constexpr uint32_t kSlots = kPage / sizeof(ObjectHeader);
constexpr uint32_t kUid = 1001;

JournaledObject Object(const std::string& key, Tier tier, uint32_t slot, uint32_t epoch, uint64_t offset,
                       uint64_t bytes, uint64_t seq) {
  JournaledObject o;
  o.key = key;
  o.tier = tier;
  o.committed = true;
  o.slot = slot;
  o.epoch = epoch;
  o.owner = kUid;
  o.seq = seq;
  o.payload_offset = offset;
  o.bytes_total = bytes;
  return o;
}

class ObjectJournalTiersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/nanokv-tiers-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  // One device: 8 store pages, 1 arena page, 64 records, a host tier of
  // `host_pages` pages.
  std::unique_ptr<ObjectJournal> Make(uint32_t host_pages) {
    ObjectJournal::Layout layout;
    layout.device = 0;
    for (uint32_t i = 0; i < 8; ++i) layout.pages.push_back(i);
    layout.arena_pages = 1;
    layout.slots_per_page = kSlots;
    layout.max_objects = 64;
    layout.host_pages = host_pages;
    auto journal = ObjectJournal::Create(dir_ + "/j.objects", kPage, {layout});
    EXPECT_TRUE(journal.ok()) << journal.status().ToString();
    return journal.ok() ? std::move(*journal) : nullptr;
  }
  static Result<JournaledStores> Decode(const ObjectJournal& j) {
    std::vector<std::byte> bytes(j.bytes().begin(), j.bytes().end());
    return ObjectJournal::Decode(bytes);
  }

  std::string dir_;
};

TEST_F(ObjectJournalTiersTest, AHostTierRecordRoundTripsWithItsTier) {
  auto journal = Make(4);
  ASSERT_NE(journal, nullptr);
  journal->Record(0, 0, Object("k:gpu", Tier::kGpu, 3, 7, kPage, 100, 1));
  journal->Record(0, 1, Object("k:host", Tier::kHost, 0, 5, 2 * kPage + 256, kPage, 2));
  auto decoded = Decode(*journal);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const JournaledStore& store = decoded->devices[0];
  EXPECT_EQ(store.host_pages, 4u);
  EXPECT_EQ(store.bad_records, 0u);
  ASSERT_EQ(store.objects.size(), 2u);
  EXPECT_EQ(store.objects[0].tier, Tier::kGpu);
  EXPECT_EQ(store.objects[1].key, "k:host");
  EXPECT_EQ(store.objects[1].tier, Tier::kHost);
  EXPECT_EQ(store.objects[1].payload_offset, 2 * kPage + 256);
  EXPECT_EQ(store.objects[1].epoch, 5u);
}

TEST_F(ObjectJournalTiersTest, ARecordWithABadTierIsSkippedCountedAndNamed) {
  auto journal = Make(4);
  ASSERT_NE(journal, nullptr);
  journal->Record(0, 0, Object("k:whole", Tier::kHost, 0, 5, 0, 100, 1));
  // Each with a checksum that matches: only its fields give it away.
  journal->Record(0, 1, Object("k:tier7", static_cast<Tier>(7), 1, 6, kPage, 100, 2));
  journal->Record(0, 2, Object("k:slot", Tier::kHost, 9, 7, kPage, 100, 3));
  journal->Record(0, 3, Object("k:past", Tier::kHost, 0, 8, 3 * kPage, kPage + 1, 4));
  JournaledObject open = Object("k:open", Tier::kHost, 0, 9, kPage, 100, 5);
  open.committed = false;
  journal->Record(0, 4, open);
  testing::internal::CaptureStdout();  // spdlog's sink
  auto decoded = Decode(*journal);
  const std::string log = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->devices[0].objects.size(), 1u);
  EXPECT_EQ(decoded->devices[0].objects[0].key, "k:whole");
  EXPECT_EQ(decoded->devices[0].bad_records, 4u);
  EXPECT_NE(log.find("record 1 ('k:tier7') skipped: no such tier 7"), std::string::npos) << log;
  EXPECT_NE(log.find("host-tier record naming header slot 9"), std::string::npos) << log;
  EXPECT_NE(log.find("payload outside the host tier"), std::string::npos) << log;
  EXPECT_NE(log.find("never committed"), std::string::npos) << log;

  // A host-tier record on a device that had no host tier.
  auto none = Make(0);
  ASSERT_NE(none, nullptr);
  none->Record(0, 0, Object("k:host", Tier::kHost, 0, 5, 0, 100, 1));
  auto refused = Decode(*none);
  ASSERT_TRUE(refused.ok());
  EXPECT_TRUE(refused->devices[0].objects.empty());
  EXPECT_EQ(refused->devices[0].bad_records, 1u);
}

TEST_F(ObjectJournalTiersTest, AVersionOneJournalIsReadWithoutTiers) {
  auto journal = Make(0);
  ASSERT_NE(journal, nullptr);
  journal->Record(0, 0, Object("k:old", Tier::kGpu, 1, 5, kPage, 100, 1));
  std::vector<std::byte> bytes(journal->bytes().begin(), journal->bytes().end());
  const uint32_t one = 1;
  std::memcpy(bytes.data() + 8, &one, 4);
  auto decoded = ObjectJournal::Decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->devices[0].objects.size(), 1u);
  EXPECT_EQ(decoded->devices[0].objects[0].tier, Tier::kGpu);
  EXPECT_EQ(decoded->devices[0].host_pages, 0u);
}

// The scan over one device with a host tier of 4 pages.
class ScanTiersTest : public ::testing::Test {
 protected:
  ScanTiersTest() : headers_(1, std::vector<std::byte>(kPage)) {
    store_.arena_pages = 1;
    store_.slots_per_page = kSlots;
    store_.max_objects = 64;
    store_.last_epoch = 20;
    store_.host_pages = 4;
    for (uint32_t i = 0; i < 8; ++i) store_.pages.push_back(i);
    store_.header_pages = {0};
  }
  // A store record and its READY header, as a producer wrote it.
  void PutGpu(const std::string& key, uint32_t slot, uint32_t epoch, uint64_t offset, uint64_t bytes, uint64_t seq) {
    store_.objects.push_back(Object(key, Tier::kGpu, slot, epoch, offset, bytes, seq));
    ObjectHeader header{};
    header.key_hash = KeyHash(key);
    header.page_bytes = kPage;
    header.n_pages = static_cast<uint32_t>((offset + bytes - 1) / kPage - offset / kPage + 1);
    header.payload_base = offset;
    header.bytes_total = bytes;
    header.state = static_cast<uint32_t>(ObjectState::kReady);
    header.epoch = epoch;
    std::memcpy(headers_[0].data() + slot * sizeof(ObjectHeader), &header, sizeof(header));
  }
  void PutHost(const std::string& key, uint32_t epoch, uint64_t offset, uint64_t bytes, uint64_t seq) {
    store_.objects.push_back(Object(key, Tier::kHost, 0, epoch, offset, bytes, seq));
  }
  RecoveredStore Scan(bool host_back) const { return ScanStore(store_, kPage, headers_, host_back); }

  JournaledStore store_;
  std::vector<std::vector<std::byte>> headers_;
};

TEST_F(ScanTiersTest, HostTierObjectsComeBackWithoutAHeader) {
  PutGpu("k:gpu", 1, 5, kPage, 1000, 1);
  PutHost("k:host", 6, 0, 3 * kPage, 2);
  PutHost("k:overlap", 7, kPage, 100, 3);  // inside k:host's range
  const RecoveredStore found = Scan(true);
  ASSERT_EQ(found.objects.size(), 2u);
  EXPECT_EQ(found.objects[0].key, "k:gpu");
  EXPECT_EQ(found.objects[1].key, "k:host");
  EXPECT_EQ(found.objects[1].tier, Tier::kHost);
  EXPECT_EQ(found.bytes, 1000 + 3 * kPage);
  EXPECT_EQ(found.reclaimed, 1u) << "the overlapping one";
  EXPECT_TRUE(found.writes.empty());
}

TEST_F(ScanTiersTest, AMoveCutByTheKillComesBackInExactlyOneTier) {
  // Demoted: the host record written, the store's not yet cleared. The same
  // creation order, both copies whole.
  PutGpu("k:moving", 1, 5, kPage, 1000, 1);
  PutHost("k:moving", 5, 0, 1000, 1);
  PutGpu("k:other", 2, 6, 2 * kPage, 1000, 2);
  const RecoveredStore found = Scan(true);
  ASSERT_EQ(found.objects.size(), 2u);
  EXPECT_EQ(found.objects[0].key, "k:moving");
  EXPECT_EQ(found.objects[0].tier, Tier::kHost);
  EXPECT_EQ(found.moves_cut, 1u);
  EXPECT_EQ(found.reclaimed, 0u) << "the other half is no object of its own";
  EXPECT_EQ(found.bytes, 2000u) << "counted once";
  // The same key at another creation order is a forgery: the first wins.
  PutHost("k:other", 9, kPage, 100, 3);
  EXPECT_EQ(Scan(true).reclaimed, 1u);
}

TEST_F(ScanTiersTest, AHostTierThatDidNotComeBackDropsItsObjectsByName) {
  PutGpu("k:moving", 1, 5, kPage, 1000, 1);
  PutHost("k:moving", 5, 0, 1000, 1);
  PutHost("k:host", 6, kPage, 1000, 2);
  const RecoveredStore found = Scan(false);
  ASSERT_EQ(found.objects.size(), 1u) << "the store's copy of the cut move";
  EXPECT_EQ(found.objects[0].tier, Tier::kGpu);
  EXPECT_EQ(found.host_dropped, 1u);
  EXPECT_EQ(found.dropped, (std::vector<std::string>{"k:host"}));
  EXPECT_EQ(found.moves_cut, 0u);
}

}  // namespace
}  // namespace nanokv::kvd
