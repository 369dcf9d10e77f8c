// Issue 19 item 8, NodeState's invariant 5: a page recycled away while its old
// group's engines had it imported keeps counting against the device's
// capacity and each such engine's quota until the engine says it dropped it
// (ForgetDone) or detaches. The real host backend; CheckInvariants() after
// every step.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/node/node_state.h"
#include "gpu/backend.h"

namespace nanokv::kvd {
namespace {

constexpr size_t kPage = 2u << 20;
constexpr size_t kCapacity = 8;

class NodeStateRecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_ = gpu::MakeHostBackend({.devices = 1, .granularity = kPage, .device_bytes = 64 * kPage});
    NodeOptions options;
    PagePoolConfig pool;
    pool.page_bytes = kPage;
    pool.capacity_bytes = kCapacity * kPage;
    pool.reserve_pages = 2;
    options.pools.push_back(pool);
    auto node = NodeState::Create(*backend_, options);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    node_ = std::move(node).value();
  }

  TenantId AttachAs(const std::string& name, const std::string& group, uint64_t limit = 0) {
    auto id = node_->Attach({.name = name, .group = group, .limit_bytes = limit}, 1);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }

  static std::vector<PageId> Ids(const std::vector<PageGrant>& pages) {
    std::vector<PageId> ids;
    for (const auto& p : pages) ids.push_back(p.id);
    return ids;
  }

  // The ids kvd told `tenant` to forget, from the notices queued so far.
  std::vector<PageId> ForgetsFor(TenantId tenant) {
    std::vector<PageId> ids;
    for (const Notice& n : node_->TakeNotices()) {
      if (n.kind == Notice::Kind::kForget && n.tenant == tenant) {
        ids.insert(ids.end(), n.page_ids.begin(), n.page_ids.end());
      }
    }
    return ids;
  }

  // Memory kvd counts on the device never passes its capacity.
  void CheckWithinCapacity() {
    DeviceCounts c = node_->Counts()[0];
    EXPECT_LE(c.created_pages + c.held_after_recycle_pages, c.capacity_pages)
        << "created " << c.created_pages << " + held after recycle "
        << c.held_after_recycle_pages;
  }

  void Check() {
    CheckWithinCapacity();
    ASSERT_TRUE(node_->CheckInvariants().ok()) << node_->CheckInvariants().ToString();
  }

  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<NodeState> node_;
};

// The reproduction in NodeState: an engine that keeps its pages'
// handles after the forget notice, grants asked again and again. Nothing
// beyond the capacity is ever made; the grant that would need it is refused
// with a clear code; asking again recycles no more of the holder's pages
// than the grant lacks; when the holder detaches, the capacity comes back.
TEST_F(NodeStateRecycleTest, KeptHandlesChargeTheCapacityUntilTheHolderIsGone) {
  TenantId keeper = AttachAs("keeper", "g1");
  auto kept = node_->Grant(keeper, 0, kCapacity, 1);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  ASSERT_TRUE(node_->Return(keeper, 0, Ids(*kept), 2).ok());
  TenantId other = AttachAs("other", "g2");
  for (int round = 0; round < 3; ++round) {
    auto refused = node_->Grant(other, 0, 3, 3);
    EXPECT_EQ(refused.status().code(), Code::kResourceExhausted) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find(kHeldAfterRecycle), std::string_view::npos)
        << refused.status().ToString();
    EXPECT_EQ(refused.status().hint(), Hint::kRetryAfterForget) << "the signal to ask again is data";
    DeviceCounts c = node_->Counts()[0];
    EXPECT_EQ(c.held_after_recycle_pages, 3u) << "round " << round << ": asking again recycled more";
    EXPECT_EQ(c.created_pages, kCapacity - 3);
    Check();
  }
  EXPECT_EQ(ForgetsFor(keeper).size(), 3u);
  // What is waiting counts as room to come: the whole device is more than
  // that, and a grant larger than the wait recycles only the difference.
  EXPECT_EQ(node_->Grant(other, 0, kCapacity, 4).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, 3u);
  EXPECT_EQ(node_->Grant(other, 0, kCapacity - 3, 4).status().code(), Code::kResourceExhausted);
  DeviceCounts c = node_->Counts()[0];
  EXPECT_EQ(c.held_after_recycle_pages, kCapacity - 3) << "every kept page stays charged";
  EXPECT_EQ(c.created_pages, 3u);
  EXPECT_EQ(ForgetsFor(keeper).size(), 2u) << "told once per page, never again";
  EXPECT_EQ(node_->Grant(other, 0, 1, 4).status().code(), Code::kResourceExhausted);
  Check();

  ASSERT_TRUE(node_->Detach(keeper).ok());
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, 0u);
  Check();
  auto granted = node_->Grant(other, 0, kCapacity, 5);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  for (const PageGrant& p : *granted) EXPECT_TRUE(p.needs_fd);
  EXPECT_TRUE(node_->TakeNotices().empty());
  Check();
}

// The holder's quota carries what it keeps: a tenant with a limit of the
// whole device that still holds 4 pages recycled away may take 4 more, not 5.
TEST_F(NodeStateRecycleTest, KeptPagesCountAgainstTheHoldersQuota) {
  TenantId keeper = AttachAs("keeper", "g1", kCapacity * kPage);
  auto kept = node_->Grant(keeper, 0, kCapacity, 1);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(node_->Return(keeper, 0, Ids(*kept), 2).ok());
  TenantId other = AttachAs("other", "g2");
  EXPECT_EQ(node_->Grant(other, 0, 4, 3).status().code(), Code::kResourceExhausted);
  std::vector<PageId> told = ForgetsFor(keeper);
  ASSERT_EQ(told.size(), 4u);
  EXPECT_EQ(node_->HeldAfterRecyclePages(*node_->FindTenant(keeper)), 4u);

  auto over = node_->Grant(keeper, 0, 5, 4);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_NE(over.status().message().find("tenant 'keeper' limit"), std::string_view::npos)
      << "refused for its quota, naming what it keeps: " << over.status().ToString();
  EXPECT_NE(over.status().message().find("still holds 8.0 MiB of pages recycled away"),
            std::string_view::npos)
      << over.status().ToString();
  EXPECT_EQ(over.status().hint(), Hint::kRetryAfterForget) << "it ends once the keeper forgets";
  EXPECT_EQ(node_->Grant(keeper, 0, kCapacity + 1, 4).status().hint(), Hint::kNone)
      << "over its limit whatever it forgets: asking again cannot help";
  auto fits = node_->Grant(keeper, 0, 4, 4);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  for (const PageGrant& p : *fits) {
    EXPECT_FALSE(p.needs_fd) << "its own free pages, still imported";
    EXPECT_EQ(std::count(told.begin(), told.end(), p.id), 0) << "a recycled page came back";
  }
  Check();

  // It drops two (and names a page it was never told about: ignored).
  std::vector<PageId> dropped = {told[0], told[1], Ids(*fits)[0]};
  auto ended = node_->ForgetDone(keeper, 0, dropped);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  EXPECT_EQ(*ended, 2u);
  EXPECT_EQ(node_->HeldAfterRecyclePages(*node_->FindTenant(keeper)), 2u);
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, 2u);
  auto still_over = node_->Grant(keeper, 0, 3, 5);
  EXPECT_EQ(still_over.status().code(), Code::kResourceExhausted);
  EXPECT_NE(still_over.status().message().find("still holds 4.0 MiB"), std::string_view::npos)
      << still_over.status().ToString();
  Check();
  // Said twice changes nothing; a device kvd does not serve is an error.
  EXPECT_EQ(*node_->ForgetDone(keeper, 0, dropped), 0u);
  EXPECT_EQ(node_->ForgetDone(keeper, 3, dropped).status().code(), Code::kNotFound);
  ASSERT_TRUE(node_->ForgetDone(keeper, 0, std::vector<PageId>{told[2], told[3]}).ok());
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, 0u);
  auto ours = node_->Grant(other, 0, 4, 6);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  Check();
}

// One old page, two holders (shared in their group): the device counts it
// once, each holder's quota once, and its room comes back with the last word.
TEST_F(NodeStateRecycleTest, ASharedPageIsChargedUntilItsLastHolderDropsIt) {
  TenantId first = AttachAs("first", "g1");
  TenantId second = AttachAs("second", "g1");
  auto all = node_->Grant(first, 0, kCapacity, 1);
  ASSERT_TRUE(all.ok());
  const PageId shared = all->at(0).id;
  ASSERT_TRUE(node_->Share(second, 0, std::vector<PageId>{shared}, 1).ok());
  ASSERT_TRUE(node_->Return(second, 0, std::vector<PageId>{shared}, 2).ok());
  ASSERT_TRUE(node_->Return(first, 0, Ids(*all), 2).ok());

  TenantId other = AttachAs("other", "g2");
  EXPECT_EQ(node_->Grant(other, 0, kCapacity, 3).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, kCapacity);
  EXPECT_EQ(node_->HeldAfterRecyclePages(*node_->FindTenant(first)), kCapacity);
  EXPECT_EQ(node_->HeldAfterRecyclePages(*node_->FindTenant(second)), 1u);
  Check();

  ASSERT_TRUE(node_->ForgetDone(first, 0, Ids(*all)).ok());
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, 1u) << "second still holds it";
  EXPECT_EQ(node_->Grant(other, 0, kCapacity, 4).status().code(), Code::kResourceExhausted);
  auto seven = node_->Grant(other, 0, kCapacity - 1, 4);
  ASSERT_TRUE(seven.ok()) << seven.status().ToString();
  Check();
  ASSERT_TRUE(node_->ForgetDone(second, 0, std::vector<PageId>{shared}).ok());
  EXPECT_EQ(node_->Counts()[0].held_after_recycle_pages, 0u);
  auto last = node_->Grant(other, 0, 1, 5);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  Check();
}

}  // namespace
}  // namespace nanokv::kvd

namespace nanokv::kvd {
namespace {

// An engine's reserve report (issue 15 item 3) is shown, never counted, and
// never shown above what the tenant holds: the word of a hostile engine
// moves no figure kvd enforces.
TEST_F(NodeStateRecycleTest, AReportedReserveIsShownCappedByUse) {
  TenantId engine = AttachAs("engine", "g1");
  auto granted = node_->Grant(engine, 0, 3, 2);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  ASSERT_TRUE(node_->ReportReserve(engine, 0, kPage).ok());
  const Tenant* t = node_->FindTenant(engine);
  EXPECT_EQ(node_->ReserveBytes(*t), kPage);
  EXPECT_EQ(node_->UsedBytes(*t), 3 * kPage);  // the reserve is part of its use
  ASSERT_TRUE(node_->ReportReserve(engine, 0, UINT64_MAX).ok());
  EXPECT_EQ(node_->ReserveBytes(*t), 3 * kPage);
  EXPECT_EQ(node_->ReportReserve(engine, 3, kPage).code(), Code::kNotFound);
  EXPECT_EQ(node_->ReportReserve(999, 0, kPage).code(), Code::kNotFound);
  ASSERT_TRUE(node_->Return(engine, 0, Ids(*granted), 3).ok());
  EXPECT_EQ(node_->ReserveBytes(*t), 0u);  // holds nothing: shows none
  Check();
}

}  // namespace
}  // namespace nanokv::kvd
