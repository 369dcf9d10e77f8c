// The object store's index against a hostile client (issue 19): leases
// bounded per uid and pruned, remove only by the producer's uid or the
// operator, a write past write_timeout dead before any reclaim runs.
#include "tests/unit/daemon/object_store_fixture.h"

namespace nanokv::kvd {
namespace {

// Issue 19 item 10: leases were bounded by nothing and pruned only on
// release, remove or evict; a loop of acquires grew kvd without end.
TEST_F(ObjectStoreTest, LeasesAreBoundedPerHolderAndPrunedOnAcquire) {
  config_.max_leases = 8;
  Open();
  PutMany("o", 2, kMiB);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(store_->AcquireLease("o" + std::to_string(i % 2), kHolder, 10 * kMs).ok());
  auto refused = store_->AcquireLease("o0", kHolder, 11 * kMs);
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("object_store.max_leases"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(store_->AcquireLease("o0", kHolder + 1, 12 * kMs).ok()) << "another uid has its own bound";
  EXPECT_EQ(store_->lease_count(kHolder), 8u);
  // Far more acquires than the bound, each after the last expired: the
  // count never passes the bound, nothing waits for a release.
  uint64_t now = 200 * kMs;
  for (int i = 0; i < 10'000; ++i, now += 101 * kMs) {
    ASSERT_TRUE(store_->AcquireLease("o1", kHolder, now).ok()) << i;
    ASSERT_LE(store_->lease_count(), 2u) << "expired leases are pruned on acquire";
  }
  EXPECT_EQ(store_->lease_count(kHolder), 1u);
  EXPECT_EQ(store_->Reclaim(now + 200 * kMs), 0u);
  EXPECT_EQ(store_->lease_count(), 0u) << "kvd's timer prunes too";
  // A removed object takes its (expired) leases out of the counts.
  ASSERT_TRUE(store_->AcquireLease("o0", kHolder, now + 300 * kMs).ok());
  ASSERT_OK(store_->Remove("o0", now + 500 * kMs));
  EXPECT_EQ(store_->lease_count(), 0u);
  Check();
}

// A reader's lease keeps the object's space while it copies: another uid
// cannot end it early (lease ids are sequential, easy to guess).
TEST_F(ObjectStoreTest, OnlyTheHolderOrTheOperatorEndsALease) {
  Open();
  PutMany("o", 1, kMiB);
  auto lease = store_->AcquireLease("o0", kHolder, kMs);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(store_->ReleaseLease("o0", lease->id, kMs, kHolder + 1).code(), Code::kPermissionDenied);
  EXPECT_EQ(store_->Remove("o0", kMs).code(), Code::kFailedPrecondition) << "still leased";
  ASSERT_OK(store_->ReleaseLease("o0", lease->id, kMs, kHolder));
  auto again = store_->AcquireLease("o0", kHolder, kMs);
  ASSERT_TRUE(again.ok());
  ASSERT_OK(store_->ReleaseLease("o0", again->id, kMs, ObjectIndex::kOperator));
  Check();
}

// Issue 19 item 12: remove was anyone's.
TEST_F(ObjectStoreTest, OnlyTheProducersUidOrTheOperatorRemoves) {
  Open();
  auto plan = store_->OpenForWrite("owned", 100, 0, kMs, /*owner=*/1001);
  ASSERT_TRUE(plan.ok());
  ASSERT_OK(store_->Commit("owned", plan->epoch, 2 * kMs));
  Status other = store_->Remove("owned", 3 * kMs, 1002);
  EXPECT_EQ(other.code(), Code::kPermissionDenied);
  EXPECT_NE(other.message().find("only its producer's uid (1001)"), std::string::npos) << other.ToString();
  EXPECT_TRUE(Has("owned"));
  ASSERT_OK(store_->Remove("owned", 4 * kMs, 1001));
  ASSERT_OK(PutByPlan("operators", Pattern(100, 1), 0, 5 * kMs));
  EXPECT_EQ(store_->Remove("operators", 6 * kMs, 1001).code(), Code::kPermissionDenied);
  ASSERT_OK(store_->Remove("operators", 7 * kMs));  // kvd's own callers are the operator
  Check();
}

// Issue 19 item 12: kvd hands write fds only for pages of the asker's own
// open plans (and those kvd's own callers opened: the master's orders).
TEST_F(ObjectStoreTest, WriteFdsOnlyForTheAskersOpenPlans) {
  Open();
  ASSERT_OK(PutByPlan("ready", Pattern(2 * kPage + 100, 1), 0, kMs));
  auto ready = store_->GetLocation("ready", 2 * kMs);
  ASSERT_TRUE(ready.ok());
  const PageId ready_page = ready->spans[1].page_id;  // holds only "ready"
  for (uint32_t who : {1001u, ObjectIndex::kOperator}) {
    EXPECT_EQ(store_->LendWritablePage(0, ready_page, who).code(), Code::kPermissionDenied)
        << "a READY object's page is nobody's to write";
  }
  auto plan = store_->OpenForWrite("mine", 2 * kPage, 0, 3 * kMs, /*owner=*/1001);
  ASSERT_TRUE(plan.ok());
  const PageId mine = plan->spans[1].page_id;
  ASSERT_OK(store_->LendWritablePage(0, mine, 1001));
  EXPECT_TRUE(store_->LendWritablePage(0, plan->header_page, 1001).ok()) << "kv_commit_ready writes it";
  Status other = store_->LendWritablePage(0, mine, 1002);
  EXPECT_EQ(other.code(), Code::kPermissionDenied);
  EXPECT_NE(other.message().find("no open plan of yours (it is uid 1001's)"), std::string::npos) << other.ToString();
  EXPECT_EQ(store_->LendWritablePage(0, mine, ObjectIndex::kOperator).code(), Code::kPermissionDenied)
      << "the operator's uid writes through kvd, not another's plan";
  ASSERT_OK(store_->Commit("mine", plan->epoch, 4 * kMs));
  EXPECT_EQ(store_->LendWritablePage(0, mine, 1001).code(), Code::kPermissionDenied)
      << "a committed plan is READY: no more write fds";
  auto ordered = store_->OpenForWrite("ordered", 1000, 0, 5 * kMs);  // kvd's own caller
  ASSERT_TRUE(ordered.ok());
  ASSERT_OK(store_->LendWritablePage(0, ordered->spans[0].page_id, 1002));
  EXPECT_EQ(store_->LendWritablePage(7, mine, 1001).code(), Code::kNotFound);
  ASSERT_OK(store_->Revoke("ordered", ordered->epoch, 6 * kMs));
  Check();
}

// Issue 19 item 13: before a reclaim ran, a write past write_timeout still
// held its key against a new open and could still be committed.
TEST_F(ObjectStoreTest, AWritePastTheTimeoutIsDeadBeforeAnyReclaimRuns) {
  Open();
  auto plan = store_->OpenForWrite("late", 2 * kMiB, 0, 10 * kMs);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(store_->OpenForWrite("late", 10, 0, 1009 * kMs).status().code(), Code::kAlreadyExists)
      << "within write_timeout the key is taken";
  Status late = store_->Commit("late", plan->epoch, 1010 * kMs);
  EXPECT_EQ(late.code(), Code::kNotFound);
  EXPECT_NE(late.message().find("write_timeout"), std::string::npos) << late.ToString();
  EXPECT_FALSE(Has("late"));
  EXPECT_EQ(store_->Stats()[0].reclaimed_writes, 1u);

  auto again = store_->OpenForWrite("again", 2 * kMiB, 0, 2000 * kMs);
  ASSERT_TRUE(again.ok());
  auto reopened = store_->OpenForWrite("again", 10, 0, 3000 * kMs);
  ASSERT_TRUE(reopened.ok()) << "the dead write no longer blocks its key: "
                             << reopened.status().ToString();
  EXPECT_EQ(store_->Commit("again", again->epoch, 3001 * kMs).code(),
            Code::kFailedPrecondition)
      << "the old plan's epoch is stale";
  ASSERT_OK(store_->Commit("again", reopened->epoch, 3002 * kMs));
  Check();
}

}  // namespace
}  // namespace nanokv::kvd
