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

// Issue 32 item 4: a reader killed mid-read kept its object leased (from
// eviction, demotion and remove) for the rest of lease_ttl. Every lease
// taken over a connection, timed or held, ends at its close; one that
// expires or is released first is forgotten by the connection too.
TEST_F(ObjectStoreTest, AConnectionsCloseEndsItsTimedAndHeldLeases) {
  Open();
  PutMany("o", 3, kMiB);
  constexpr uint64_t kConnection = 7;
  ASSERT_TRUE(store_->AcquireLease("o0", kHolder, kMs, kConnection).ok());
  ASSERT_TRUE(store_->AcquireLease("o1", kHolder, kMs, kConnection, ObjectIndex::LeaseTerm::kHeld).ok());
  auto released = store_->AcquireLease("o2", kHolder, kMs, kConnection);
  ASSERT_TRUE(released.ok());
  ASSERT_OK(store_->ReleaseLease("o2", released->id, kMs, kHolder));
  ASSERT_TRUE(store_->AcquireLease("o2", kHolder, kMs, /*connection=*/8).ok()) << "another connection's";
  EXPECT_EQ(store_->Remove("o0", 2 * kMs).code(), Code::kFailedPrecondition) << "leased, well inside lease_ttl";
  EXPECT_EQ(store_->EndConnectionLeases(kConnection), 2u);
  EXPECT_EQ(store_->lease_count(kHolder), 1u) << "connection 8's lease stands";
  ASSERT_OK(store_->Remove("o0", 2 * kMs));
  ASSERT_OK(store_->Remove("o1", 2 * kMs));
  EXPECT_EQ(store_->Remove("o2", 2 * kMs).code(), Code::kFailedPrecondition);
  // Expired before its connection closed: gone from both lists.
  const uint64_t later = 2 * kMs + static_cast<uint64_t>(config_.lease_ttl.count()) * kMs;
  EXPECT_EQ(store_->Reclaim(later), 0u);
  EXPECT_EQ(store_->lease_count(), 0u);
  EXPECT_EQ(store_->EndConnectionLeases(8), 0u);
  Check();
}

// A batch release names leases by id alone: only the holder's (or the
// operator's) end, an unknown or expired id is no fault, just not counted.
TEST_F(ObjectStoreTest, ABatchReleaseByIdEndsOnlyTheHoldersLeases) {
  Open();
  PutMany("o", 2, kMiB);
  auto a = store_->AcquireLease("o0", kHolder, kMs);
  auto b = store_->AcquireLease("o1", kHolder + 1, kMs);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<uint64_t> ids = {a->id, b->id, 424242};
  EXPECT_EQ(store_->ReleaseLeases(ids, kMs, kHolder), 1u) << "o1's lease is another uid's";
  ASSERT_OK(store_->Remove("o0", kMs));
  EXPECT_EQ(store_->Remove("o1", kMs).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->ReleaseLeases(ids, kMs, ObjectIndex::kOperator), 1u);
  ASSERT_OK(store_->Remove("o1", kMs));
  Check();
}

// Issue 19 item 12: remove was anyone's.
TEST_F(ObjectStoreTest, OnlyTheProducersUidOrTheOperatorRemoves) {
  Open();
  auto plan = store_->OpenForWrite("owned", 100, 0, kMs, /*owner=*/1001);
  ASSERT_TRUE(plan.ok());
  ASSERT_OK(store_->Commit("owned", plan->epoch, 2 * kMs, 1001));
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

// kvd hands write fds only to a plan's writer, for that plan's pages: its
// uid for a plan opened over the socket, whoever shows the write secret for
// one kvd's own callers opened (the master's orders). Before, any uid got
// them for a page of kvd's own callers with an open plan: root's, whose
// READY objects shared it.
TEST_F(ObjectStoreTest, WriteFdsOnlyForThePlansWriter) {
  Open();
  ASSERT_OK(PutByPlan("ready", Pattern(2 * kPage + 100, 1), 0, kMs, 1001));
  auto ready = store_->GetLocation("ready", 2 * kMs);
  ASSERT_TRUE(ready.ok());
  const PageId ready_page = ready->spans[1].page_id;  // holds only "ready"
  for (uint32_t who : {1001u, 1002u, ObjectIndex::kOperator}) {
    Status refused = Lend(*ready, ready_page, who);
    EXPECT_EQ(refused.code(), Code::kPermissionDenied) << "a READY object's page is nobody's to write";
    EXPECT_NE(refused.message().find("is lent for no plan 'ready' (epoch"), std::string::npos) << refused.ToString();
  }
  auto plan = store_->OpenForWrite("mine", 2 * kPage, 0, 3 * kMs, /*owner=*/1001);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->write_secret, 0u) << "a uid's plan is its uid's: no secret";
  const PageId mine = plan->spans[1].page_id;
  ASSERT_OK(Lend(*plan, mine, 1001));
  EXPECT_TRUE(Lend(*plan, plan->header_page, 1001).ok()) << "kv_commit_ready writes it";
  for (uint32_t who : {1002u, ObjectIndex::kOperator, 0u}) {
    Status other = Lend(*plan, mine, who);
    EXPECT_EQ(other.code(), Code::kPermissionDenied);
    EXPECT_NE(other.message().find("lent only to plan 'mine' (epoch " + std::to_string(plan->epoch) +
                                   ")'s writer, uid 1001"),
              std::string::npos)
        << other.ToString();
  }
  EXPECT_EQ(Lend(*plan, ready->spans[0].page_id, 1001).code(), Code::kPermissionDenied)
      << "another plan's page of the same owner";
  ObjectPlan stale = *plan;
  stale.epoch = plan->epoch + 1;
  EXPECT_EQ(Lend(stale, mine, 1001).code(), Code::kPermissionDenied) << "another epoch";
  ASSERT_OK(store_->Commit("mine", plan->epoch, 4 * kMs, 1001));
  EXPECT_EQ(Lend(*plan, mine, 1001).code(), Code::kPermissionDenied) << "a committed plan is READY: no more write fds";

  auto ordered = store_->OpenForWrite("ordered", 1000, 0, 5 * kMs);  // kvd's own caller
  ASSERT_TRUE(ordered.ok());
  ASSERT_NE(ordered->write_secret, 0u);
  const PageId page = ordered->spans[0].page_id;
  ASSERT_TRUE(Lend(*ordered, page, 1002, ordered->write_secret).ok()) << "whoever the master gave the plan to";
  for (uint64_t secret : {uint64_t{0}, ordered->write_secret ^ 1}) {
    Status guessed = Lend(*ordered, page, 1002, secret);
    EXPECT_EQ(guessed.code(), Code::kPermissionDenied);
    EXPECT_NE(guessed.message().find("shows the write secret"), std::string::npos) << guessed.ToString();
  }
  auto located = store_->WritingPlan("ordered", ordered->epoch);
  ASSERT_TRUE(located.ok());
  EXPECT_EQ(located->write_secret, 0u) << "only the open's answer carries it";
  EXPECT_EQ(store_->LendWritablePage(7, mine, {1001, "mine", plan->epoch, 0}).code(), Code::kNotFound);
  ASSERT_OK(store_->Revoke("ordered", ordered->epoch, 6 * kMs));
  Check();
}

// Epochs are in every listing: commit and revoke are the writer's alone
// (root's and kvd's own callers' uid included), pins the owner's and the
// operator's.
TEST_F(ObjectStoreTest, CommitRevokeAndPinAreTheOwnersByEpochOrNot) {
  Open();
  auto plan = store_->OpenForWrite("w", 100, 0, kMs, /*owner=*/1001);
  ASSERT_TRUE(plan.ok());
  for (uint32_t who : {1002u, 0u, ObjectIndex::kOperator}) {
    Status commit = store_->Commit("w", plan->epoch, 2 * kMs, who);
    EXPECT_EQ(commit.code(), Code::kPermissionDenied) << who;
    EXPECT_NE(commit.message().find("only its writer (uid 1001) may commit or revoke it"), std::string::npos)
        << commit.ToString();
    EXPECT_EQ(store_->Revoke("w", plan->epoch, 2 * kMs, who).code(), Code::kPermissionDenied) << who;
  }
  EXPECT_EQ(store_->Commit("w", plan->epoch + 1, 2 * kMs, 1002).code(), Code::kFailedPrecondition)
      << "a stale epoch is told as before";
  ASSERT_OK(store_->Commit("w", plan->epoch, 3 * kMs, 1001));
  Status pin = store_->SetPin("w", ObjectPin::kHard, 1002);
  EXPECT_EQ(pin.code(), Code::kPermissionDenied);
  EXPECT_NE(pin.message().find("only its owner (uid 1001), root or kvd's user may pin it"), std::string::npos)
      << pin.ToString();
  ASSERT_OK(store_->SetPin("w", ObjectPin::kHard, 1001));
  ASSERT_OK(store_->SetPin("w", ObjectPin::kNone, ObjectIndex::kOperator));

  auto ordered = store_->OpenForWrite("ordered", 100, 0, 4 * kMs);  // kvd's own caller: the master's order
  ASSERT_TRUE(ordered.ok());
  Status commit = store_->Commit("ordered", ordered->epoch, 5 * kMs, 1001);
  EXPECT_NE(commit.message().find("only its writer (kvd's own callers"), std::string::npos) << commit.ToString();
  ASSERT_OK(store_->Commit("ordered", ordered->epoch, 5 * kMs));
  EXPECT_EQ(store_->SetPin("ordered", ObjectPin::kSoft, 1001).code(), Code::kPermissionDenied);
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
