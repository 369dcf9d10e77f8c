// kvctl at full scale (issue 16 item 4): a kvd of 8 devices with 70 tenants.
// list, tenants and devices lose no row, in text and JSON; in tmux at 80x24
// and 200x50 list and tenants fit the width and top fits the screen, says
// how many rows more it could not show, and keeps every figure of the rows
// it shows.
#include <sys/stat.h>

#include <sstream>

#include "tests/integration/kvctl_fixture.h"

namespace nanokv::testing {
namespace {

constexpr int kDevices = 8;
constexpr int kTenants = 70;

std::string TenantName(int i) {
  // Every fifth a long name, as engines name themselves.
  return i % 5 == 0 ? "engine-" + std::to_string(i) + "-of-a-long-deployment-name" : "e" + std::to_string(i);
}

class KvctlScaleTest : public KvctlTest {
 protected:
  // kTenants clients of this process, tenant i holding one page of device i % 8.
  void AttachTenants() {
    for (int i = 0; i < kTenants; ++i) {
      tenants_.push_back(AttachClient(TenantName(i)));
      ASSERT_TRUE(tenants_.back());
      ASSERT_TRUE(tenants_.back()->Grant(i % kDevices, 1).ok()) << TenantName(i);
    }
    ASSERT_TRUE(WaitFor([&] {
      auto s = Read();
      uint64_t granted = 0;
      for (uint32_t d = 0; d < s.segment.header.device_count; ++d) granted += s.segment.devices[d].granted_pages;
      return s.segment.header.tenant_count == kTenants && granted == kTenants;
    }, 20s));
  }

  // top in tmux at columns x rows: the screen once it shows the tenants.
  std::string TopScreen(int columns, int rows) {
    Tmux tmux(dir_.path() + "/" + std::to_string(columns));
    const std::string top = "env NANOKV_RUN_DIR=" + Quote(dir_.path()) + " " + Quote(KvctlBinary()) + " top " +
                            ipc_ + " -n 0.2";
    std::map<std::string, std::string> term = {{"TERM", "xterm-256color"}};
    mkdir((dir_.path() + "/" + std::to_string(columns)).c_str(), 0700);
    EXPECT_EQ(Shell(tmux.Command("new-session -d -x " + std::to_string(columns) + " -y " + std::to_string(rows) +
                                 " " + Quote(top)), term).code, 0);
    std::string screen;
    // A whole frame: its last line (what does not fit, counted) drawn too;
    // under a sanitizer a capture can land mid-frame, after the header.
    EXPECT_TRUE(WaitFor([&] {
      screen = Shell(tmux.Command("capture-pane -p"), term).out;
      return screen.find("TENANTS (" + std::to_string(kTenants) + ")") != std::string::npos &&
             screen.find(" more (a taller window") != std::string::npos;
    }, 20s)) << screen;
    (void)Shell(tmux.Command("send-keys q"), term);
    return screen;
  }

  // `kvctl <command> <ipc>` in tmux at columns x rows: all it printed
  // (-S -: the history too), wrapped lines joined (-J), so a line too wide
  // for the terminal shows as one over `columns`.
  std::string CommandScreen(const std::string& command, int columns, int rows) {
    const std::string dir = dir_.path() + "/" + command + std::to_string(columns);
    mkdir(dir.c_str(), 0700);
    Tmux tmux(dir);
    const std::string run = "env NANOKV_RUN_DIR=" + Quote(dir_.path()) + " " + Quote(KvctlBinary()) + " " +
                            command + (command == "list" ? "" : " " + ipc_) + "; echo kvctl-done; sleep 60";
    std::map<std::string, std::string> term = {{"TERM", "xterm-256color"}};
    EXPECT_EQ(Shell(tmux.Command("new-session -d -x " + std::to_string(columns) + " -y " + std::to_string(rows) +
                                 " " + Quote(run)), term).code, 0);
    std::string screen;
    EXPECT_TRUE(WaitFor([&] {
      screen = Shell(tmux.Command("capture-pane -p -J -S -"), term).out;
      return screen.find("kvctl-done") != std::string::npos;
    }, 20s)) << screen;
    return screen;
  }

  std::vector<std::unique_ptr<Client>> tenants_;
};

// How many lines of `screen` contain `word`; with `columns`, every line
// fits it.
size_t LinesWith(const std::string& screen, const std::string& word, int columns = 0) {
  std::istringstream lines(screen);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) {
    if (columns > 0) {
      EXPECT_LE(line.size(), static_cast<size_t>(columns)) << "'" << line << "'";
    }
    count += line.find(word) != std::string::npos;
  }
  return count;
}

TEST_F(KvctlScaleTest, SeventyTenantsOnEightDevicesLoseNoRow) {
  if (Backend() != "host") GTEST_SKIP() << "eight devices: the host backend's simulated ones";
  StartKvd(16, {"--host-devices", std::to_string(kDevices), "--max-connections-per-process", "300"});
  AttachTenants();

  Ran tenants = Kvctl({"tenants", ipc_});
  ASSERT_EQ(tenants.code, 0) << tenants.err;
  for (int i = 0; i < kTenants; ++i) {
    const std::string row = TableRow(tenants.out, TenantName(i));
    EXPECT_NE(row, "") << TenantName(i) << " is missing\n" << tenants.out;
    EXPECT_NE(row.find(" " + std::to_string(i % kDevices) + " "), std::string::npos) << row;
  }
  Json doc = ParseJson(Kvctl({"--json", "tenants", ipc_}));
  EXPECT_EQ(doc["tenants"].items.size(), static_cast<size_t>(kTenants));

  Ran list = Kvctl({"list"});
  EXPECT_NE(TableRow(list.out, ipc_).find("0-7"), std::string::npos) << list.out;
  EXPECT_NE(TableRow(list.out, ipc_).find(" " + std::to_string(kTenants) + " "), std::string::npos) << list.out;
  Ran devices = Kvctl({"devices", ipc_});
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_NE(devices.out.find("\n  " + std::to_string(d) + "  host"), std::string::npos) << devices.out;
  }

  // On a terminal, tenants fits its width (names clip with ~) and loses no
  // row; piped (above) nothing is clipped. list's headers alone take 85
  // columns with this IPC name clipped to 6: at 80 its row is whole, wrapped.
  for (auto [columns, rows] : {std::pair{80, 24}, std::pair{200, 50}}) {
    const std::string table = CommandScreen("tenants", columns, rows);
    EXPECT_EQ(LinesWith(table, "attached", columns), static_cast<size_t>(kTenants)) << table;
    if (columns == 200) {
      EXPECT_NE(table.find(TenantName(5) + " "), std::string::npos) << "room for the whole name\n" << table;
    }
    const std::string listed = CommandScreen("list", columns, rows);
    EXPECT_EQ(LinesWith(listed, " 0-7 ", columns == 200 ? columns : 0), 1u) << listed;
  }

  for (auto [columns, rows] : {std::pair{80, 24}, std::pair{200, 50}}) {
    const std::string screen = TopScreen(columns, rows);
    std::istringstream lines(screen);
    int count = 0, tenant_rows = 0;
    for (std::string line; std::getline(lines, line); ++count) {
      EXPECT_LE(line.size(), static_cast<size_t>(columns)) << line;
      tenant_rows += line.find("attached") != std::string::npos;
    }
    EXPECT_LE(count, rows) << screen;
    EXPECT_NE(screen.find("tenants 70"), std::string::npos) << screen;
    EXPECT_NE(screen.find("  7 host"), std::string::npos) << "all 8 devices fit\n" << screen;
    // What does not fit is counted, not dropped: shown + more = 70.
    const std::string more = "... " + std::to_string(kTenants - tenant_rows) + " more";
    EXPECT_NE(screen.find(more), std::string::npos) << tenant_rows << " rows shown\n" << screen;
  }
}

}  // namespace
}  // namespace nanokv::testing
