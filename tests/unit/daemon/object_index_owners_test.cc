// Per-owner pages in the object store (issue 19 item 12): a producer's write
// fd maps whole pages, so no page, payload or header, holds two owners'
// objects; a page lent for writing stays its owner's until the holder's uid
// is gone; one owner's small objects still share pages.
#include <set>

#include "tests/unit/daemon/object_store_fixture.h"

namespace nanokv::kvd {
namespace {

constexpr uint32_t kA = 1001, kB = 1002;

// Every store page a plan touches: its payload spans and its header page.
std::set<PageId> PagesOf(const ObjectPlan& plan) {
  std::set<PageId> pages{plan.header_page};
  for (const ObjectSpan& span : plan.spans) pages.insert(span.page_id);
  return pages;
}

TEST_F(ObjectStoreTest, TwoOwnersNeverShareAPageOrAHeaderPage) {
  Open();
  std::set<PageId> a_pages, b_pages;
  uint64_t now = kMs;
  for (int i = 0; i < 6; ++i, now += kMs) {
    for (uint32_t owner : {kA, kB}) {
      const std::string key = std::to_string(owner) + "-" + std::to_string(i);
      ASSERT_OK(PutByPlan(key, Pattern(1000 + 100 * i, uint8_t(i)), 0, now, owner));
      auto plan = store_->GetLocation(key, now);
      ASSERT_TRUE(plan.ok());
      (owner == kA ? a_pages : b_pages).merge(PagesOf(*plan));
      Check();
    }
  }
  EXPECT_EQ(a_pages.size(), 2u) << "A's six small objects: one payload page, one header page";
  EXPECT_EQ(b_pages.size(), 2u);
  for (PageId page : a_pages) EXPECT_FALSE(b_pages.contains(page)) << "page " << page << " holds both";
  auto stats = store_->Stats()[0];
  EXPECT_EQ(stats.header_pages, 2u) << "B's headers took a payload page of their own";
  EXPECT_EQ(stats.payload_capacity, 4 * kPage);
  EXPECT_EQ(stats.owned_pages, (std::map<uint32_t, uint32_t>{{kA, 2}, {kB, 2}}));
  // The header page made from payload starts every slot at an older epoch,
  // so a producer's first CAS there succeeds.
  auto b0 = store_->GetLocation("1002-0", now);
  ASSERT_TRUE(b0.ok());
  ObjectHeader header = HeaderOnDevice(*b0);
  EXPECT_EQ(header.epoch, b0->epoch) << "written by PutByPlan at its epoch";
  EXPECT_EQ(store_->GetLocation("1002-5", now)->header_page, b0->header_page);
  // Everything gone: every page back in shared use, the header page spare.
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK(store_->Remove(std::to_string(kA) + "-" + std::to_string(i), now, kA));
    ASSERT_OK(store_->Remove(std::to_string(kB) + "-" + std::to_string(i), now, kB));
  }
  stats = store_->Stats()[0];
  EXPECT_TRUE(stats.owned_pages.empty());
  EXPECT_EQ(stats.shared_free_pages, 4u);
  EXPECT_EQ(stats.header_pages, 2u) << "a header page stays one (its slots' epochs keep growing)";
  Check();
}

// A payload page made a header page held another owner's bytes: kvd writes
// every slot free at an epoch older than any plan's there, so the new
// owner's first begin (a CAS from an older epoch) succeeds, and kvd's index
// checks agree.
TEST_F(ObjectStoreTest, APayloadPageMadeAHeaderPageStartsAtOlderEpochs) {
  config_.high_watermark = 1.0;  // a full store evicts nothing here
  config_.low_watermark = 1.0;
  Open();
  ASSERT_OK(PutByPlan("keep", Pattern(100, 1), 0, kMs, kA));  // keeps the arena's header page A's
  // Starts in keep's page (packed as before) and fills the other four.
  ASSERT_OK(PutByPlan("a", Pattern(5 * kPage - 4096, 0xff), 0, kMs, kA));
  auto a = store_->GetLocation("a", 2 * kMs);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->spans.size(), 5u);
  const PageId first = a->spans[1].page_id;  // A's bytes only
  ASSERT_OK(store_->Remove("a", 3 * kMs, kA));
  auto b = store_->OpenForWrite("b", 100, 0, 4 * kMs, kB);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->header_page, first) << "the lowest free payload page";
  EXPECT_TRUE(Has("keep"));
  const ObjectHeader fresh = HeaderOnDevice(*b);
  EXPECT_EQ(fresh.state, static_cast<uint32_t>(ObjectState::kFree));
  EXPECT_TRUE(EpochIsNewer(b->epoch, fresh.epoch)) << fresh.epoch << " vs the plan's " << b->epoch;
  EXPECT_EQ(fresh.key_hash, 0u) << "A's bytes are gone from the slot";
  Check();
  ASSERT_OK(WriteHeader(*b, ObjectState::kWriting, 5 * kMs));
  ASSERT_OK(store_->Commit("b", b->epoch, 6 * kMs, kB));
  Check();
}

TEST_F(ObjectStoreTest, OneOwnersObjectsShareAPageAsBefore) {
  Open();
  ASSERT_OK(PutByPlan("x", Pattern(100, 1), 0, kMs, kA));
  ASSERT_OK(PutByPlan("y", Pattern(100, 2), 0, 2 * kMs, kA));
  auto x = store_->GetLocation("x", 3 * kMs), y = store_->GetLocation("y", 3 * kMs);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(PagesOf(*x), PagesOf(*y));
  EXPECT_EQ(y->payload_offset, x->payload_offset + kPayloadAlignment);
  EXPECT_EQ(store_->Stats()[0].header_pages, 1u) << "one owner: the arena only";
}

// Gap (2) of the old "Remaining gaps": a write fd is not taken back. A page
// lent for writing stays its owner's, even empty, while the holder's uid
// may still map it; only its owner's objects go there.
TEST_F(ObjectStoreTest, ALentPageStaysItsOwnersUntilTheHolderIsGone) {
  Open();
  auto plan = store_->OpenForWrite("a", 3000, 0, kMs, kA);
  ASSERT_TRUE(plan.ok());
  const PageId a_page = plan->spans[0].page_id;
  ASSERT_OK(Lend(*plan, a_page, kA));
  ASSERT_OK(Lend(*plan, plan->header_page, kA));
  ASSERT_OK(Lend(*plan, a_page, kA));  // asked twice: held once
  EXPECT_EQ(store_->held_pages(kA), 2u);
  Status other = Lend(*plan, a_page, kB);
  EXPECT_EQ(other.code(), Code::kPermissionDenied);
  EXPECT_NE(other.message().find("writer, uid 1001, not uid 1002"), std::string::npos) << other.ToString();
  ASSERT_OK(store_->Commit("a", plan->epoch, 2 * kMs, kA));
  ASSERT_OK(store_->Remove("a", 3 * kMs, kA));
  EXPECT_EQ(store_->Stats()[0].owned_pages, (std::map<uint32_t, uint32_t>{{kA, 2}})) << "empty but held";
  Check();
  // B's objects never land there; A's do.
  for (int i = 0; i < 8; ++i) {
    auto b = store_->OpenForWrite("b" + std::to_string(i), 100 + 4000 * i, 0, 4 * kMs, kB);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_FALSE(PagesOf(*b).contains(a_page));
    EXPECT_FALSE(PagesOf(*b).contains(plan->header_page));
    Status b_into_a = Lend(*b, a_page, kB);
    EXPECT_EQ(b_into_a.code(), Code::kPermissionDenied);
    EXPECT_NE(b_into_a.message().find("is not a page of plan 'b" + std::to_string(i) + "'"), std::string::npos)
        << b_into_a.ToString();
    EXPECT_NE(b_into_a.message().find("it is uid 1001's"), std::string::npos) << b_into_a.ToString();
  }
  auto again = store_->OpenForWrite("a2", 500, 0, 5 * kMs, kA);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->spans[0].page_id, a_page);
  EXPECT_EQ(again->header_page, plan->header_page);
  ASSERT_OK(store_->Revoke("a2", again->epoch, 6 * kMs, kA));
  Check();
  // A's last connection goes: its empty pages return to shared use.
  store_->ReleaseHolder(kA);
  EXPECT_EQ(store_->held_pages(kA), 0u);
  EXPECT_FALSE(store_->Stats()[0].owned_pages.contains(kA));
  Check();
  auto b_big = store_->OpenForWrite("b-big", 2 * kPage, 0, 7 * kMs, kB);
  ASSERT_TRUE(b_big.ok()) << b_big.status().ToString();
  Check();
}

// A producer that wrote through the master's plans (kvd's callers' pages,
// lent to its uid) and then through its own (its uid's): the empty pages it
// alone holds become its own when it needs the room, and stay nobody
// else's while it holds them.
TEST_F(ObjectStoreTest, EmptyPagesOnlyItsWriterHoldsBecomeItsOwnWhenItNeedsRoom) {
  config_.high_watermark = 1.0;
  config_.low_watermark = 1.0;
  Open();
  auto master = store_->OpenForWrite("m", 4 * kPage, 0, kMs, ObjectIndex::kOperator);
  ASSERT_TRUE(master.ok()) << master.status().ToString();
  for (PageId page : PagesOf(*master)) ASSERT_OK(Lend(*master, page, kA, master->write_secret));
  ASSERT_OK(store_->Commit("m", master->epoch, 2 * kMs, ObjectIndex::kOperator));
  ASSERT_OK(store_->Remove("m", 3 * kMs, ObjectIndex::kOperator));
  EXPECT_EQ(store_->Stats()[0].owned_pages.at(ObjectIndex::kOperator), 5u) << "empty, held by A";
  Check();
  auto b = store_->OpenForWrite("b", 3 * kPage, 0, 4 * kMs, kB);
  EXPECT_EQ(b.status().code(), Code::kResourceExhausted) << "B never gets pages A holds";
  auto a = store_->OpenForWrite("a", 3 * kPage, 0, 5 * kMs, kA);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  size_t reused = 0;
  for (PageId page : PagesOf(*a)) reused += PagesOf(*master).contains(page) ? 1 : 0;
  EXPECT_GE(reused, 3u) << "A's payload went into the pages it held";
  EXPECT_GE(store_->Stats()[0].owned_pages.at(kA), 3u);
  Check();
  ASSERT_OK(store_->Revoke("a", a->epoch, 6 * kMs, kA));
  Check();
}

// A full store of A's READY objects: B's open evicts A's objects until a
// page of its own is free (a header page, then payload), never shares one.
TEST_F(ObjectStoreTest, AnotherOwnersOpenEvictsForAPageOfItsOwn) {
  config_.high_watermark = 1.0;
  config_.low_watermark = 1.0;
  Open();
  for (int i = 0; i < 5; ++i) ASSERT_OK(PutByPlan("a" + std::to_string(i), Pattern(kPage, 1), 0, (i + 1) * kMs, kA));
  auto b = store_->OpenForWrite("b", 1000, 0, 10 * kMs, kB);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE(Has("a0")) << "FIFO: the oldest went for B's header page";
  EXPECT_FALSE(Has("a1")) << "and the next for B's payload page";
  EXPECT_TRUE(Has("a2"));
  for (int i = 2; i < 5; ++i) {
    auto a = store_->GetLocation("a" + std::to_string(i), 11 * kMs);
    ASSERT_TRUE(a.ok());
    for (PageId page : PagesOf(*a)) EXPECT_FALSE(PagesOf(*b).contains(page));
  }
  ASSERT_OK(store_->Revoke("b", b->epoch, 12 * kMs, kB));
  Check();
}

}  // namespace
}  // namespace nanokv::kvd
