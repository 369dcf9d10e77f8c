// kvd restart, NodeState's part: pages a dead kvd's journal lists are held
// back from the pools, handed back by the engines holding them (Adopt), and
// freed when the recovery window ends. Real host backend; the "engine" is
// this process exporting a page it created, as a client exports its handle.
#include <unistd.h>

#include <gtest/gtest.h>

#include "daemon/node/node_state.h"

namespace nanokv::kvd {
namespace {

constexpr size_t kPage = 2u << 20;

class NodeRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = gpu::MakeHostBackend({.devices = 1, .granularity = kPage, .device_bytes = 64 * kPage});
  }

  // A node whose previous kvd had granted pages 1 and 2 (generation 3) to
  // group "g", and page 5 (generation 0) to group "h".
  void Start() {
    NodeOptions options;
    PagePoolConfig pool;
    pool.page_bytes = kPage;
    pool.capacity_bytes = 8 * kPage;
    pool.reserve_pages = 2;
    options.pools.push_back(pool);
    Recovery recovery;
    recovery.page_bytes = kPage;
    recovery.devices.push_back({0, 8, {{1, 3, "g"}, {2, 3, "g"}, {5, 0, "h"}}});
    options.recovery = recovery;
    auto node = NodeState::Create(*backend_, options);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(node).value();
    Check();
  }

  // What an engine sends for a page it holds: an fd of real page memory.
  AdoptPage Page(PageId id, uint32_t generation) {
    auto handle = backend_->CreatePage(0, kPage);
    EXPECT_TRUE(handle.ok());
    auto fd = backend_->ExportPage(*handle);
    EXPECT_TRUE(fd.ok());
    EXPECT_TRUE(backend_->ReleasePage(*handle).ok());  // the fd keeps the memory
    return {id, generation, *fd};
  }

  TenantId AttachAs(const std::string& name, const std::string& group) {
    AttachParams params;
    params.name = name;
    params.group = group;
    auto id = node_->Attach(params, 1);
    EXPECT_TRUE(id.ok());
    return *id;
  }

  void Check() { ASSERT_TRUE(node_->CheckInvariants().ok()) << node_->CheckInvariants().ToString(); }

  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<NodeState> node_;
};

TEST_F(NodeRecoveryTest, HeldBackPagesAreNeitherGrantedNorFree) {
  Start();
  EXPECT_EQ(node_->recovering_pages(), 3u);
  EXPECT_EQ(node_->Counts()[0].recovering_pages, 3u);
  TenantId t = AttachAs("x", "other");
  EXPECT_EQ(node_->Grant(t, 0, 6, 2).status().code(), Code::kResourceExhausted);
  auto granted = node_->Grant(t, 0, 5, 2);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  for (const PageGrant& p : *granted) EXPECT_TRUE(p.id != 1 && p.id != 2 && p.id != 5) << p.id;
  Check();
}

TEST_F(NodeRecoveryTest, TheOwningGroupTakesItsPagesBack) {
  Start();
  TenantId a = AttachAs("a", "g");
  std::vector<AdoptPage> pages = {Page(1, 3), Page(2, 3)};
  auto result = node_->Adopt(a, 0, pages, 2);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->adopted, (std::vector<PageId>{1, 2}));
  EXPECT_TRUE(result->refused.empty());
  EXPECT_EQ(node_->FindTenant(a)->used_pages[0], 2u);
  EXPECT_EQ(node_->recovering_pages(), 1u);
  Check();
  // A group-mate holding the same page becomes a second holder.
  TenantId b = AttachAs("b", "g");
  std::vector<AdoptPage> again = {{1, 3, *node_->PageFd(0, 1)}};  // b's fd of that page
  result = node_->Adopt(b, 0, again, 3);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->adopted, (std::vector<PageId>{1}));
  EXPECT_EQ(node_->Counts()[0].held_pages, 2u);
  Check();
  // The adopted page is a page like any other: the pool hands its fd out.
  auto fd = node_->PageFd(0, 1);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  close(*fd);
  ASSERT_TRUE(node_->Return(a, 0, std::vector<PageId>{1, 2}, 4).ok());
  Check();
}

TEST_F(NodeRecoveryTest, WrongGroupOrGenerationIsRefusedPerPage) {
  Start();
  TenantId h = AttachAs("h1", "h");
  std::vector<AdoptPage> pages = {Page(1, 3), Page(5, 1), Page(5, 0), Page(7, 0), Page(99, 0)};
  auto result = node_->Adopt(h, 0, pages, 2);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->adopted, (std::vector<PageId>{5}));
  EXPECT_EQ(result->refused, (std::vector<PageId>{1, 5, 7, 99}));
  EXPECT_NE(result->reason.find("group 'h'"), std::string::npos) << result->reason;
  EXPECT_EQ(node_->recovering_pages(), 2u);
  Check();
}

TEST_F(NodeRecoveryTest, ExpiryFreesWhatWasNotHandedBackAndRefusesLateClaims) {
  Start();
  TenantId a = AttachAs("a", "g");
  std::vector<AdoptPage> first = {Page(1, 3)};
  ASSERT_TRUE(node_->Adopt(a, 0, first, 2).ok());
  EXPECT_EQ(node_->ExpireRecovery(), 2u);
  EXPECT_EQ(node_->recovering_pages(), 0u);
  Check();
  std::vector<AdoptPage> late = {Page(2, 3)};
  auto result = node_->Adopt(a, 0, late, 3);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->refused, (std::vector<PageId>{2}));
  // All 7 other pages can be granted now.
  TenantId t = AttachAs("x", "other");
  EXPECT_TRUE(node_->Grant(t, 0, 7, 4).ok());
  Check();
}

// Issue 19 item 9: adopt was taken outside recovery, for group-mates'
// pages, with pipe fds, past the limit (8 pages against a 2-page limit).
TEST_F(NodeRecoveryTest, AdoptIsOnlyForJournaledPagesInTheWindowWithTheirOwnFd) {
  Start();
  TenantId a = AttachAs("a", "g");
  TenantId b = AttachAs("b", "g");
  std::vector<AdoptPage> first = {Page(1, 3)};
  ASSERT_TRUE(node_->Adopt(a, 0, first, 2).ok());
  // A group-mate "hands back" page 1 with a pipe, then with another page's fd.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  close(pipe_fds[1]);
  std::vector<AdoptPage> piped = {{1, 3, pipe_fds[0]}};
  auto result = node_->Adopt(b, 0, piped, 3);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->refused, (std::vector<PageId>{1}));
  EXPECT_NE(result->reason.find("not a page"), std::string::npos) << result->reason;
  std::vector<AdoptPage> other = {Page(1, 3)};
  result = node_->Adopt(b, 0, other, 3);
  EXPECT_EQ(result->refused, (std::vector<PageId>{1}));
  EXPECT_NE(result->reason.find("another file"), std::string::npos) << result->reason;
  // A page granted since the restart was never in the journal.
  auto granted = node_->Grant(a, 0, 1, 3);
  ASSERT_TRUE(granted.ok());
  const PageId fresh = granted->at(0).id;
  std::vector<AdoptPage> unlisted = {{fresh, granted->at(0).generation, *node_->PageFd(0, fresh)}};
  result = node_->Adopt(b, 0, unlisted, 3);
  EXPECT_EQ(result->refused, (std::vector<PageId>{fresh}));
  EXPECT_NE(result->reason.find("not listed"), std::string::npos) << result->reason;
  EXPECT_EQ(node_->FindTenant(b)->used_pages[0], 0u) << "b took nothing";
  // Once the window ends, nothing is adoptable, not even a listed page with
  // its own fd.
  EXPECT_TRUE(node_->recovery_open());
  node_->ExpireRecovery();
  EXPECT_FALSE(node_->recovery_open());
  std::vector<AdoptPage> late = {{1, 3, dup(*node_->PageFd(0, 1))}};
  result = node_->Adopt(b, 0, late, 4);
  EXPECT_EQ(result->refused, (std::vector<PageId>{1}));
  EXPECT_NE(result->reason.find("recovery window"), std::string::npos) << result->reason;
  EXPECT_EQ(node_->FindTenant(b)->used_pages[0], 0u);
  Check();
}

TEST_F(NodeRecoveryTest, AKvdThatRecoveredNothingTakesNoAdopt) {
  NodeOptions options;
  PagePoolConfig pool;
  pool.page_bytes = kPage;
  pool.capacity_bytes = 8 * kPage;
  pool.reserve_pages = 0;
  options.pools.push_back(pool);
  auto node = NodeState::Create(*backend_, options);
  ASSERT_TRUE(node.ok());
  node_ = std::move(node).value();
  TenantId a = AttachAs("a", "g");
  TenantId b = AttachAs("b", "g");
  auto granted = node_->Grant(a, 0, 2, 1);
  ASSERT_TRUE(granted.ok());
  EXPECT_FALSE(node_->recovery_open());
  std::vector<AdoptPage> mates = {{granted->at(0).id, granted->at(0).generation,
                                   dup(*node_->PageFd(0, granted->at(0).id))}};
  auto result = node_->Adopt(b, 0, mates, 2);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->adopted.empty());
  EXPECT_NE(result->reason.find("recovery window"), std::string::npos) << result->reason;
  Check();
}

TEST_F(NodeRecoveryTest, AdoptionOverTheLimitAsksForPagesBack) {
  Start();
  AttachParams params;
  params.name = "small";
  params.group = "g";
  params.limit_bytes = kPage;  // one page, holds two
  auto small = node_->Attach(params, 1);
  ASSERT_TRUE(small.ok());
  std::vector<AdoptPage> pages = {Page(1, 3), Page(2, 3)};
  ASSERT_TRUE(node_->Adopt(*small, 0, pages, 2).ok());
  auto notices = node_->TakeNotices();
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].kind, Notice::Kind::kReclaim);
  EXPECT_EQ(notices[0].pages, 1u);
  Check();
}

// Issue 16 item 2: an engine keeps no fd per page; after a restart it hands
// a page back by id and generation alone, and kvd, with no page of it, adopts
// it without a handle.
TEST_F(NodeRecoveryTest, APageHandedBackByIdIsItsHoldersAloneUntilReturned) {
  Start();
  TenantId a = AttachAs("a", "g");
  TenantId b = AttachAs("b", "g");
  TenantId c = AttachAs("c", "g");
  std::vector<AdoptPage> by_id = {{1, 3, -1}, {2, 3, -1}};
  auto result = node_->Adopt(a, 0, by_id, 2);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->adopted, (std::vector<PageId>{1, 2})) << result->reason;
  DeviceCounts counts = node_->Counts()[0];
  EXPECT_EQ(counts.handleless_pages, 2u);
  EXPECT_EQ(counts.held_pages, 2u);
  EXPECT_EQ(counts.recovering_pages, 1u);  // page 5, group h's
  EXPECT_EQ(counts.created_pages, counts.free_pages + counts.held_pages);
  EXPECT_EQ(node_->UsedBytes(*node_->FindTenant(a)), 2 * kPage);
  Check();

  // b held page 1 too when kvd stopped: it hands it back by id as well.
  std::vector<AdoptPage> mate = {{1, 3, -1}};
  result = node_->Adopt(b, 0, mate, 3);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->adopted, (std::vector<PageId>{1})) << result->reason;
  Check();
  // c did not: kvd has nothing to send it, so no share...
  const std::vector<PageId> one = {1};
  auto shared = node_->Share(c, 0, one, 4);
  EXPECT_EQ(shared.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(shared.status().message().find("without an fd"), std::string::npos)
      << shared.status().ToString();
  // ...and no grant of it: 8 pages, 2 held by id, 1 held back for group h.
  auto granted = node_->Grant(c, 0, 5, 4);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  for (const PageGrant& p : *granted) EXPECT_TRUE(p.id != 1 && p.id != 2 && p.id != 5) << p.id;
  EXPECT_EQ(node_->Grant(c, 0, 1, 4).status().code(), Code::kResourceExhausted);
  Check();

  // Its last holder returns page 1: the id is uncreated, its old memory
  // charged until a and b (who imported it) say they dropped it.
  ASSERT_TRUE(node_->Return(a, 0, one, 5).ok());
  EXPECT_EQ(node_->Counts()[0].handleless_pages, 2u);  // b holds it still
  ASSERT_TRUE(node_->Return(b, 0, one, 5).ok());
  counts = node_->Counts()[0];
  EXPECT_EQ(counts.handleless_pages, 1u);
  EXPECT_EQ(counts.held_after_recycle_pages, 1u);
  size_t forgets = 0;
  for (const Notice& n : node_->TakeNotices()) {
    if (n.kind == Notice::Kind::kForget && n.page_ids == one) ++forgets;
  }
  EXPECT_EQ(forgets, 2u);
  Check();
  EXPECT_EQ(node_->Grant(c, 0, 1, 6).status().code(), Code::kResourceExhausted);
  ASSERT_TRUE(node_->ForgetDone(a, 0, one).ok());
  ASSERT_TRUE(node_->ForgetDone(b, 0, one).ok());
  Check();
  // A fresh page under the id, of a new generation, sent with its fd.
  auto again = node_->Grant(c, 0, 1, 7);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->at(0).id, 1u);
  EXPECT_EQ(again->at(0).generation, 4u);
  EXPECT_TRUE(again->at(0).needs_fd);
  // The old page is claimable no more, by id or otherwise.
  result = node_->Adopt(b, 0, mate, 8);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->refused, one);
  Check();
}

TEST_F(NodeRecoveryTest, ForgedClaimsByIdAreRefusedWithTheirReason) {
  Start();
  TenantId a = AttachAs("a", "g");
  auto reason = [&](AdoptPage page) {
    std::vector<AdoptPage> pages = {page};
    auto result = node_->Adopt(a, 0, pages, 2);
    EXPECT_TRUE(result.ok());
    EXPECT_TRUE(result.ok() && result->adopted.empty());
    return result.ok() ? result->reason : std::string();
  };
  EXPECT_NE(reason({2, 4, -1}).find("generation 4 is not the page's 3"), std::string::npos);
  EXPECT_NE(reason({5, 0, -1}).find("not held by group 'g'"), std::string::npos);
  EXPECT_NE(reason({7, 0, -1}).find("not listed held in the previous kvd's journal"),
            std::string::npos);
  EXPECT_NE(reason({99, 0, -1}).find("no such page"), std::string::npos);
  Check();
  EXPECT_EQ(node_->ExpireRecovery(), 3u);
  EXPECT_NE(reason({1, 3, -1}).find("recovery window"), std::string::npos);
  EXPECT_EQ(node_->Counts()[0].held_pages, 0u);
  Check();
}

TEST_F(NodeRecoveryTest, PagesHeldByIdOutliveTheWindowAndGoWithTheirLastHolder) {
  Start();
  TenantId a = AttachAs("a", "g");
  std::vector<AdoptPage> by_id = {{1, 3, -1}};
  ASSERT_TRUE(node_->Adopt(a, 0, by_id, 2).ok());
  EXPECT_EQ(node_->ExpireRecovery(), 2u);  // pages 2 and 5; page 1 is a's
  EXPECT_EQ(node_->Counts()[0].handleless_pages, 1u);
  Check();
  ASSERT_TRUE(node_->Detach(a).ok());  // its connection ended: so does its charge
  DeviceCounts counts = node_->Counts()[0];
  EXPECT_EQ(counts.handleless_pages, 0u);
  EXPECT_EQ(counts.held_pages, 0u);
  EXPECT_EQ(counts.held_after_recycle_pages, 0u);
  Check();
  TenantId x = AttachAs("x", "other");
  EXPECT_TRUE(node_->Grant(x, 0, 8, 3).ok());  // every page, page 1 made anew
  Check();
}

TEST_F(NodeRecoveryTest, PoolRefusesBadHeldBackIds) {
  PagePoolConfig pool;
  pool.page_bytes = kPage;
  pool.capacity_bytes = 4 * kPage;
  pool.held_back = {1, 1};
  EXPECT_EQ(PagePool::Create(*backend_, pool).status().code(), Code::kInvalidArgument);
  pool.held_back = {4};
  EXPECT_EQ(PagePool::Create(*backend_, pool).status().code(), Code::kInvalidArgument);
  pool.held_back = {0, 3};
  auto made = PagePool::Create(*backend_, pool);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ((*made)->stats().held_back_pages, 2u);
  EXPECT_EQ((*made)->ReleaseHeldBack(1).code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*made)->ReleaseHeldBack(3).ok());
  EXPECT_EQ((*made)->Adopt(3, 0, {}, -1).code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*made)->CheckInvariants().ok()) << (*made)->CheckInvariants().ToString();
}

}  // namespace
}  // namespace nanokv::kvd
