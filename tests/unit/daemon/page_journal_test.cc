// The page journal as hostile input (issue 19, finding 1): a journal kvd
// wrote round-trips; every forged field is refused by Decode with the fault
// named, never read past (the index-65534 row crashed kvd); TakeOver refuses
// and removes a journal that is a symlink, another user's, writable by
// others or forged, so it never meets a second start.
#include "daemon/node/page_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/other_user.h"

namespace nanokv::kvd {
namespace {

constexpr size_t kPage = 2u << 20;

class PageJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/nanokv-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/j.journal";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // A journal as kvd leaves it: two devices, pages 1 and 3 of device 0 held
  // by group 0 ("g0"), page 2 of device 1 by group 1 ("g1").
  void WriteGood() {
    auto journal = PageJournal::Create(path_, kPage, {{0, 4}, {1, 4}}, 1000);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    (*journal)->SetGroup(0, "g0");
    (*journal)->SetGroup(1, "g1");
    (*journal)->SetPage(0, 1, 7, 0, true);
    (*journal)->SetPage(0, 3, 2, 0, true);
    (*journal)->SetPage(1, 2, 5, 1, true);
    (*journal)->SetPage(1, 0, 9, 1, false);  // its group's, not held
    ASSERT_TRUE((*journal)->Install().ok());
  }

  std::vector<std::byte> Bytes() {
    std::ifstream in(path_, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> bytes(chars.size());
    std::memcpy(bytes.data(), chars.data(), chars.size());
    return bytes;
  }

  void WriteBytes(const std::string& path, const std::vector<std::byte>& bytes, mode_t mode = 0600) {
    int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW, mode);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(fchmod(fd, mode), 0);
    close(fd);
  }

  // The 64-bit entry of page `id` of device index `d` (4 pages each).
  static size_t EntryAt(size_t d, size_t id) { return ipc::kJournalEntriesOffset + (d * 4 + id) * 8; }

  static void Put64(std::vector<std::byte>& bytes, size_t offset, uint64_t value) {
    std::memcpy(bytes.data() + offset, &value, 8);
  }
  static ipc::JournalHeader Header(const std::vector<std::byte>& bytes) {
    ipc::JournalHeader header{};
    std::memcpy(&header, bytes.data(), sizeof(header));
    return header;
  }
  static void PutHeader(std::vector<std::byte>& bytes, const ipc::JournalHeader& header) {
    std::memcpy(bytes.data(), &header, sizeof(header));
  }

  std::string dir_;
  std::string path_;
};

TEST_F(PageJournalTest, WhatKvdWroteComesBack) {
  WriteGood();
  auto recovery = PageJournal::Decode(Bytes());
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  EXPECT_EQ(recovery->page_bytes, kPage);
  ASSERT_EQ(recovery->devices.size(), 2u);
  ASSERT_EQ(recovery->devices[0].pages.size(), 2u);
  EXPECT_EQ(recovery->devices[0].pages[0].id, 1u);
  EXPECT_EQ(recovery->devices[0].pages[0].generation, 7u);
  EXPECT_EQ(recovery->devices[0].pages[0].group, "g0");
  ASSERT_EQ(recovery->devices[1].pages.size(), 1u);
  EXPECT_EQ(recovery->devices[1].pages[0].group, "g1");
  auto taken = PageJournal::TakeOver(path_);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->page_count(), 3u);
  EXPECT_EQ(access(path_.c_str(), F_OK), 0) << "a good journal stays until the next one replaces it";
}

// Version 3: the object store's pages are journaled held under kvd's own
// group (bit 1), so the next kvd tells them from an engine group of the
// same name; a version-2 journal (an older kvd's) is still read, and bit 1
// in it is a reserved bit.
TEST_F(PageJournalTest, KvdsOwnPagesAreMarkedAndAVersion2JournalIsStillRead) {
  {
    auto journal = PageJournal::Create(path_, kPage, {{0, 4}, {1, 4}}, 1000);
    ASSERT_TRUE(journal.ok()) << journal.status().ToString();
    (*journal)->SetGroup(0, "kvd.objects");
    (*journal)->SetPage(0, 2, 4, 0, true, /*kvd_owned=*/true);
    (*journal)->SetPage(0, 3, 5, 0, true);
    ASSERT_TRUE((*journal)->Install().ok());
  }
  std::vector<std::byte> bytes = Bytes();
  auto recovery = PageJournal::Decode(bytes);
  ASSERT_TRUE(recovery.ok()) << recovery.status().ToString();
  ASSERT_EQ(recovery->devices[0].pages.size(), 2u);
  EXPECT_TRUE(recovery->devices[0].pages[0].kvd_owned);
  EXPECT_FALSE(recovery->devices[0].pages[1].kvd_owned);
  ipc::JournalHeader header = Header(bytes);
  header.version = 2;
  PutHeader(bytes, header);
  auto old = PageJournal::Decode(bytes);
  ASSERT_FALSE(old.ok()) << "bit 1 was reserved in version 2";
  EXPECT_NE(old.status().message().find("reserved bits"), std::string::npos) << old.status().message();
  Put64(bytes, EntryAt(0, 2), uint64_t{4} << 32 | uint64_t{1} << 16 | 1);
  old = PageJournal::Decode(bytes);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->page_count(), 2u);
  EXPECT_FALSE(old->devices[0].pages[0].kvd_owned);
}

TEST_F(PageJournalTest, EveryForgedFieldIsRefusedByName) {
  WriteGood();
  const std::vector<std::byte> good = Bytes();
  struct Case {
    const char* what;
    std::function<void(std::vector<std::byte>&)> forge;
    const char* said;
  };
  const std::vector<Case> cases = {
      // The finding: one row naming group index 65534 (stored as 65535).
      {"group index 65534", [](auto& b) { Put64(b, EntryAt(0, 2), uint64_t{1} << 32 | 0xffffull << 16 | 1); },
       "group index 65534 is beyond the table's 1024"},
      {"group index 1024", [](auto& b) { Put64(b, EntryAt(0, 2), 1025ull << 16 | 1); },
       "group index 1024 is beyond"},
      {"held by no group", [](auto& b) { Put64(b, EntryAt(0, 2), 1); }, "held by no group"},
      {"a group without a name", [](auto& b) { Put64(b, EntryAt(0, 2), 5ull << 16 | 1); },
       "group 4 of the table has no valid name"},
      {"reserved bits", [](auto& b) { Put64(b, EntryAt(1, 1), 1ull << 16 | 0x10 | 1); }, "reserved bits"},
      {"a name without its NUL", [](auto& b) {
         std::memset(b.data() + ipc::kJournalGroupTableOffset, 'a', ipc::kJournalGroupNameBytes); },
       "group 0 of the table has no valid name"},
      {"a name with a slash", [](auto& b) {
         std::memcpy(b.data() + ipc::kJournalGroupTableOffset, "a/b", 4); }, "no valid name"},
      {"17 devices", [](auto& b) { auto h = Header(b); h.device_count = 17; PutHeader(b, h); }, "17 devices"},
      {"no device", [](auto& b) { auto h = Header(b); h.device_count = 0; PutHeader(b, h); }, "0 devices"},
      {"ordinal -1", [](auto& b) { auto h = Header(b); h.ordinals[1] = -1; PutHeader(b, h); },
       "has ordinal -1"},
      {"ordinal 99", [](auto& b) { auto h = Header(b); h.ordinals[0] = 99; PutHeader(b, h); },
       "has ordinal 99"},
      {"one device twice", [](auto& b) { auto h = Header(b); h.ordinals[1] = 0; PutHeader(b, h); },
       "device 0 twice"},
      {"huge page count", [](auto& b) { auto h = Header(b); h.capacities[0] = 0xffffffffu; PutHeader(b, h); },
       "pages (at most"},
      {"a page count the file does not hold", [](auto& b) {
         auto h = Header(b); h.capacities[1] = 40; PutHeader(b, h); }, "its devices make"},
      {"total_bytes", [](auto& b) { auto h = Header(b); h.total_bytes += 8; PutHeader(b, h); }, "bytes and says"},
      {"page size 3 MiB", [](auto& b) { auto h = Header(b); h.page_bytes = 3u << 20; PutHeader(b, h); },
       "not a power of two"},
      {"magic", [](auto& b) { auto h = Header(b); h.magic = 42; PutHeader(b, h); }, "wrong magic"},
      {"version", [](auto& b) { auto h = Header(b); h.version = 9; PutHeader(b, h); }, "version 9"},
      {"truncated", [](auto& b) { b.resize(b.size() - 8); }, "its devices make"},
      {"only a header", [](auto& b) { b.resize(100); }, "shorter than a journal's header"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::byte> bytes = good;
    c.forge(bytes);
    auto decoded = PageJournal::Decode(bytes);
    ASSERT_EQ(decoded.status().code(), Code::kInvalidArgument);
    EXPECT_NE(decoded.status().message().find(c.said), std::string::npos) << decoded.status().ToString();
  }
}

// A journal kvd may not trust is logged and removed: it never meets a
// second start.
TEST_F(PageJournalTest, TakeOverRefusesAndRemovesWhatItCannotTrust) {
  WriteGood();
  std::vector<std::byte> good = Bytes();
  std::vector<std::byte> forged = good;
  Put64(forged, EntryAt(0, 2), uint64_t{1} << 32 | 0xffffull << 16 | 1);
  WriteBytes(path_, forged);
  EXPECT_FALSE(PageJournal::TakeOver(path_).has_value());
  EXPECT_NE(access(path_.c_str(), F_OK), 0) << "a forged journal is removed";

  WriteBytes(path_, good, 0660);  // others may write it
  EXPECT_FALSE(PageJournal::TakeOver(path_).has_value());
  EXPECT_NE(access(path_.c_str(), F_OK), 0);

  // A symlink at the name, to a journal that would decode: not followed.
  const std::string elsewhere = dir_ + "/elsewhere";
  WriteBytes(elsewhere, good);
  ASSERT_EQ(symlink(elsewhere.c_str(), path_.c_str()), 0);
  EXPECT_FALSE(PageJournal::TakeOver(path_).has_value());
  struct stat st{};
  EXPECT_NE(lstat(path_.c_str(), &st), 0) << "the link is removed";
  EXPECT_EQ(access(elsewhere.c_str(), F_OK), 0) << "what it pointed at is not";

  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);  // never blocks kvd
  EXPECT_FALSE(PageJournal::TakeOver(path_).has_value());
  EXPECT_NE(lstat(path_.c_str(), &st), 0);
}

TEST_F(PageJournalTest, TakeOverRefusesAnotherUsersJournal) {
  NANOKV_SKIP_UNLESS_ROOT();
  WriteGood();
  ASSERT_EQ(chown(path_.c_str(), testing::kNobody, testing::kNobody), 0);
  EXPECT_FALSE(PageJournal::TakeOver(path_).has_value());
  EXPECT_NE(access(path_.c_str(), F_OK), 0);
}

TEST_F(PageJournalTest, ANewJournalReplacesTheOldOnlyWhenInstalled) {
  WriteGood();
  {
    auto next = PageJournal::Create(path_, kPage, {{0, 4}}, 1000);
    ASSERT_TRUE(next.ok());
    EXPECT_EQ(PageJournal::TakeOver(path_)->page_count(), 3u) << "still the old one";
  }  // a start that failed before Install: its private file goes, the old journal stays
  EXPECT_EQ(PageJournal::TakeOver(path_)->page_count(), 3u);
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".new"), std::string::npos) << entry.path();
  }
  auto next = PageJournal::Create(path_, kPage, {{0, 4}}, 1000);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE((*next)->Install().ok());
  EXPECT_EQ(PageJournal::TakeOver(path_)->page_count(), 0u);
  (*next)->MarkStopped();
  auto stamp = ipc::ReadJournalStamp(path_);
  ASSERT_TRUE(stamp.ok()) << stamp.status().ToString();
  EXPECT_EQ(stamp->recovery_window_ms, 1000u);
  EXPECT_GT(stamp->stopped_unix_ns, 0u);
  (*next)->Remove();
  EXPECT_NE(access(path_.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace nanokv::kvd
