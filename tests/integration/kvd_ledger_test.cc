// Page ownership checked against an independent record: every grant, share,
// return, detach and kill of these tests goes into a PageLedger, and kvd's
// published rows must agree with it (page_ledger.h says why counters checked
// against each other are not enough). Two devices, up to the last page id.
#include <signal.h>

#include <algorithm>
#include <random>

#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kPagesPerDevice = 128;

class KvdLedgerTest : public KvdFixture {
 protected:
  // The host backend simulates two devices in kvd and in this process.
  void SetUp() override {
    KvdFixture::SetUp();
    setenv("NANOKV_HOST_DEVICES", "2", 1);
  }
  void TearDown() override {
    KvdFixture::TearDown();
    unsetenv("NANOKV_HOST_DEVICES");
  }

  void Start() {
    StartKvd(kPagesPerDevice, {"--host-devices", "2"});
    if (Read().segment.header.device_count < 2) GTEST_SKIP() << "kvd serves one device here";
  }

  // A client that is also a tenant of the ledger.
  std::unique_ptr<Client> Join(PageLedger& ledger, const std::string& name,
                               const std::string& group) {
    auto client = AttachClient(name, group);
    if (client) ledger.Attach(name, group);
    return client;
  }

  // Grants `count` pages and records them; a refusal must be for room or quota.
  void Grant(PageLedger& ledger, Client& client, int device, uint32_t count) {
    auto granted = client.Grant(device, count);
    if (granted.ok()) {
      ledger.Hold(client.tenant(), device, *granted);
    } else {
      EXPECT_EQ(granted.status().code(), Code::kResourceExhausted) << granted.status().ToString();
    }
  }
};

// A random walk over grants, shares, returns, refused cross-group shares,
// reclaims and detaches of six tenants in three groups, until both devices
// have been full; the ledger is compared with kvd's rows every few steps.
TEST_F(KvdLedgerTest, RandomOwnershipChangesAgreeWithTheLedger) {
  Start();
  if (IsSkipped()) return;
  PageLedger ledger;
  std::mt19937 rng(20261124);
  constexpr int kSlots = 6;
  std::vector<std::unique_ptr<Client>> clients(kSlots);
  std::vector<int> lives(kSlots, 0);
  auto name = [&](int slot) { return "t" + std::to_string(slot) + "." + std::to_string(lives[slot]); };
  auto group = [](int slot) { return "g" + std::to_string(slot % 3); };
  for (int slot = 0; slot < kSlots; ++slot) clients[slot] = Join(ledger, name(slot), group(slot));
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };

  for (int step = 0; step < 400; ++step) {
    int slot = static_cast<int>(pick(kSlots));
    Client& client = *clients[slot];
    int device = static_cast<int>(pick(2));
    std::vector<uint32_t> held = ledger.Held(client.tenant(), device);
    int op = static_cast<int>(pick(100));
    if (op < 40) {
      Grant(ledger, client, device, 1 + static_cast<uint32_t>(pick(12)));
    } else if (op < 60 && !held.empty()) {
      std::shuffle(held.begin(), held.end(), rng);
      held.resize(1 + pick(held.size()));
      ASSERT_TRUE(client.Return(device, held).ok());
      ledger.Release(client.tenant(), device, held);
    } else if (op < 75) {
      // Share what a group-mate holds and this tenant does not.
      int mate = (slot + 3) % kSlots;
      std::vector<uint32_t> theirs = ledger.Held(clients[mate]->tenant(), device);
      std::vector<uint32_t> ids;
      for (uint32_t id : theirs) {
        if (ids.size() < 4 && !std::binary_search(held.begin(), held.end(), id)) ids.push_back(id);
      }
      if (ids.empty()) continue;
      auto shared = client.Share(device, ids);
      if (shared.ok()) {
        ledger.Hold(client.tenant(), device, *shared);
      } else {
        EXPECT_EQ(shared.status().code(), Code::kResourceExhausted) << shared.status().ToString();
      }
    } else if (op < 82) {
      // Another group's page is refused, and nothing changes.
      std::vector<uint32_t> theirs = ledger.Held(clients[(slot + 1) % kSlots]->tenant(), device);
      if (theirs.empty()) continue;
      EXPECT_EQ(client.Share(device, {&theirs[0], 1}).status().code(), Code::kPermissionDenied);
    } else if (op < 90 && !held.empty()) {
      // A limit lowered below use: reclaiming until the tenant gives back.
      uint64_t used = 0;
      for (int d = 0; d < 2; ++d) used += ledger.Held(client.tenant(), d).size();
      if (used < 2) continue;
      ASSERT_TRUE(client.SetLimit((used - 1) * kPage).ok());
      EXPECT_EQ(client.Grant(device, 1).status().code(), Code::kResourceExhausted);
      ASSERT_TRUE(client.Return(device, {&held.back(), 1}).ok());
      ledger.Release(client.tenant(), device, {&held.back(), 1});
      ASSERT_TRUE(client.SetLimit(2 * kPagesPerDevice * kPage).ok());
    } else if (op >= 90) {
      ASSERT_TRUE(client.Detach().ok());
      clients[slot].reset();
      ledger.Drop(name(slot));
      ++lives[slot];
      clients[slot] = Join(ledger, name(slot), group(slot));
      ASSERT_TRUE(clients[slot]);
    }
    if (step % 16 == 15) ExpectLedger(ledger);
    if (HasFailure()) return;
  }
  ExpectLedger(ledger);
  EXPECT_GE(ledger.highest_id(), kPagesPerDevice - 8) << "the walk never reached high page ids";
}

// Detach gives back every page of every device, the last id of each too.
TEST_F(KvdLedgerTest, DetachGivesBackEveryPageOfEveryDevice) {
  Start();
  if (IsSkipped()) return;
  PageLedger ledger;
  auto stays = Join(ledger, "stays", "a");
  auto leaves = Join(ledger, "leaves", "b");
  ASSERT_TRUE(stays && leaves);
  for (int device = 0; device < 2; ++device) {
    Grant(ledger, *stays, device, 3);
    Grant(ledger, *leaves, device, kPagesPerDevice - 3);  // up to the device's last id
  }
  EXPECT_EQ(ledger.highest_id(), kPagesPerDevice - 1);
  ExpectLedger(ledger);
  ASSERT_TRUE(leaves->Detach().ok());
  ledger.Drop("leaves");
  ExpectLedger(ledger);
  // What it gave back is free for the others: both devices fill up again.
  for (int device = 0; device < 2; ++device) Grant(ledger, *stays, device, kPagesPerDevice - 3);
  ExpectLedger(ledger);
  EXPECT_EQ(ledger.HeldPages(0) + ledger.HeldPages(1), 2 * kPagesPerDevice);
}

// An engine process killed with SIGKILL leaves exactly the others' pages.
TEST_F(KvdLedgerTest, AKilledEngineLeavesExactlyTheOthersPages) {
  Start();
  if (IsSkipped()) return;
  PageLedger ledger;
  auto mate = Join(ledger, "mate", "g");
  auto other = Join(ledger, "other", "h");
  ASSERT_TRUE(mate && other);
  Grant(ledger, *mate, 0, 5);
  Grant(ledger, *mate, 1, 7);
  Grant(ledger, *other, 1, 9);
  Process engine = StartEngine("victim", {"--pages", "16", "--step", "16", "--rounds", "1",
                                          "--hold-ms", "60000"}, {{"NANOKV_GROUP", "g"}});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages(0) == 5 + 16; }, 20s)) << engine.Log();
  ExpectLedger(ledger, {"victim"}, {{0, 16}});
  engine.Signal(SIGKILL);
  ASSERT_EQ(engine.Wait(5s), 128 + SIGKILL);
  ExpectLedger(ledger);
  // The group-mate still holds its own pages and can give them back.
  std::vector<uint32_t> held = ledger.Held("mate", 1);
  ASSERT_TRUE(mate->Return(1, held).ok());
  ledger.Release("mate", 1, held);
  ExpectLedger(ledger);
}

}  // namespace
}  // namespace nanokv::testing
