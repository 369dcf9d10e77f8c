// kvd with real engine processes on the host backend: concurrent grants,
// quotas and reclaim, death, tenant groups, and the segment as seen from
// another process.
#include <signal.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "examples/page_pattern.h"
#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "nanokv/kv_tensor.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

const ipc::TenantRow* FindRow(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
    if (ipc::ReadString(s.segment.tenants[i].name) == name) return &s.segment.tenants[i];
  }
  return nullptr;
}

class KvdEnginesTest : public KvdFixture {};

// Eight engines grow, verify and shrink at once on a device too small for all
// of them. A page granted to two engines would carry the other's pattern and
// fail its engine with exit code 3.
TEST_F(KvdEnginesTest, EightEnginesNeverHoldOnePageTwice) {
  StartKvd(/*pages=*/32);
  std::vector<Process> engines;
  for (int i = 0; i < 8; ++i) {
    engines.push_back(StartEngine("engine" + std::to_string(i),
                                  {"--pages", "8", "--step", "2", "--rounds", "4", "--quiet",
                                   "--seed", std::to_string(100 + i)}));
  }
  size_t peak = 0;
  WaitFor([&] {
    peak = std::max<size_t>(peak, GrantedPages());
    ExpectCountsExact(Read());
    for (auto& e : engines) if (e.Running()) return false;
    return true;
  }, 120s);
  for (auto& e : engines) {
    auto code = e.Wait(1s);
    ASSERT_TRUE(code.has_value()) << "engine still running";
    EXPECT_EQ(*code, 0) << e.Log();
  }
  EXPECT_GT(peak, 8u) << "the engines never overlapped";
  ASSERT_TRUE(WaitFor([&] { return Read().segment.header.tenant_count == 0; }, 5s));
  ipc::Snapshot s = Read();
  EXPECT_EQ(s.segment.devices[0].granted_pages, 0u);
  ExpectCountsExact(s);
  ExpectLedger(PageLedger{});  // every engine gone, nothing held
}

TEST_F(KvdEnginesTest, QuotaRefusalIsAClearError) {
  StartKvd(32);
  PageLedger ledger;
  auto client = AttachClient("small", "", 4 * kPage);
  ASSERT_TRUE(client);
  ledger.Attach("small", "");
  EXPECT_EQ(client->limit_bytes(), 4 * kPage);
  auto granted = client->Grant(0, 4);
  ASSERT_TRUE(granted.ok());
  ledger.Hold("small", 0, *granted);
  auto over = client->Grant(0, 1);
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_NE(over.status().message().find("limit"), std::string_view::npos) << over.status().ToString();
  // The node's own capacity refuses too, and says so.
  auto big = AttachClient("big");
  ledger.Attach("big", "");
  auto full = big->Grant(0, 29);
  EXPECT_EQ(full.status().code(), Code::kResourceExhausted);
  EXPECT_NE(full.status().message().find("device 0"), std::string_view::npos) << full.status().ToString();
  auto rest = big->Grant(0, 28);
  ASSERT_TRUE(rest.ok());
  ledger.Hold("big", 0, *rest);
  ExpectCountsExact(Read());
  ExpectLedger(ledger);
}

// A limit lowered below use: kvd asks, the engine's callback gives pages back,
// no grant is given meanwhile, and the tenant ends under its new limit.
TEST_F(KvdEnginesTest, LoweredLimitReclaimsThroughTheCallback) {
  StartKvd(32);
  auto client = AttachClient("reclaimable");
  ASSERT_TRUE(client);
  auto tensor = KVTensor::Create(*client, 0, 16 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_TRUE((*tensor)->Grow(8).ok());
  std::atomic<int> notices{0};
  client->OnReclaim([&](const ReclaimNotice& notice) {
    ++notices;
    EXPECT_TRUE((*tensor)->Shrink(notice.pages).ok());
  });
  auto limit = client->SetLimit(3 * kPage);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_EQ(*limit, 3 * kPage);
  ASSERT_TRUE(WaitFor([&] { return (*tensor)->mapped_pages() <= 3; }, 10s));
  EXPECT_EQ(notices.load(), 1);
  ASSERT_TRUE(WaitFor([&] {
    const ipc::Snapshot snap = Read();  // FindRow points into it: keep it alive
    const ipc::TenantRow* row = FindRow(snap, "reclaimable");
    return row != nullptr && row->used_bytes <= 3 * kPage &&
           row->state == static_cast<uint32_t>(ipc::TenantState::kAttached);
  }, 5s));
  EXPECT_EQ((*tensor)->mapped_pages(), 3u);
  EXPECT_EQ((*tensor)->Grow(1).code(), Code::kResourceExhausted) << "4 pages are over a 3-page limit";
  PageLedger ledger;  // what the tensor maps is what kvd counts
  ledger.Attach("reclaimable", "");
  for (size_t i = 0; i < (*tensor)->mapped_pages(); ++i) {
    uint32_t id = *(*tensor)->page_id(i);
    ledger.Hold("reclaimable", 0, {&id, 1});
  }
  ExpectLedger(ledger);
}

// An operator lowers an engine process's limit over the socket; the engine
// (another process) answers the reclaim by shrinking.
TEST_F(KvdEnginesTest, OperatorLimitReachesAnEngineProcess) {
  StartKvd(32);
  Process engine = StartEngine("held", {"--pages", "8", "--step", "8", "--rounds", "1", "--hold-ms", "60000"});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 8; }, 10s)) << engine.Log();
  // An operator's set-limit names the tenant: the raw message, as kvctl will send it.
  auto channel = ipc::Channel::Connect(SocketPath());
  ASSERT_TRUE(channel.ok());
  wire::Message m;
  m.set_request_id(1);
  m.mutable_set_limit()->set_tenant("held");
  m.mutable_set_limit()->set_limit_bytes(2 * kPage);
  ASSERT_TRUE(channel->Send(wire::Encode(m)).ok());
  std::vector<std::byte> data;
  std::vector<int> fds;
  ASSERT_TRUE(channel->Receive(&data, &fds).ok());
  wire::Message reply;
  ASSERT_TRUE(wire::Decode(data, &reply).ok());
  ASSERT_TRUE(reply.has_set_limit_reply()) << reply.DebugString();
  EXPECT_EQ(reply.set_limit_reply().used_bytes(), 8 * kPage);
  // The engine answers while it holds (its hold lasts a minute).
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() <= 2; }, 20s)) << engine.Log();
  EXPECT_TRUE(engine.Running());
  ASSERT_TRUE(WaitFor([&] { return engine.Log().find("kvd asked for 6 pages back") != std::string::npos; }, 5s))
      << engine.Log();
  const ipc::Snapshot snap = Read();  // FindRow points into it: keep it alive
  const ipc::TenantRow* row = FindRow(snap, "held");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->limit_bytes, 2 * kPage);
  EXPECT_EQ(row->used_bytes, 2 * kPage);
  ExpectLedger(PageLedger{}, {"held"}, {{0, 2}});
  engine.Signal(SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return GrantedPages() == 0; }, 5s));
  ExpectLedger(PageLedger{});
}

// kill -9 at random moments of a grant/return loop: every page comes back.
TEST_F(KvdEnginesTest, KilledEnginesGiveEveryPageBack) {
  StartKvd(32);
  std::mt19937 rng(42);
  for (int round = 0; round < 6; ++round) {
    Process engine = StartEngine("victim" + std::to_string(round),
                                 {"--pages", "16", "--step", "1", "--rounds", "1000", "--quiet"});
    ASSERT_TRUE(WaitFor([&] { return GrantedPages() > 0; }, 10s)) << engine.Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));
    engine.Signal(SIGKILL);
    ASSERT_EQ(engine.Wait(5s), 128 + SIGKILL);
    ASSERT_TRUE(WaitFor([&] {
      ipc::Snapshot s = Read();
      return s.segment.header.tenant_count == 0 && s.segment.devices[0].granted_pages == 0;
    }, 5s)) << "round " << round << ": pages of a killed engine stayed granted";
    ExpectCountsExact(Read());
    ExpectLedger(PageLedger{});
  }
}

// Two engines of one group see each other's bytes through one page; an engine
// of another group is refused the same page ids.
TEST_F(KvdEnginesTest, GroupsShareBytesAndOnlyInsideTheGroup) {
  StartKvd(32);
  auto owner = AttachClient("owner", "g1");
  ASSERT_TRUE(owner);
  auto tensor = KVTensor::Create(*owner, 0, 2 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_TRUE((*tensor)->Grow(2).ok());
  std::string ids;
  for (size_t i = 0; i < 2; ++i) {
    auto words = examples::PageWords(kPage, examples::PageTag(1111, i));
    char* at = static_cast<char*>((*tensor)->data()) + i * kPage;
    ASSERT_TRUE(owner->CopyToDevice(at, words.data(), kPage).ok());
    ids += (i ? "," : "") + std::to_string(*(*tensor)->page_id(i));
  }
  Process peer = StartEngine("peer", {"--share-ids", ids, "--expect-seed", "1111", "--write-seed", "2222"},
                             {{"NANOKV_GROUP", "g1"}});
  auto code = peer.Wait(20s);
  ASSERT_TRUE(code.has_value());
  ASSERT_EQ(*code, 0) << peer.Log();
  for (size_t i = 0; i < 2; ++i) {
    std::vector<uint64_t> got(kPage / 8);
    char* at = static_cast<char*>((*tensor)->data()) + i * kPage;
    ASSERT_TRUE(owner->CopyToHost(got.data(), at, kPage).ok());
    EXPECT_EQ(got, examples::PageWords(kPage, examples::PageTag(2222, i))) << "page " << i;
  }
  Process stranger = StartEngine("stranger", {"--share-ids", ids, "--expect-seed", "2222", "--write-seed", "3"},
                                 {{"NANOKV_GROUP", "g2"}});
  code = stranger.Wait(20s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1) << stranger.Log();
  EXPECT_NE(stranger.Log().find("PermissionDenied"), std::string::npos) << stranger.Log();
  ExpectCountsExact(Read());
  PageLedger ledger;  // the peer and the stranger are gone; the owner's two pages stay
  ledger.Attach("owner", "g1");
  for (size_t i = 0; i < 2; ++i) {
    uint32_t id = *(*tensor)->page_id(i);
    ledger.Hold("owner", 0, {&id, 1});
  }
  ExpectLedger(ledger);
}

// The segment, read from this process, says what kvd holds.
TEST_F(KvdEnginesTest, SegmentMatchesKvdState) {
  StartKvd(32);
  auto a = AttachClient("alpha", "ga", 10 * kPage);
  auto b = AttachClient("beta", "gb");
  ASSERT_TRUE(a && b);
  PageLedger ledger;
  ledger.Attach("alpha", "ga");
  ledger.Attach("beta", "gb");
  auto got_a = a->Grant(0, 3);
  auto got_b = b->Grant(0, 5);
  ASSERT_TRUE(got_a.ok() && got_b.ok());
  ledger.Hold("alpha", 0, *got_a);
  ledger.Hold("beta", 0, *got_b);
  ExpectLedger(ledger);
  ipc::Snapshot s;
  ASSERT_TRUE(WaitFor([&] { s = Read(); return s.segment.devices[0].granted_pages == 8; }, 5s));
  EXPECT_TRUE(s.kvd_alive);
  EXPECT_EQ(s.segment.header.kvd_pid, kvd_.pid());
  EXPECT_EQ(ipc::ReadString(s.segment.header.backend), Backend());
  EXPECT_EQ(s.segment.header.page_bytes, kPage);
  EXPECT_EQ(s.segment.devices[0].capacity_pages, 32u);
  ExpectCountsExact(s);
  const ipc::TenantRow* alpha = FindRow(s, "alpha");
  const ipc::TenantRow* beta = FindRow(s, "beta");
  ASSERT_TRUE(alpha && beta);
  EXPECT_EQ(alpha->used_bytes, 3 * kPage);
  EXPECT_EQ(alpha->used_pages[0], 3u);
  EXPECT_EQ(alpha->limit_bytes, 10 * kPage);
  EXPECT_EQ(ipc::ReadString(alpha->group), "ga");
  EXPECT_EQ(alpha->pid, getpid());
  EXPECT_EQ(beta->used_bytes, 5 * kPage);
  // No limit asked: the node's whole capacity, every device kvd serves
  // (one on host, each GPU of the machine on cuda: two on a two-GPU run).
  EXPECT_EQ(beta->limit_bytes, s.segment.header.device_count * 32 * kPage);
  EXPECT_GT(s.segment.header.update_unix_ns, s.segment.header.start_unix_ns - 1);
}

// SIGTERM: engines are told, the socket and segment go, mapped pages stay.
TEST_F(KvdEnginesTest, StopsCleanlyAndMappedPagesOutliveIt) {
  StartKvd(32);
  auto client = AttachClient("survivor");
  ASSERT_TRUE(client);
  auto tensor = KVTensor::Create(*client, 0, kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_TRUE((*tensor)->Grow(1).ok());
  auto words = examples::PageWords(kPage, 5);
  ASSERT_TRUE(client->CopyToDevice((*tensor)->data(), words.data(), kPage).ok());
  StopKvd();
  EXPECT_NE(access(SocketPath().c_str(), F_OK), 0) << "socket left behind";
  EXPECT_EQ(ipc::ReadSegment(ipc_).status().code(), Code::kNotFound) << "segment left behind";
  ASSERT_TRUE(WaitFor([&] { return !client->connected(); }, 5s));
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kUnavailable);
  std::vector<uint64_t> got(kPage / 8);
  ASSERT_TRUE(client->CopyToHost(got.data(), (*tensor)->data(), kPage).ok());
  EXPECT_EQ(got, words) << "a mapped page lost its bytes when kvd stopped";
}

}  // namespace
}  // namespace nanokv::testing
