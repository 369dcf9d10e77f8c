// KVTensor against the real kvd, run in-process (in_process_kvd.h): geometry,
// Map/Unmap of scattered ranges, Grow/Shrink, all-or-nothing maps, MapShared
// between two engines of one group (and refused across groups), teardown,
// concurrent maps. After each step the test reads kvd's own state too.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"
#include "tests/unit/client/in_process_kvd.h"

namespace nanokv {
namespace {

using KVTensorTest = testing::InProcessKvdTest;
constexpr size_t kPage = testing::InProcessKvd::kPageBytes;

TEST_F(KVTensorTest, Geometry) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(KVTensor::Create(*client, 0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(KVTensor::Create(*client, 5, kPage).status().code(), Code::kInvalidArgument);
  auto tensor = KVTensor::Create(*client, 0, 3 * kPage + 1);
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
  EXPECT_EQ((*tensor)->page_count(), 4u);
  EXPECT_EQ((*tensor)->size_bytes(), 4 * kPage);
  EXPECT_EQ((*tensor)->mapped_pages(), 0u);
  EXPECT_NE((*tensor)->data(), nullptr);
  EXPECT_FALSE((*tensor)->page_id(0).has_value());
  // A reservation is local: no grant or return reached kvd.
  const kvd::Tenant* tenant = FindTenant("test-engine");
  ASSERT_NE(tenant, nullptr);
  EXPECT_EQ(tenant->used_pages[0], 0u);
  EXPECT_EQ(tenant->last_activity_unix_ns, tenant->attach_unix_ns);
}

TEST_F(KVTensorTest, MapWriteReadUnmap) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto made = KVTensor::Create(*client, 0, 6 * kPage);
  ASSERT_TRUE(made.ok());
  KVTensor& tensor = **made;
  ASSERT_OK(tensor.Map(1, 2));
  ASSERT_OK(tensor.Map(4, 1));
  EXPECT_EQ(tensor.mapped_pages(), 3u);
  EXPECT_FALSE(tensor.is_mapped(0));
  EXPECT_TRUE(tensor.is_mapped(1));
  EXPECT_TRUE(tensor.is_mapped(2));
  EXPECT_FALSE(tensor.is_mapped(3));
  EXPECT_TRUE(tensor.is_mapped(4));
  EXPECT_TRUE(tensor.page_id(4).has_value());
  EXPECT_EQ(UsedPages("test-engine"), 3u);

  // Map over a range with some pages mapped: only the holes are granted.
  ASSERT_OK(tensor.Map(0, 6));
  EXPECT_EQ(tensor.mapped_pages(), 6u);
  EXPECT_EQ(UsedPages("test-engine"), 6u);
  EXPECT_EQ(Counts().held_pages, 6u);
  EXPECT_EQ(client->stats().pages_imported, 6u);
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < 6; ++i) ids.push_back(*tensor.page_id(i));
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a page mapped twice";

  std::vector<uint8_t> pattern(6 * kPage);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + i / kPage);
  ASSERT_OK(client->CopyToDevice(tensor.data(), pattern.data(), pattern.size()));
  std::vector<uint8_t> back(pattern.size());
  ASSERT_OK(client->CopyToHost(back.data(), tensor.data(), back.size()));
  EXPECT_EQ(back, pattern);

  std::vector<uint32_t> unmapped = {*tensor.page_id(2), *tensor.page_id(3), *tensor.page_id(4)};
  ASSERT_OK(tensor.Unmap(2, 3));
  EXPECT_EQ(tensor.mapped_pages(), 3u);
  EXPECT_EQ(UsedPages("test-engine"), 3u);
  EXPECT_EQ(Counts().held_pages, 3u);
  EXPECT_EQ(Counts().group_free_pages, 3u);  // the three returned, kept for the group
  // Mapped again: the same three pages come back, from the import cache.
  ASSERT_OK(tensor.Map(2, 3));
  std::vector<uint32_t> remapped = {*tensor.page_id(2), *tensor.page_id(3), *tensor.page_id(4)};
  std::sort(unmapped.begin(), unmapped.end());
  std::sort(remapped.begin(), remapped.end());
  EXPECT_EQ(remapped, unmapped);
  EXPECT_EQ(client->stats().pages_imported, 6u);
  EXPECT_EQ(client->stats().pages_reused, 3u);
  ASSERT_OK(tensor.Unmap(2, 3));

  EXPECT_EQ(tensor.Map(5, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.Unmap(7, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.mapped_pages(), 3u);
  EXPECT_EQ(UsedPages("test-engine"), 3u);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVTensorTest, GrowShrink) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto made = KVTensor::Create(*client, 0, 8 * kPage);
  ASSERT_TRUE(made.ok());
  KVTensor& tensor = **made;
  ASSERT_OK(tensor.Grow(3));
  EXPECT_EQ(tensor.mapped_prefix(), 3u);
  ASSERT_OK(tensor.Grow(2));
  EXPECT_EQ(tensor.mapped_prefix(), 5u);
  EXPECT_EQ(UsedPages("test-engine"), 5u);
  ASSERT_OK(tensor.Shrink(4));
  EXPECT_EQ(tensor.mapped_prefix(), 1u);
  EXPECT_EQ(tensor.Shrink(2).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.Grow(8).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.mapped_pages(), 1u);
  EXPECT_EQ(UsedPages("test-engine"), 1u);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVTensorTest, MapFailureLeavesNoHalfState) {
  auto client = Start(4);
  ASSERT_NE(client, nullptr);
  auto made = KVTensor::Create(*client, 0, 8 * kPage);
  ASSERT_TRUE(made.ok());
  KVTensor& tensor = **made;
  ASSERT_OK(tensor.Map(0, 2));
  Status too_many = tensor.Map(2, 6);  // kvd: over the tenant's 4-page limit
  EXPECT_EQ(too_many.code(), Code::kResourceExhausted) << too_many.ToString();
  EXPECT_EQ(tensor.mapped_pages(), 2u);
  EXPECT_FALSE(tensor.is_mapped(2));
  EXPECT_EQ(UsedPages("test-engine"), 2u);
  EXPECT_EQ(Counts().held_pages, 2u);
  ASSERT_OK(tensor.Map(2, 2));
  EXPECT_EQ(tensor.mapped_pages(), 4u);
  EXPECT_EQ(UsedPages("test-engine"), 4u);
  EXPECT_TRUE(KvdInvariantsHold());
}

// Two engines of one group share bytes; an engine of another group may not.
TEST_F(KVTensorTest, MapSharedSeesTheSameBytes) {
  StartKvd();
  ClientOptions options;
  options.group = "g";
  options.tenant = "writer";
  auto writer_client = Attach(options);
  options.tenant = "reader";
  auto reader_client = Attach(options);
  options.tenant = "stranger";
  options.group = "h";
  auto stranger_client = Attach(options);
  ASSERT_TRUE(writer_client.ok() && reader_client.ok() && stranger_client.ok());
  Client& writer_engine = **writer_client;
  Client& reader_engine = **reader_client;

  auto writer = KVTensor::Create(writer_engine, 0, 2 * kPage);
  auto reader = KVTensor::Create(reader_engine, 0, 4 * kPage);
  auto stranger = KVTensor::Create(**stranger_client, 0, 2 * kPage);
  ASSERT_TRUE(writer.ok() && reader.ok() && stranger.ok());
  ASSERT_OK((*writer)->Grow(2));
  std::vector<uint32_t> ids = {*(*writer)->page_id(0), *(*writer)->page_id(1)};
  ASSERT_OK((*reader)->MapShared(1, 0, ids));
  EXPECT_EQ((*reader)->page_id(1), ids[0]);
  EXPECT_EQ((*reader)->page_id(2), ids[1]);
  EXPECT_EQ((*reader)->MapShared(2, 0, ids).code(), Code::kFailedPrecondition);
  EXPECT_EQ(UsedPages("writer"), 2u);
  EXPECT_EQ(UsedPages("reader"), 2u);
  EXPECT_EQ(Counts().held_pages, 2u);  // two holders each, not four pages

  ASSERT_OK(writer_engine.FillDevice((*writer)->data(), 0xab, 2 * kPage));
  std::vector<uint8_t> seen(2 * kPage);
  auto* shared = static_cast<uint8_t*>((*reader)->data()) + kPage;
  ASSERT_OK(reader_engine.CopyToHost(seen.data(), shared, seen.size()));
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](uint8_t b) { return b == 0xab; }));
  EXPECT_EQ(reader_engine.stats().pages_imported, 2u);

  // Let go and share again: the reader's handles are reused, no import.
  ASSERT_OK((*reader)->Unmap(1, 2));
  EXPECT_EQ(UsedPages("reader"), 0u);
  EXPECT_EQ(Counts().held_pages, 2u);  // the writer still holds them
  ASSERT_OK((*reader)->MapShared(0, 0, ids));
  EXPECT_EQ(reader_engine.stats().pages_imported, 2u);
  EXPECT_EQ(reader_engine.stats().pages_reused, 2u);

  Status refused = (*stranger)->MapShared(0, 0, ids);
  EXPECT_EQ(refused.code(), Code::kPermissionDenied) << refused.ToString();
  EXPECT_EQ((*stranger)->mapped_pages(), 0u);
  EXPECT_EQ(UsedPages("stranger"), 0u);
  EXPECT_EQ((*stranger_client)->stats().pages_imported, 0u);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVTensorTest, DestructorReturnsEverything) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  {
    auto made = KVTensor::Create(*client, 0, 5 * kPage);
    ASSERT_TRUE(made.ok());
    ASSERT_OK((*made)->Map(0, 5));
    EXPECT_EQ(UsedPages("test-engine"), 5u);
  }
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  EXPECT_EQ(Counts().held_pages, 0u);
  EXPECT_EQ(Counts().group_free_pages, 5u);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(KVTensorTest, ConcurrentMapsOfDisjointRanges) {
  auto client = Start(64);
  ASSERT_NE(client, nullptr);
  auto made = KVTensor::Create(*client, 0, 32 * kPage);
  ASSERT_TRUE(made.ok());
  KVTensor& tensor = **made;
  std::vector<std::thread> threads;
  std::vector<Status> failures(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tensor, &failures, t] {
      for (int i = 0; i < 30 && failures[t].ok(); ++i) {
        Status s = tensor.Map(t * 8, 8);
        if (s.ok()) s = tensor.Unmap(t * 8 + 2, 4);
        if (s.ok()) s = tensor.Unmap(t * 8, 8);
        failures[t] = s;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const Status& s : failures) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(tensor.mapped_pages(), 0u);
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  EXPECT_EQ(Counts().held_pages, 0u);
  EXPECT_LE(client->stats().pages_imported, 32u);  // never more than 4 threads x 8 pages
  EXPECT_TRUE(KvdInvariantsHold());
}

}  // namespace
}  // namespace nanokv
