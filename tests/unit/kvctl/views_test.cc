#include "kvctl/views.h"

#include <gtest/gtest.h>

#include "ipc/segment/layout.h"
#include "tests/unit/kvctl/fake_segment.h"
#include "tests/unit/kvctl/mini_json.h"

namespace nanokv::kvctl {
namespace {

using testing::FakeKvd;
using testing::FakeTenant;
using testing::JsonParser;
using testing::kFakeNow;
using testing::kFakePage;

ViewOptions Options(bool json = false) {
  ViewOptions options;
  options.json = json;
  options.now_unix_ns = kFakeNow;
  return options;
}

std::vector<Kvd> TwoKvds() {
  std::vector<Kvd> kvds;
  kvds.push_back(FakeKvd("node-a", {{.name = "vllm", .pid = 11, .limit_pages = 32, .pages_dev0 = 8,
                                     .pages_dev1 = 4, .reserve_pages = 2},
                                    {.name = "sglang", .group = "g2", .pid = 12, .pages_dev1 = 15,
                                     .state = ipc::TenantState::kReclaiming}}));
  kvds.push_back(FakeKvd("node-b", {{.name = "old", .pid = 13, .pages_dev0 = 2}}, KvdState::kStale));
  return kvds;
}

TEST(Views, ListWithNoKvdIsAnEmptyTable) {
  EXPECT_EQ(ListView({}, Options()),
            "IPC  PID  BACKEND  DEVICES  CAPACITY  USED  USE%  TENANTS  STATE  UPDATED\n");
  EXPECT_EQ(ListView({}, Options(true)), "{\"kvds\":[]}\n");
}

TEST(Views, ListHasARowPerKvd) {
  std::string table = ListView(TwoKvds(), Options());
  EXPECT_NE(table.find("node-a  4242  host     0,1      256.0 MiB  54.0 MiB  21.1%        2  live   now"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("stale"), std::string::npos) << table;
}

TEST(Views, ListJsonCarriesTotalsDevicesAndTimes) {
  auto doc = JsonParser::Parse(ListView(TwoKvds(), Options(true)));
  ASSERT_TRUE(doc);
  const auto& a = (*doc)["kvds"][0];
  EXPECT_EQ(a["ipc"].str(), "node-a");
  EXPECT_EQ(a["state"].str(), "live");
  EXPECT_EQ(a["pid"].i64(), 4242);
  EXPECT_EQ(a["capacity_bytes"].u64(), 128 * kFakePage);
  EXPECT_EQ(a["used_bytes"].u64(), 27 * kFakePage);
  EXPECT_EQ(a["tenants"].u64(), 2u);
  EXPECT_EQ(a["updated_unix_ns"].u64(), kFakeNow - 200'000'000ull);
  ASSERT_EQ(a["devices"].items.size(), 2u);
  EXPECT_EQ(a["devices"][1]["name"].str(), "Fake GPU 1");
  EXPECT_EQ(a["devices"][1]["granted_pages"].u64(), 19u);
  EXPECT_EQ((*doc)["kvds"][1]["state"].str(), "stale");
}

// Issue 16 item 4: a kvd whose tenant table is full (256) says so: the
// next engine's attach is refused.
TEST(Views, ListSaysWhenTheTenantTableIsFull) {
  std::vector<Kvd> kvds = TwoKvds();
  EXPECT_FALSE(JsonParser::Parse(ListView(kvds, Options(true))).value()["kvds"][0]["tenant_table_full"].boolean);
  ipc::Segment& segment = kvds[0].snapshot->segment;
  for (uint32_t i = 2; i < ipc::kMaxTenants; ++i) segment.tenants[i] = segment.tenants[0];
  segment.header.tenant_count = ipc::kMaxTenants;
  EXPECT_NE(ListView(kvds, Options()).find(" 256 (full)  live"), std::string::npos)
      << ListView(kvds, Options());
  auto doc = JsonParser::Parse(ListView(kvds, Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_TRUE((*doc)["kvds"][0]["tenant_table_full"].boolean);
  EXPECT_EQ((*doc)["kvds"][0]["tenants"].u64(), 256u);
}

TEST(Views, UnreadableKvdsAreListedWithTheirError) {
  Kvd busy;
  busy.ipc_name = "busy";
  busy.error = Status::Unavailable("segment busy");
  std::string table = ListView({busy}, Options());
  EXPECT_NE(table.find("busy    -  -"), std::string::npos) << table;
  EXPECT_NE(table.find("unreadable"), std::string::npos) << table;
  auto doc = JsonParser::Parse(ListView({busy}, Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_NE((*doc)["kvds"][0]["error"].str().find("segment busy"), std::string::npos);
}

TEST(Views, TenantsShowsEveryFigureOfARow) {
  std::vector<Kvd> kvds = {TwoKvds()[0]};
  std::string table = TenantsView(kvds, Options());
  EXPECT_EQ(table,
            "TENANT  PID  GROUP    DEVICE     LIMIT      USED   RESERVE   USE%  STATE       ACTIVE\n"
            "sglang   12  g2       1       32.0 MiB  30.0 MiB       0 B  93.8%  reclaiming  3s ago\n"
            "vllm     11  default  0,1     64.0 MiB  24.0 MiB  4.00 MiB  37.5%  attached    3s ago\n");
  // Where no engine keeps a reserve, the column is left out.
  std::string none = TenantsView({TwoKvds()[1]}, Options());
  EXPECT_EQ(none.find("RESERVE"), std::string::npos) << none;
  EXPECT_NE(none.find("USE%"), std::string::npos) << none;
}

TEST(Views, TenantsSortAndIpcColumn) {
  ViewOptions options = Options();
  options.sort = SortKey::kUsed;
  options.with_ipc = true;
  std::string table = TenantsView(TwoKvds(), options);
  EXPECT_LT(table.find("sglang"), table.find("vllm")) << table;
  EXPECT_NE(table.find("node-b  old"), std::string::npos) << table;
  EXPECT_NE(table.find("stale"), std::string::npos) << "a dead kvd's tenants are not 'attached'";
  options.sort = SortKey::kName;
  table = TenantsView(TwoKvds(), options);
  EXPECT_LT(table.find("sglang"), table.find("vllm")) << table;
  options.sort = SortKey::kPid;
  table = TenantsView(TwoKvds(), options);
  EXPECT_LT(table.find("vllm"), table.find("sglang")) << table;
}

TEST(Views, TenantsJsonHasPerDeviceUse) {
  std::vector<Kvd> kvds = {TwoKvds()[0]};
  ViewOptions options = Options(true);
  auto doc = JsonParser::Parse(TenantsView(kvds, options));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["ipc"].str(), "node-a");
  const auto& tenants = (*doc)["tenants"];
  ASSERT_EQ(tenants.items.size(), 2u);
  const auto& vllm = tenants[1];
  EXPECT_EQ(vllm["name"].str(), "vllm");
  EXPECT_EQ(vllm["pid"].i64(), 11);
  EXPECT_EQ(vllm["group"].str(), "default");
  EXPECT_EQ(vllm["state"].str(), "attached");
  EXPECT_EQ(vllm["limit_bytes"].u64(), 32 * kFakePage);
  EXPECT_EQ(vllm["used_bytes"].u64(), 12 * kFakePage);
  EXPECT_EQ(vllm["reserve_bytes"].u64(), 2 * kFakePage);
  EXPECT_DOUBLE_EQ(vllm["used_pct"].number(), 37.5);
  EXPECT_EQ(vllm["devices"][0]["used_pages"].u64(), 8u);
  EXPECT_EQ(vllm["devices"][1]["used_bytes"].u64(), 4 * kFakePage);
  EXPECT_EQ(vllm["last_activity_unix_ns"].u64(), kFakeNow - 3'000'000'000ull);
  EXPECT_EQ(tenants[0]["state"].str(), "reclaiming");
  // Several kvds: one object per kvd.
  options.with_ipc = true;
  doc = JsonParser::Parse(TenantsView(TwoKvds(), options));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["kvds"].items.size(), 2u);
  EXPECT_EQ((*doc)["kvds"][1]["tenants"][0]["state"].str(), "stale");
}

TEST(Views, DevicesHasARowPerDevice) {
  std::string table = DevicesView({TwoKvds()[0]}, Options());
  EXPECT_NE(table.find("  0  Fake GPU 0  2.00 MiB  128.0 MiB  16.0 MiB  112.0 MiB  24.0 MiB  8.00 MiB"
                       "                 0 B  12.5%"),
            std::string::npos)
      << table;
  auto doc = JsonParser::Parse(DevicesView(TwoKvds(), Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["kvds"][0]["devices"][1]["capacity_bytes"].u64(), 64 * kFakePage);
  // Pages held after recycle (issue 19 item 8): their own column, and used.
  std::vector<Kvd> kvds = {TwoKvds()[0]};
  kvds[0].snapshot->segment.devices[0].held_after_recycle_pages = 3;
  table = DevicesView(kvds, Options());
  EXPECT_NE(table.find("  0  Fake GPU 0  2.00 MiB  128.0 MiB  22.0 MiB  106.0 MiB  24.0 MiB  8.00 MiB"
                       "            6.00 MiB  17.2%"),
            std::string::npos)
      << table;
  doc = JsonParser::Parse(DevicesView(kvds, Options(true)));
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["kvds"][0]["devices"][0]["held_after_recycle_pages"].u64(), 3u);
  EXPECT_EQ((*doc)["kvds"][0]["devices"][0]["used_bytes"].u64(), 11 * kFakePage);
}

TEST(Figures, AgesPercentsAndSortKeys) {
  EXPECT_EQ(FormatAge(0, kFakeNow), "-");
  EXPECT_EQ(FormatAge(kFakeNow, kFakeNow), "now");
  EXPECT_EQ(FormatAge(kFakeNow - 59'000'000'000ull, kFakeNow), "59s ago");
  EXPECT_EQ(FormatAge(kFakeNow - 600'000'000'000ull, kFakeNow), "10m ago");
  EXPECT_EQ(FormatAge(kFakeNow - 3 * 86400'000'000'000ull, kFakeNow), "3d ago");
  EXPECT_EQ(OrdinalList({0, 1, 2, 3, 4, 5, 6, 7}), "0-7");
  EXPECT_EQ(OrdinalList({0, 1}), "0,1");
  EXPECT_EQ(OrdinalList({0, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15}), "0,2-4,6,8-15");
  EXPECT_EQ(OrdinalList({}), "-");
  EXPECT_EQ(FormatPercent(1, 3), "33.3%");
  EXPECT_EQ(FormatPercent(1, 0), "-");
  EXPECT_EQ(*ParseSortKey("share"), SortKey::kShare);
  EXPECT_EQ(ParseSortKey("size").status().code(), Code::kInvalidArgument);
  SortKey key = SortKey::kUsed;
  for (size_t i = 0; i < std::size(kSortKeys); ++i) key = NextSortKey(key);
  EXPECT_EQ(key, SortKey::kUsed) << "s cycles through every key";
}

TEST(Discovery, HungWhenAliveButSilent) {
  Kvd kvd = FakeKvd("x", {});
  EXPECT_EQ(StateOf(*kvd.snapshot, kFakeNow), KvdState::kLive);
  EXPECT_EQ(StateOf(*kvd.snapshot, kFakeNow + kHungAfterNs + 1'000'000'000ull), KvdState::kHung);
  kvd.snapshot->kvd_alive = false;
  EXPECT_EQ(StateOf(*kvd.snapshot, kFakeNow), KvdState::kStale);
}

}  // namespace
}  // namespace nanokv::kvctl
