#include "kvctl/top_frame.h"

#include <signal.h>

#include <gtest/gtest.h>

#include "ipc/segment/layout.h"
#include "tests/unit/kvctl/fake_segment.h"

namespace nanokv::kvctl {
namespace {

using testing::FakeKvd;
using testing::kFakeNow;

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

TopModel Model() {
  TopModel model;
  model.kvds.push_back(FakeKvd("node-a", {{.name = "vllm", .pid = 11, .limit_pages = 32, .pages_dev0 = 8},
                                          {.name = "sglang", .pid = 12, .limit_pages = 8, .pages_dev1 = 6}}));
  model.selected = 0;
  model.now_unix_ns = kFakeNow;
  return model;
}

TEST(TopFrame, ShowsDevicesAndTenantsWithTheirFigures) {
  std::string frame = Joined(RenderTop(Model(), 120, 40, false));
  EXPECT_NE(frame.find("kvd 'node-a' (host, pid 4242)  live"), std::string::npos) << frame;
  EXPECT_NE(frame.find("Fake GPU 0"), std::string::npos) << frame;
  EXPECT_NE(frame.find("16.0 MiB / 128.0 MiB"), std::string::npos) << frame;
  EXPECT_NE(frame.find("12.0 MiB / 16.0 MiB "), std::string::npos) << "sglang's figures\n" << frame;
  EXPECT_NE(frame.find("75.0%"), std::string::npos) << frame;
  EXPECT_NE(frame.find("sorted by used"), std::string::npos) << frame;
  EXPECT_LT(frame.find("vllm"), frame.find("sglang")) << "16 MiB used before 12 MiB\n" << frame;
}

// Pages held after recycle (issue 19 item 8) are named where there are any.
TEST(TopFrame, NamesPagesHeldAfterRecycle) {
  TopModel model = Model();
  EXPECT_EQ(Joined(RenderTop(model, 160, 40, false)).find("held after recycle"), std::string::npos);
  model.kvds[0].snapshot->segment.devices[1].held_after_recycle_pages = 2;
  std::string frame = Joined(RenderTop(model, 160, 40, false));
  EXPECT_NE(frame.find("held after recycle 4.00 MiB"), std::string::npos) << frame;
}

TEST(TopFrame, NoLineIsWiderThanTheScreenAndNoneIsMissing) {
  TopModel held = Model();
  held.kvds[0].snapshot->segment.devices[0].held_after_recycle_pages = 3;
  for (int columns : {20, 40, 80, 132, 250}) {
    std::vector<std::string> lines = RenderTop(held, columns, 40, false);
    for (const std::string& line : lines) {
      EXPECT_LE(line.size(), static_cast<size_t>(columns)) << "'" << line << "'";
    }
  }
  for (int columns : {20, 40, 80, 132, 250}) {
    std::vector<std::string> lines = RenderTop(Model(), columns, 40, false);
    for (const std::string& line : lines) {
      EXPECT_LE(line.size(), static_cast<size_t>(columns)) << "'" << line << "'";
    }
  }
  std::vector<std::string> coloured = RenderTop(Model(), 100, 40, true);
  EXPECT_NE(Joined(coloured).find("\033["), std::string::npos);
}

TEST(TopFrame, ATallListSaysHowManyMoreThereAre) {
  TopModel model = Model();
  ipc::Segment& segment = model.kvds[0].snapshot->segment;
  for (uint32_t i = 2; i < 40; ++i) {
    segment.tenants[i] = segment.tenants[0];
    ipc::CopyString(segment.tenants[i].name, "t" + std::to_string(i));
  }
  segment.header.tenant_count = 40;
  std::vector<std::string> lines = RenderTop(model, 120, 24, false);
  EXPECT_EQ(lines.size(), 24u);
  EXPECT_NE(lines.back().find("more"), std::string::npos) << Joined(lines);
}

TEST(TopFrame, InstancesComeBetweenDevicesAndTenantsWhenThereAreAny) {
  std::string frame = Joined(RenderTop(Model(), 120, 40, false));
  EXPECT_EQ(frame.find("INSTANCES"), std::string::npos) << "kvd runs none\n" << frame;
  TopModel model = Model();
  testing::AddInstances(model.kvds[0],
                        {{.name = "decode", .pid = 21980, .age_seconds = 75},
                         {.name = "crasher", .state = ipc::InstanceState::kFailed, .exit_code = 3, .restarts = 2},
                         {.name = "oom", .state = ipc::InstanceState::kExited, .exit_code = -SIGKILL}});
  frame = Joined(RenderTop(model, 120, 40, false));
  EXPECT_NE(frame.find("INSTANCES (3)  1 running, 1 exited, 1 failed"), std::string::npos) << frame;
  EXPECT_NE(frame.find("NAME        PID  STATE             RESTARTS  SINCE"), std::string::npos) << frame;
  EXPECT_NE(frame.find("decode    21980  running                  0  75s ago"), std::string::npos) << frame;
  EXPECT_NE(frame.find("crasher       -  failed (3)               2  5s ago"), std::string::npos) << frame;
  EXPECT_NE(frame.find("oom           -  killed (SIGKILL)         0  5s ago"), std::string::npos) << frame;
  EXPECT_LT(frame.find("Fake GPU 1"), frame.find("INSTANCES")) << frame;
  EXPECT_LT(frame.find("INSTANCES"), frame.find("TENANTS")) << frame;
  for (int columns : {20, 60, 120}) {
    for (const std::string& line : RenderTop(model, columns, 40, false)) {
      EXPECT_LE(line.size(), static_cast<size_t>(columns)) << "'" << line << "'";
    }
  }
}

TEST(TopFrame, ManyInstancesLeaveRoomForTheTenants) {
  TopModel model = Model();
  for (int i = 0; i < 40; ++i) {
    testing::AddInstances(model.kvds[0], {{.name = "i" + std::to_string(i), .pid = 100 + i}});
  }
  std::vector<std::string> lines = RenderTop(model, 120, 30, false);
  std::string frame = Joined(lines);
  EXPECT_LE(lines.size(), 30u) << frame;
  EXPECT_NE(frame.find("INSTANCES (40)  40 running"), std::string::npos) << frame;
  EXPECT_NE(frame.find("more (`kvctl instances` shows them)"), std::string::npos) << frame;
  EXPECT_NE(frame.find("vllm"), std::string::npos) << "the tenants still show\n" << frame;
  EXPECT_NE(frame.find("sglang"), std::string::npos) << frame;
  // A tall window shows them all.
  frame = Joined(RenderTop(model, 120, 0, false));
  EXPECT_NE(frame.find("i39"), std::string::npos) << frame;
  EXPECT_EQ(frame.find("more"), std::string::npos) << frame;
}

// Issue 16 item 4: the segment at full size, 16 devices and 256 tenants, in
// 80x24: the devices leave the tenants rows, each part says how many more,
// the summary line keeps whole figures and says the table is full.
TEST(TopFrame, SixteenDevicesAndAFullTenantTableFitEightyByTwentyFour) {
  TopModel model = Model();
  ipc::Segment& segment = model.kvds[0].snapshot->segment;
  segment.header.device_count = ipc::kMaxDevices;
  for (uint32_t d = 2; d < ipc::kMaxDevices; ++d) {
    segment.devices[d] = segment.devices[1];
    segment.devices[d].device = static_cast<int32_t>(d);
  }
  for (uint32_t i = 2; i < ipc::kMaxTenants; ++i) {
    segment.tenants[i] = segment.tenants[0];
    ipc::CopyString(segment.tenants[i].name, "tenant-with-a-long-name-" + std::to_string(i));
  }
  segment.header.tenant_count = ipc::kMaxTenants;
  std::vector<std::string> lines = RenderTop(model, 80, 24, false);
  const std::string frame = Joined(lines);
  EXPECT_EQ(lines.size(), 24u) << frame;
  for (const std::string& line : lines) EXPECT_LE(line.size(), 80u) << "'" << line << "'";
  EXPECT_NE(frame.find("tenants 256 (table full)"), std::string::npos) << frame;
  EXPECT_EQ(frame.find("page 2.0"), std::string::npos) << "cut whole, not half\n" << frame;
  EXPECT_NE(frame.find("more devices (a taller window, or kvctl devices, shows them)"), std::string::npos)
      << frame;
  EXPECT_NE(frame.find("tenant-with-a"), std::string::npos) << "the tenants keep rows\n" << frame;
  EXPECT_NE(lines.back().find("more (a taller window shows them)"), std::string::npos) << frame;
  // 200x50 shows all 16 devices, and says how many tenants more.
  const std::string tall = Joined(RenderTop(model, 200, 50, false));
  EXPECT_NE(tall.find("page 2.00 MiB"), std::string::npos) << tall;
  EXPECT_EQ(tall.find("more devices"), std::string::npos) << tall;
  EXPECT_NE(tall.find(" 15 Fake GPU 1"), std::string::npos) << tall;
}

TEST(TopFrame, SaysSoWhenThereIsNoKvdOrItIsGone) {
  TopModel empty;
  empty.now_unix_ns = kFakeNow;
  EXPECT_NE(Joined(RenderTop(empty, 100, 24, false)).find("no kvd runs on this node"), std::string::npos);
  empty.wanted = "x";
  EXPECT_NE(Joined(RenderTop(empty, 100, 24, false)).find("no kvd named 'x'"), std::string::npos);
  TopModel stale = Model();
  stale.kvds[0] = FakeKvd("node-a", {{.name = "vllm", .pages_dev0 = 1}}, KvdState::kStale);
  std::string frame = Joined(RenderTop(stale, 100, 24, false));
  EXPECT_NE(frame.find("kvd is gone"), std::string::npos) << frame;
  EXPECT_NE(frame.find("stale"), std::string::npos) << frame;
}

}  // namespace
}  // namespace nanokv::kvctl
