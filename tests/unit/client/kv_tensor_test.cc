// KVTensor against a scripted kvd (fake_kvd.h): geometry, Map/Unmap of
// scattered ranges, Grow/Shrink, all-or-nothing maps, MapShared, teardown,
// and that mapped pages outlive kvd.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"
#include "tests/unit/client/fake_kvd.h"

namespace nanokv {
namespace {

using testing::FakeKvd;
using KVTensorTest = testing::FakeKvdTest;
constexpr size_t kPage = FakeKvd::kPageBytes;

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
  EXPECT_EQ(kvd_->returns(), 0);
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
  EXPECT_EQ(kvd_->held_pages(), 3u);

  // Map over a range with some pages mapped: only the holes are granted.
  ASSERT_OK(tensor.Map(0, 6));
  EXPECT_EQ(tensor.mapped_pages(), 6u);
  EXPECT_EQ(kvd_->held_pages(), 6u);

  std::vector<uint8_t> pattern(6 * kPage);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + i / kPage);
  ASSERT_OK(client->CopyToDevice(tensor.data(), pattern.data(), pattern.size()));
  std::vector<uint8_t> back(pattern.size());
  ASSERT_OK(client->CopyToHost(back.data(), tensor.data(), back.size()));
  EXPECT_EQ(back, pattern);

  ASSERT_OK(tensor.Unmap(2, 3));
  EXPECT_EQ(tensor.mapped_pages(), 3u);
  EXPECT_EQ(kvd_->held_pages(), 3u);
  EXPECT_EQ(kvd_->last_returned().size(), 3u);
  EXPECT_EQ(tensor.Map(5, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.Unmap(7, 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.mapped_pages(), 3u);
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
  ASSERT_OK(tensor.Shrink(4));
  EXPECT_EQ(tensor.mapped_prefix(), 1u);
  EXPECT_EQ(tensor.Shrink(2).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.Grow(8).code(), Code::kInvalidArgument);
  EXPECT_EQ(tensor.mapped_pages(), 1u);
  EXPECT_EQ(kvd_->held_pages(), 1u);
}

TEST_F(KVTensorTest, MapFailureLeavesNoHalfState) {
  auto client = Start(4);
  ASSERT_NE(client, nullptr);
  auto made = KVTensor::Create(*client, 0, 8 * kPage);
  ASSERT_TRUE(made.ok());
  KVTensor& tensor = **made;
  ASSERT_OK(tensor.Map(0, 2));
  Status too_many = tensor.Map(2, 6);  // kvd has only 2 left
  EXPECT_EQ(too_many.code(), Code::kResourceExhausted);
  EXPECT_EQ(tensor.mapped_pages(), 2u);
  EXPECT_EQ(kvd_->held_pages(), 2u);
  ASSERT_OK(tensor.Map(2, 2));
  EXPECT_EQ(tensor.mapped_pages(), 4u);
}

TEST_F(KVTensorTest, MapSharedSeesTheSameBytes) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto writer = KVTensor::Create(*client, 0, 2 * kPage);
  auto reader = KVTensor::Create(*client, 0, 4 * kPage);
  ASSERT_TRUE(writer.ok() && reader.ok());
  ASSERT_OK((*writer)->Grow(2));
  std::vector<uint32_t> ids = {*(*writer)->page_id(0), *(*writer)->page_id(1)};
  ASSERT_OK((*reader)->MapShared(1, 0, ids));
  EXPECT_EQ((*reader)->page_id(1), ids[0]);
  EXPECT_EQ((*reader)->page_id(2), ids[1]);
  EXPECT_EQ((*reader)->MapShared(2, 0, ids).code(), Code::kFailedPrecondition);

  ASSERT_OK(client->FillDevice((*writer)->data(), 0xab, 2 * kPage));
  std::vector<uint8_t> seen(2 * kPage);
  auto* shared = static_cast<uint8_t*>((*reader)->data()) + kPage;
  ASSERT_OK(client->CopyToHost(seen.data(), shared, seen.size()));
  EXPECT_EQ(seen.front(), 0xab);
  EXPECT_EQ(seen.back(), 0xab);
  EXPECT_EQ(client->stats().pages_imported, 2u);  // the share reused both handles
}

TEST_F(KVTensorTest, DestructorReturnsEverything) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  {
    auto made = KVTensor::Create(*client, 0, 5 * kPage);
    ASSERT_TRUE(made.ok());
    ASSERT_OK((*made)->Map(0, 5));
    EXPECT_EQ(kvd_->held_pages(), 5u);
  }
  EXPECT_EQ(kvd_->held_pages(), 0u);
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
  EXPECT_EQ(kvd_->held_pages(), 0u);
}

}  // namespace
}  // namespace nanokv
