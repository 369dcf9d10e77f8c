// kvd restart with engines alive (issue 5): kill -9 kvd while engines hold
// mapped pages; their KV must survive, the engines must reconnect on their
// own, and the restarted kvd must take every page back under its old id, so
// no page is lost (counts exact) and none is granted twice (other tenants
// get disjoint ids). Real kvd processes; the test process is the engine.
#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/kv_tensor.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

class KvdRestartTest : public KvdFixture {
 protected:
  static constexpr size_t kPages = 32;

  void KillKvd() {
    kvd_.Signal(SIGKILL);
    ASSERT_TRUE(kvd_.Wait(std::chrono::seconds(10)).has_value());
  }

  // Fills each mapped page of `tensor` with bytes derived from its index and `seed`.
  void WritePattern(Client& client, KVTensor& tensor, size_t pages, uint8_t seed) {
    std::vector<uint8_t> bytes(tensor.page_bytes());
    for (size_t i = 0; i < pages; ++i) {
      for (size_t b = 0; b < bytes.size(); b += 4096) bytes[b] = static_cast<uint8_t>(seed + i + b / 4096);
      bytes[bytes.size() - 1] = static_cast<uint8_t>(seed ^ i);
      char* dst = static_cast<char*>(tensor.data()) + i * tensor.page_bytes();
      ASSERT_TRUE(client.CopyToDevice(dst, bytes.data(), bytes.size()).ok());
    }
  }

  void ExpectPattern(Client& client, KVTensor& tensor, size_t pages, uint8_t seed) {
    std::vector<uint8_t> bytes(tensor.page_bytes());
    for (size_t i = 0; i < pages; ++i) {
      const char* src = static_cast<const char*>(tensor.data()) + i * tensor.page_bytes();
      ASSERT_TRUE(client.CopyToHost(bytes.data(), src, bytes.size()).ok());
      for (size_t b = 0; b < bytes.size(); b += 4096) {
        ASSERT_EQ(bytes[b], static_cast<uint8_t>(seed + i + b / 4096)) << "page " << i;
      }
      ASSERT_EQ(bytes[bytes.size() - 1], static_cast<uint8_t>(seed ^ i)) << "page " << i;
    }
  }

  std::set<uint32_t> Ids(const KVTensor& tensor) {
    std::set<uint32_t> ids;
    for (size_t i = 0; i < tensor.page_count(); ++i) {
      if (auto id = tensor.page_id(i)) ids.insert(*id);
    }
    return ids;
  }

  const ipc::TenantRow* TenantNamed(const ipc::Snapshot& s, const std::string& name) {
    for (uint32_t t = 0; t < s.segment.header.tenant_count; ++t) {
      if (ipc::ReadString(s.segment.tenants[t].name) == name) return &s.segment.tenants[t];
    }
    return nullptr;
  }

  bool WaitConnected(Client& client) {
    return WaitFor([&] { return client.connected(); }, std::chrono::seconds(20));
  }
};

TEST_F(KvdRestartTest, EngineKeepsItsKvAcrossKill9) {
  StartKvd(kPages);
  auto engine = AttachClient("engine", "prefill");
  ASSERT_NE(engine, nullptr);
  auto tensor = KVTensor::Create(*engine, 0, 8 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_TRUE((*tensor)->Map(0, 8).ok());
  WritePattern(*engine, **tensor, 8, 7);
  std::set<uint32_t> before = Ids(**tensor);

  KillKvd();
  ASSERT_TRUE(WaitFor([&] { return !engine->connected(); }, std::chrono::seconds(10)));
  EXPECT_EQ(engine->Grant(0, 1).status().code(), Code::kUnavailable);
  ExpectPattern(*engine, **tensor, 8, 7);  // mapped pages outlive kvd

  StartKvd(kPages);
  ASSERT_TRUE(WaitConnected(*engine)) << kvd_.Log();
  EXPECT_EQ(engine->stats().reconnects, 1u);
  EXPECT_EQ(engine->stats().pages_forfeited, 0u);
  ExpectPattern(*engine, **tensor, 8, 7);
  EXPECT_EQ(Ids(**tensor), before);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 8; }, std::chrono::seconds(5)));

  ipc::Snapshot s = Read();
  ExpectCountsExact(s);
  EXPECT_EQ(s.segment.devices[0].granted_pages, 8u);
  const ipc::TenantRow* row = TenantNamed(s, "engine");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->used_pages[0], 8u);

  // Everything else goes to another group, with no id of the engine's.
  auto other = AttachClient("other", "decode");
  ASSERT_NE(other, nullptr);
  auto granted = other->Grant(0, kPages - 8);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  for (const GrantedPage& page : *granted) EXPECT_EQ(before.count(page.id), 0u) << page.id;
  EXPECT_EQ(other->Grant(0, 1).status().code(), Code::kResourceExhausted);
  PageLedger ledger;  // the engine's pages came back as its own, the rest are other's
  ledger.Attach("engine", "prefill");
  ledger.Attach("other", "decode");
  const std::vector<uint32_t> engine_ids(before.begin(), before.end());
  ledger.Hold("engine", 0, engine_ids);
  ledger.Hold("other", 0, *granted);
  ExpectLedger(ledger);

  // The engine works as before: it writes, and gives its pages back.
  WritePattern(*engine, **tensor, 8, 99);
  ExpectPattern(*engine, **tensor, 8, 99);
  ASSERT_TRUE((*tensor)->Unmap(0, 8).ok());
  EXPECT_TRUE(WaitFor([&] { return GrantedPages() == kPages - 8; }, std::chrono::seconds(5)));
  ledger.Release("engine", 0, engine_ids);
  ExpectLedger(ledger);
}

TEST_F(KvdRestartTest, PagesSharedInAGroupComeBackOnce) {
  StartKvd(kPages);
  auto a = AttachClient("a", "g");
  auto b = AttachClient("b", "g");
  ASSERT_TRUE(a && b);
  auto ta = KVTensor::Create(*a, 0, 4 * kPage);
  auto tb = KVTensor::Create(*b, 0, 4 * kPage);
  ASSERT_TRUE(ta.ok() && tb.ok());
  ASSERT_TRUE((*ta)->Map(0, 4).ok());
  WritePattern(*a, **ta, 4, 3);
  std::vector<uint32_t> ids;  // in a's slot order, so b's slot i is a's slot i
  for (size_t i = 0; i < 4; ++i) ids.push_back(*(*ta)->page_id(i));
  ASSERT_TRUE((*tb)->MapShared(0, 0, ids).ok());

  KillKvd();
  StartKvd(kPages);
  ASSERT_TRUE(WaitConnected(*a) && WaitConnected(*b)) << kvd_.Log();
  // Both handed back: the shared pages count as granted after the first one already.
  ASSERT_TRUE(WaitFor([&] {
    ipc::Snapshot now = Read();
    const auto* ra = TenantNamed(now, "a");
    const auto* rb = TenantNamed(now, "b");
    return ra != nullptr && rb != nullptr && ra->used_pages[0] == 4 && rb->used_pages[0] == 4;
  }, std::chrono::seconds(5)));
  ipc::Snapshot s = Read();
  ExpectCountsExact(s);
  EXPECT_EQ(s.segment.devices[0].granted_pages, 4u);  // shared pages count once
  ASSERT_NE(TenantNamed(s, "a"), nullptr);
  ASSERT_NE(TenantNamed(s, "b"), nullptr);
  EXPECT_EQ(TenantNamed(s, "a")->used_pages[0], 4u);
  EXPECT_EQ(TenantNamed(s, "b")->used_pages[0], 4u);
  PageLedger ledger;  // the same four pages, held by both, counted once
  ledger.Attach("a", "g");
  ledger.Attach("b", "g");
  ledger.Hold("a", 0, ids);
  ledger.Hold("b", 0, ids);
  ExpectLedger(ledger);
  // b reads a's bytes through its own mapping of the same pages.
  std::vector<uint8_t> ours(kPage), theirs(kPage);
  ASSERT_TRUE(a->CopyToHost(ours.data(), (*ta)->data(), kPage).ok());
  ASSERT_TRUE(b->CopyToHost(theirs.data(), (*tb)->data(), kPage).ok());
  EXPECT_EQ(ours, theirs);
}

TEST_F(KvdRestartTest, CleanStopWithPagesHeldAlsoHandsThemBack) {
  StartKvd(kPages);
  auto engine = AttachClient("engine");
  ASSERT_NE(engine, nullptr);
  auto tensor = KVTensor::Create(*engine, 0, 6 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_TRUE((*tensor)->Map(0, 6).ok());
  WritePattern(*engine, **tensor, 6, 42);
  StopKvd();
  StartKvd(kPages);
  ASSERT_TRUE(WaitConnected(*engine)) << kvd_.Log();
  EXPECT_TRUE(WaitFor([&] { return GrantedPages() == 6; }, std::chrono::seconds(5)));
  ExpectPattern(*engine, **tensor, 6, 42);
  PageLedger ledger;
  ledger.Attach("engine", "");
  const std::set<uint32_t> held = Ids(**tensor);
  ledger.Hold("engine", 0, std::vector<uint32_t>(held.begin(), held.end()));
  ExpectLedger(ledger);
}

// Pages of an engine that does not come back are held back for the new
// kvd's recovery window, then freed. Whether the window is still open when
// the test asks is a race with the clock: a grant that finds it over already
// (the new kvd's log says so) is no finding, and the round starts again
// with a window twice as long.
TEST_F(KvdRestartTest, PagesNotHandedBackAreFreedWhenTheWindowEnds) {
  StartKvd(kPages);
  std::chrono::milliseconds window(1500);
  for (int round = 0;; ++round, window *= 2) {
    ASSERT_LT(round, 6) << "every recovery window was over before the test asked, the last "
                        << (window / 2).count() << " ms";
    ClientOptions options = Options("gone-for-good-" + std::to_string(round));
    options.reconnect = false;  // an engine that will not come back
    auto engine = Client::Attach(options);
    ASSERT_TRUE(engine.ok());
    auto granted = (*engine)->Grant(0, 8);
    ASSERT_TRUE(granted.ok()) << granted.status().ToString();

    KillKvd();
    const size_t log_start = kvd_.Log().size();  // the log file is shared by every kvd here
    StartKvd(kPages, {"--recovery-window", std::to_string(window.count()) + "ms"});
    auto other = AttachClient("other", "elsewhere");
    ASSERT_NE(other, nullptr);
    // While the window is open the 8 pages are held back...
    auto early = other->Grant(0, kPages);
    if (early.ok() && kvd_.Log().find("recovery window over", log_start) != std::string::npos) {
      continue;  // asked too late: `other` detaches, and its pages serve the next round
    }
    EXPECT_EQ(early.status().code(), Code::kResourceExhausted) << early.status().ToString();
    // ...and once it closes they are free again: `other` holds every page.
    std::vector<GrantedPage> all;
    bool freed = WaitFor([&] {
      auto granted_all = other->Grant(0, kPages);
      if (granted_all.ok()) all = *granted_all;
      return granted_all.ok();
    }, window + std::chrono::seconds(10));
    EXPECT_TRUE(freed) << kvd_.Log();
    EXPECT_FALSE((*engine)->connected());
    PageLedger ledger;  // the engine that never came back is listed no more
    ledger.Attach("other", "elsewhere");
    ledger.Hold("other", 0, all);
    EXPECT_EQ(ledger.Held("other", 0).size(), kPages);
    ExpectLedger(ledger);
    break;
  }
}

TEST_F(KvdRestartTest, AStaleEngineCannotClaimPagesItDoesNotHold) {
  // An engine that comes back after the window: its pages went to others,
  // and kvd refuses them; the engine learns they are forfeited.
  StartKvd(kPages);
  ClientOptions options = Options("late", "late-group");
  options.reconnect_timeout_ms = 0;
  auto engine = Client::Attach(options);
  ASSERT_TRUE(engine.ok());
  auto tensor = KVTensor::Create(**engine, 0, 4 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_TRUE((*tensor)->Map(0, 4).ok());

  KillKvd();
  // kvd comes back with no window: the pages are free at once. The engine
  // reconnects within its back-off and hands them back; kvd refuses.
  StartKvd(kPages, {"--recovery-window", "0"});
  ASSERT_TRUE(WaitConnected(**engine)) << kvd_.Log();
  EXPECT_EQ((*engine)->stats().pages_forfeited, 4u);
  ASSERT_TRUE(WaitFor([&] { return Read().segment.header.publish_count > 1; }, std::chrono::seconds(5)));
  ipc::Snapshot s = Read();
  ExpectCountsExact(s);
  EXPECT_EQ(s.segment.devices[0].granted_pages, 0u);
  PageLedger ledger;  // attached again, holding nothing
  ledger.Attach("late", "late-group");
  ExpectLedger(ledger);
}

// The fds this process (the engine) has open now.
size_t OpenFds() {
  size_t n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  while (const dirent* entry = readdir(dir)) n += entry->d_name[0] != '.' ? 1 : 0;
  closedir(dir);
  return n;
}

// Issue 16 item 2: an engine keeps no fd per page it maps, and after a kvd
// restart hands its pages back by id alone. kvd has no page of them then
// (CUDA will not export an imported handle): they stay the engine's, a
// group-mate can neither share nor be granted them, and once the engine
// returns them they come back as fresh pages (a new generation).
TEST_F(KvdRestartTest, AnEngineKeepsNoFdPerPageAndItsPagesStayItsOwnAcrossARestart) {
  constexpr size_t kMapped = 256, kCapacity = kMapped + 16;
  StartKvd(kCapacity);
  auto engine = AttachClient("engine", "g");
  ASSERT_NE(engine, nullptr);
  auto tensor = KVTensor::Create(*engine, 0, kMapped * kPage);
  ASSERT_TRUE(tensor.ok());
  const size_t fds_before = OpenFds();
  ASSERT_TRUE((*tensor)->Map(0, kMapped).ok());
  const size_t fds_mapped = OpenFds();
  // O(1), not O(pages): it was two fds a host page (the handle's memfd and
  // the kept copy for a restart).
  EXPECT_LT(fds_mapped, fds_before + 16) << "before " << fds_before << ", after " << fds_mapped;
  WritePattern(*engine, **tensor, kMapped, 11);
  const std::set<uint32_t> before = Ids(**tensor);  // each of generation 0: a fresh kvd's
  ASSERT_EQ(before.size(), kMapped);

  KillKvd();
  StartKvd(kCapacity);
  ASSERT_TRUE(WaitConnected(*engine)) << kvd_.Log();
  EXPECT_EQ(engine->stats().pages_forfeited, 0u);
  ExpectPattern(*engine, **tensor, kMapped, 11);
  EXPECT_LT(OpenFds(), fds_before + 16) << "the hand-back took no fds either";
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == kMapped; }, std::chrono::seconds(5)));
  ExpectCountsExact(Read());

  // A group-mate may not share them (kvd has nothing to send it)...
  auto mate = AttachClient("mate", "g");
  ASSERT_NE(mate, nullptr);
  const uint32_t first = *before.begin();
  auto shared = mate->Share(0, std::vector<uint32_t>{first});
  EXPECT_EQ(shared.status().code(), Code::kFailedPrecondition) << shared.status().ToString();
  EXPECT_NE(shared.status().message().find("without an fd"), std::string::npos)
      << shared.status().ToString();
  // ...nor is it granted them: they are nobody else's until returned.
  auto rest = mate->Grant(0, kCapacity - kMapped);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  for (const GrantedPage& page : *rest) EXPECT_EQ(before.count(page.id), 0u) << page.id;
  EXPECT_EQ(mate->Grant(0, 1).status().code(), Code::kResourceExhausted);
  PageLedger ledger;
  ledger.Attach("engine", "g");
  ledger.Attach("mate", "g");
  const std::vector<uint32_t> engine_ids(before.begin(), before.end());
  ledger.Hold("engine", 0, engine_ids);
  ledger.Hold("mate", 0, *rest);
  ExpectLedger(ledger);

  // The engine returns them: the ids come back as fresh pages, to anyone.
  ASSERT_TRUE((*tensor)->Unmap(0, kMapped).ok());
  ledger.Release("engine", 0, engine_ids);
  std::vector<GrantedPage> fresh;
  ASSERT_TRUE(WaitFor([&] {
    auto granted = mate->Grant(0, kMapped);  // room once the engine dropped the old pages
    if (granted.ok()) fresh = *granted;
    return granted.ok();
  }, std::chrono::seconds(10))) << kvd_.Log();
  std::set<uint32_t> fresh_ids;
  for (const GrantedPage& page : fresh) {
    fresh_ids.insert(page.id);
    EXPECT_GT(page.generation, 0u) << "page " << page.id << " was made anew";
  }
  EXPECT_EQ(fresh_ids, before);
  ledger.Hold("mate", 0, fresh);
  ExpectLedger(ledger);
  ExpectCountsExact(Read());
}

// The example engine (issue 21, item 10): kvd is killed while the engine
// holds its KV; the engine waits, libkv reconnects it to the next kvd, which
// takes its pages back under their ids, and the engine finds every page's
// bytes intact, then (SIGUSR1 ends its hold) finishes its rounds and exits 0.
TEST_F(KvdRestartTest, ExampleEngineSurvivesKill9WithItsKvIntact) {
  StartKvd(kPages);
  Process engine = StartEngine("engine", {"--pages", "8", "--step", "2", "--rounds", "2", "--hold-ms", "600000",
                                          "--seed", "77", "--ids-out", dir_.path() + "/ids"});
  ASSERT_TRUE(WaitFor([&] { return engine.Log().find("round 0:") != std::string::npos; },
                      std::chrono::seconds(30))) << engine.Log();
  std::vector<uint32_t> ids;  // the 8 pages it holds now, as it wrote them down
  {
    std::ifstream in(dir_.path() + "/ids");
    for (uint32_t id; in >> id;) {
      ids.push_back(id);
      unsigned long long tag;
      in >> tag;
    }
  }
  ASSERT_EQ(ids.size(), 8u);
  KillKvd();
  ASSERT_TRUE(WaitFor([&] { return engine.Log().find("kvd went away") != std::string::npos; },
                      std::chrono::seconds(30))) << engine.Log();
  EXPECT_TRUE(engine.Running()) << engine.Log();  // it waits, it does not exit

  StartKvd(kPages);
  // The engine is back with its own page ids, counted exactly.
  ASSERT_TRUE(WaitFor([&] {
    ipc::Snapshot s = Read();
    const ipc::TenantRow* row = TenantNamed(s, "engine");
    return row != nullptr && row->used_pages[0] == 8;
  }, std::chrono::seconds(20))) << engine.Log() << kvd_.Log();
  PageLedger ledger;
  ledger.Attach("engine", "");
  ledger.Hold("engine", 0, ids);
  ExpectLedger(ledger);
  ASSERT_TRUE(WaitFor([&] { return engine.Log().find("reconnected to kvd") != std::string::npos; },
                      std::chrono::seconds(20))) << engine.Log();
  engine.Signal(SIGUSR1);  // on with its rounds: grow again from the new kvd, verify, shrink

  auto code = engine.Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "the engine never finished:\n" << engine.Log();
  EXPECT_EQ(*code, 0) << engine.Log();  // 3 would be a page that lost its bytes
  EXPECT_NE(engine.Log().find("reconnected to kvd; its 8 pages hold their bytes"), std::string::npos)
      << engine.Log();
  EXPECT_NE(engine.Log().find("round 1:"), std::string::npos) << engine.Log();
  EXPECT_TRUE(WaitFor([&] { return GrantedPages() == 0; }, std::chrono::seconds(10)));
  ExpectLedger(PageLedger{});
}

}  // namespace
}  // namespace nanokv::testing
