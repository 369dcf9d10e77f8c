// The object journal (issue 15 item 5) as kvd's own record and as hostile
// input: what kvd writes round-trips through the file; a torn or forged
// record is skipped and counted, a forged structure refuses the whole file
// with the fault named, and TakeOver removes a refused file. And the scan
// of a restart (ScanStore): committed objects whose READY header agrees with
// kvd's record come back, writes hold their space until write_timeout, the
// rest is reclaimed, and every header field is range-checked.
#include "daemon/objects/object_journal.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/objects/object_index.h"
#include "daemon/objects/object_recovery.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

constexpr uint64_t kPage = 64 * 1024;
constexpr uint32_t kSlots = kPage / sizeof(ObjectHeader);
constexpr uint32_t kUid = 1001, kOther = 1002;

class ObjectJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/nanokv-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/j.objects";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  // Device 3: 8 store pages (ids 100..107 in reverse), 1 arena page, 64 records.
  std::unique_ptr<ObjectJournal> Make() {
    ObjectJournal::Layout layout;
    layout.device = 3;
    for (uint32_t i = 0; i < 8; ++i) layout.pages.push_back(107 - i);
    layout.arena_pages = 1;
    layout.slots_per_page = kSlots;
    layout.max_objects = 64;
    auto journal = ObjectJournal::Create(path_, kPage, {layout});
    EXPECT_TRUE(journal.ok()) << journal.status().ToString();
    return journal.ok() ? std::move(*journal) : nullptr;
  }
  static JournaledObject Object(const std::string& key, uint32_t slot, uint32_t epoch, uint64_t offset,
                                uint64_t bytes, uint32_t owner = kUid) {
    JournaledObject o;
    o.key = key;
    o.slot = slot;
    o.epoch = epoch;
    o.owner = owner;
    o.seq = epoch;
    o.payload_offset = offset;
    o.bytes_total = bytes;
    return o;
  }
  static Result<JournaledStores> Decode(const std::vector<std::byte>& bytes) { return ObjectJournal::Decode(bytes); }
  static std::vector<std::byte> Copy(const ObjectJournal& j) { return {j.bytes().begin(), j.bytes().end()}; }

  std::string dir_, path_;
};

TEST_F(ObjectJournalTest, WhatKvdRecordsRoundTrips) {
  auto journal = Make();
  ASSERT_NE(journal, nullptr);
  journal->Record(0, 5, Object("k:a", 3, 7, kPage, 100));
  JournaledObject pinned = Object("k:b", kSlots + 1, 9, 2 * kPage + 256, 3 * kPage, ObjectIndex::kOperator);
  pinned.pin = ObjectPin::kHard;
  journal->Record(0, 6, pinned);
  journal->Record(0, 7, Object("k:gone", 4, 8, kPage + 256, 10));
  journal->Clear(0, 7);
  journal->SetHeaderPage(0, 1, 6);
  journal->SetLastEpoch(0, 12);
  journal->Record(1, 0, Object("ignored", 0, 1, kPage, 1));  // no device 1: ignored
  auto decoded = Decode(Copy(*journal));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->devices.size(), 1u);
  const JournaledStore& store = decoded->devices[0];
  EXPECT_EQ(decoded->page_bytes, kPage);
  EXPECT_EQ(store.device, 3);
  EXPECT_EQ(store.pages.front(), 107u);
  EXPECT_EQ(store.pages.back(), 100u);
  EXPECT_EQ(store.header_pages, (std::vector<uint32_t>{0, 6}));
  EXPECT_EQ(store.last_epoch, 12u);
  EXPECT_EQ(store.bad_records, 0u);
  ASSERT_EQ(store.objects.size(), 2u) << "the cleared record is gone";
  EXPECT_EQ(store.objects[0].key, "k:a");
  EXPECT_EQ(store.objects[0].payload_offset, kPage);
  EXPECT_EQ(store.objects[1].key, "k:b");
  EXPECT_EQ(store.objects[1].owner, ObjectIndex::kOperator);
  EXPECT_EQ(store.objects[1].pin, ObjectPin::kHard);
  EXPECT_EQ(store.objects[1].bytes_total, 3 * kPage);

  // Installed, it is what the next kvd takes over.
  ASSERT_OK(journal->Install());
  auto taken = ObjectJournal::TakeOver(path_);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->object_count(), 2u);
}

TEST_F(ObjectJournalTest, ATornOrForgedRecordIsSkippedAndCounted) {
  auto journal = Make();
  ASSERT_NE(journal, nullptr);
  journal->Record(0, 0, Object("k:whole", 0, 1, kPage, 100));
  journal->Record(0, 1, Object("k:torn", 1, 2, kPage + 256, 100));
  // Out of range, each recorded whole (a checksum that matches): the file is
  // kvd's, but a record is still checked against its store's geometry.
  journal->Record(0, 2, Object("k:in-the-arena", 2, 3, 0, 100));
  journal->Record(0, 3, Object("k:past-the-end", 3, 4, 7 * kPage, kPage + 1));
  journal->Record(0, 4, Object("k:slot", 2 * kSlots, 5, kPage, 1));  // one header page only
  journal->Record(0, 5, Object("bad key", 5, 6, kPage, 1));
  journal->Record(0, 6, Object("k:epoch0", 6, 0, kPage, 1));
  std::vector<std::byte> bytes = Copy(*journal);
  // The torn one: a byte of its key changed after the checksum.
  const std::string torn = "k:torn";
  auto at = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(torn.data()),
                        reinterpret_cast<const std::byte*>(torn.data()) + torn.size());
  ASSERT_NE(at, bytes.end());
  at[2] = std::byte{'T'};
  auto decoded = Decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->devices[0].objects.size(), 1u);
  EXPECT_EQ(decoded->devices[0].objects[0].key, "k:whole");
  EXPECT_EQ(decoded->devices[0].bad_records, 6u);
}

TEST_F(ObjectJournalTest, AForgedStructureIsRefusedNamingTheFault) {
  auto journal = Make();
  ASSERT_NE(journal, nullptr);
  const std::vector<std::byte> good = Copy(*journal);
  auto refused = [&](size_t offset, const void* value, size_t n, const std::string& fault) {
    std::vector<std::byte> bytes = good;
    std::memcpy(bytes.data() + offset, value, n);
    auto decoded = Decode(bytes);
    ASSERT_FALSE(decoded.ok()) << fault;
    EXPECT_EQ(decoded.status().code(), Code::kInvalidArgument);
    EXPECT_NE(decoded.status().message().find(fault), std::string::npos) << decoded.status().message();
  };
  const uint64_t zero64 = 0, huge = uint64_t{1} << 50;
  const uint32_t big = 1u << 30, zero = 0;
  const int32_t negative = -1;
  refused(0, &zero64, 8, "wrong magic");
  const uint32_t three = 3;
  refused(8, &three, 4, "version 3");
  refused(12, &big, 4, "devices");
  refused(16, &zero64, 8, "page size");
  refused(24, &huge, 8, "bytes and says");
  refused(64, &negative, 4, "ordinal -1");
  refused(68, &big, 4, "store pages");
  refused(72, &zero, 4, "arena pages");
  refused(84, &big, 4, "header pages do not fit");
  refused(76, &big, 4, "slots a page");
  refused(80, &big, 4, "records are out of range");
  // Page ids start after the header and the one device row (128).
  {
    std::vector<std::byte> bytes = good;
    const uint32_t dup = 106;  // page 0 is id 107, page 1 id 106
    std::memcpy(bytes.data() + 128, &dup, 4);
    auto decoded = Decode(bytes);
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.status().message().find("a page id twice"), std::string::npos);
  }
  {
    std::vector<std::byte> bytes = good;
    const uint32_t count = 2, arena = 0;  // a second header page that is store page 0 (the arena's)
    std::memcpy(bytes.data() + 84, &count, 4);
    std::memcpy(bytes.data() + 128 + 8 * 4 + 4, &arena, 4);
    auto decoded = Decode(bytes);
    ASSERT_FALSE(decoded.ok());
    EXPECT_NE(decoded.status().message().find("header page 1 is store page 0"), std::string::npos)
        << decoded.status().message();
  }
  // Cut short anywhere: refused, never read past.
  for (size_t n : {size_t{0}, size_t{63}, size_t{100}, good.size() - 1}) {
    std::vector<std::byte> cut(good.begin(), good.begin() + static_cast<long>(n));
    EXPECT_FALSE(Decode(cut).ok()) << n;
  }
}

TEST_F(ObjectJournalTest, TakeOverRemovesARefusedFile) {
  { std::ofstream(path_) << "not a journal"; }
  chmod(path_.c_str(), 0600);
  EXPECT_FALSE(ObjectJournal::TakeOver(path_).has_value());
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_FALSE(ObjectJournal::TakeOver(path_).has_value()) << "none: nothing to recover";
  std::filesystem::create_symlink("/etc/passwd", path_);
  EXPECT_FALSE(ObjectJournal::TakeOver(path_).has_value());
  EXPECT_FALSE(std::filesystem::is_symlink(path_));
}

// The scan: one header page (ordinal 0) and kvd's records over it.
class ScanStoreTest : public ::testing::Test {
 protected:
  ScanStoreTest() : headers_(2, std::vector<std::byte>(kPage)) {
    store_.device = 0;
    store_.arena_pages = 1;
    store_.slots_per_page = kSlots;
    store_.max_objects = 64;
    store_.last_epoch = 20;
    for (uint32_t i = 0; i < 8; ++i) store_.pages.push_back(i);
    store_.header_pages = {0, 7};
  }
  // A record and the header a producer wrote for it: READY, agreeing.
  ObjectHeader& Put(const std::string& key, uint32_t slot, uint32_t epoch, uint64_t offset, uint64_t bytes,
                    uint32_t owner = kUid) {
    JournaledObject o;
    o.key = key;
    o.slot = slot;
    o.epoch = epoch;
    o.owner = owner;
    o.seq = store_.objects.size() + 1;
    o.payload_offset = offset;
    o.bytes_total = bytes;
    o.committed = true;
    store_.objects.push_back(o);
    ObjectHeader header{};
    header.key_hash = KeyHash(key);
    header.page_bytes = kPage;
    header.n_pages = static_cast<uint32_t>((offset + bytes - 1) / kPage - offset / kPage + 1);
    header.payload_base = offset;
    header.bytes_total = bytes;
    header.state = static_cast<uint32_t>(ObjectState::kReady);
    header.epoch = epoch;
    auto* at = reinterpret_cast<ObjectHeader*>(headers_[slot / kSlots].data() + (slot % kSlots) * 64);
    *at = header;
    return *at;
  }
  RecoveredStore Scan() const { return ScanStore(store_, kPage, headers_); }
  static std::vector<std::string> Keys(const RecoveredStore& r) {
    std::vector<std::string> keys;
    for (const auto& o : r.objects) keys.push_back(o.key);
    return keys;
  }

  JournaledStore store_;
  std::vector<std::vector<std::byte>> headers_;
};

TEST_F(ScanStoreTest, ReadyObjectsAgreeingWithTheRecordComeBack) {
  Put("k:small", 0, 5, kPage, 1);
  Put("k:spans", 1, 6, kPage + 256, 3 * kPage);
  Put("k:other-slot-page", kSlots + 3, 7, 5 * kPage, 100, kOther);
  RecoveredStore r = Scan();
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"k:small", "k:spans", "k:other-slot-page"}));
  EXPECT_EQ(r.bytes, 1 + 3 * kPage + 100);
  EXPECT_EQ(r.reclaimed, 0u);
  EXPECT_EQ(r.last_epoch, 20u) << "the journal's counter is above every record";
}

TEST_F(ScanStoreTest, AnythingElseIsReclaimed) {
  const ObjectHeader ok = Put("k:ok", 0, 5, kPage, 100);
  Put("k:writing", 1, 6, kPage + 256, 100).state = static_cast<uint32_t>(ObjectState::kWriting);
  Put("k:dead", 2, 7, kPage + 512, 100).state = static_cast<uint32_t>(ObjectState::kDead);
  Put("k:garbage-state", 3, 8, kPage + 768, 100).state = 0xdeadbeef;
  Put("k:next-epoch", 4, 9, kPage + 1024, 100).epoch = 10;
  Put("k:hash", 5, 10, kPage + 1280, 100).key_hash ^= 1;
  Put("k:base", 6, 11, kPage + 1536, 100).payload_base = 0;
  Put("k:size", 7, 12, kPage + 1792, 100).bytes_total = 1u << 30;
  Put("k:pages", 8, 13, kPage + 2048, 100).n_pages = 0xffffffff;
  Put("k:page-bytes", 9, 14, kPage + 2304, 100).page_bytes = 7;
  Put("k:ok", 10, 15, kPage + 2560, 100);            // the key again: the first stays
  Put("k:same-slot", 0, 5, kPage + 2816, 100);       // slot 0 again
  *reinterpret_cast<ObjectHeader*>(headers_[0].data()) = ok;  // k:ok's header back
  Put("k:overlap", 11, 16, kPage + 64 * 256 - 256 + 0, 100);
  Put("k:overlap2", 12, 17, kPage + 64 * 256 - 256 + 0, 100);  // the same range as the last
  Put("k:in-header-page", 13, 18, 7 * kPage, 100);
  Put("k:owner-page", 14, 19, kPage + 64 * 256, 100, kOther);  // kUid's page
  Put("k:owner-header", 15, 21, 4 * kPage, 100, kOther);       // slot page 0 is kUid's
  Put("k:uncommitted", 16, 22, 3 * kPage, 100);
  store_.objects.back().committed = false;
  RecoveredStore r = Scan();
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"k:ok", "k:overlap"}));
  // A header that does not vouch, or no commit: held as a write (its space
  // kept until write_timeout); a record whose space cannot be: refused now.
  std::vector<std::string> writes;
  for (const auto& o : r.writes) writes.push_back(o.key);
  EXPECT_EQ(writes, (std::vector<std::string>{"k:writing", "k:dead", "k:garbage-state", "k:next-epoch", "k:hash",
                                              "k:base", "k:size", "k:pages", "k:page-bytes", "k:uncommitted"}));
  EXPECT_EQ(r.reclaimed, 6u);
  EXPECT_EQ(r.last_epoch, 22u) << "newer than the journal's 20: a record's epoch";
  EXPECT_FALSE(r.reasons.empty());
  EXPECT_NE(r.reasons[0].find("WRITING"), std::string::npos) << r.reasons[0];
}

TEST_F(ScanStoreTest, AHeaderPageNotReadReclaimsItsObjects) {
  Put("k:a", kSlots + 1, 5, kPage, 100);
  headers_[1].resize(10);
  RecoveredStore r = Scan();
  EXPECT_TRUE(r.objects.empty());
  EXPECT_EQ(r.writes.size(), 1u);
  headers_.resize(1);
  EXPECT_TRUE(Scan().objects.empty());
}

TEST_F(ScanStoreTest, GarbageHeadersNeverCrashTheScan) {
  for (uint32_t s = 0; s < 16; ++s) Put("k:" + std::to_string(s), s, 30 + s, kPage + 256 * s, 200);
  uint64_t state = 88172645463325252ULL;
  for (std::byte& b : headers_[0]) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    b = static_cast<std::byte>(state);
  }
  RecoveredStore r = Scan();
  EXPECT_TRUE(r.objects.empty());
  EXPECT_EQ(r.writes.size(), 16u);
  EXPECT_EQ(r.last_epoch, 45u);
}

}  // namespace
}  // namespace nanokv::kvd
