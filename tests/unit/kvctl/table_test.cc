#include "kvctl/table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

namespace nanokv::kvctl {
namespace {

TEST(Table, AlignsColumnsAndTrimsTrailingBlanks) {
  Table table({{"NAME"}, {"USED", Align::kRight}, {"STATE"}});
  table.AddRow({"a", "1.5 GiB", "live"});
  table.AddRow({"longer-name", "17 B", ""});
  EXPECT_EQ(table.Render(false),
            "NAME            USED  STATE\n"
            "a            1.5 GiB  live\n"
            "longer-name     17 B\n");
}

// Issue 16 item 4: on a narrow terminal the name columns give way (clipped
// with ~, the widest first, never below their header or 6), figures never.
TEST(Table, ANarrowWidthClipsNamesNotFigures) {
  Table table({{"TENANT", Align::kLeft, true}, {"GROUP", Align::kLeft, true}, {"USED", Align::kRight}});
  table.AddRow({"engine-of-a-long-deployment-name", "shared-group", "1.5 GiB"});
  table.AddRow({"e1", "g", "17 B"});
  EXPECT_EQ(table.Render(false, 0),
            "TENANT                            GROUP            USED\n"
            "engine-of-a-long-deployment-name  shared-group  1.5 GiB\n"
            "e1                                g                17 B\n");
  EXPECT_EQ(table.Render(false, 30),
            "TENANT     GROUP          USED\n"
            "engine-o~  shared-gr~  1.5 GiB\n"
            "e1         g              17 B\n");
  // Nothing narrower than the headers: the figures stay whole past the width.
  EXPECT_EQ(table.Render(false, 10),
            "TENANT  GROUP      USED\n"
            "engin~  share~  1.5 GiB\n"
            "e1      g          17 B\n");
}

TEST(Table, WithNoRowsIsJustTheHeader) {
  Table table({{"IPC"}, {"PID", Align::kRight}});
  EXPECT_EQ(table.Render(false), "IPC  PID\n");
}

TEST(Table, SanitizesWhatItShows) {
  EXPECT_EQ(Sanitize("ok-name_1.2:3@x"), "ok-name_1.2:3@x");
  EXPECT_EQ(Sanitize("\033[2Jevil\n"), "?[2Jevil?");
  EXPECT_EQ(Sanitize("caf\xc3\xa9"), "caf??");
  Table table({{"NAME"}, {"X"}});
  table.AddRow({"\033]0;title\007", "y"});
  EXPECT_EQ(table.Render(false).find('\033'), std::string::npos);
}

TEST(Table, ColourOnlyWhenAskedAndThenAroundCells) {
  Table table({{"STATE"}});
  table.AddRow({Cell("stale", Tint::kBad)});
  EXPECT_EQ(table.Render(false).find('\033'), std::string::npos);
  std::string coloured = table.Render(true);
  EXPECT_NE(coloured.find("\033[31mstale\033[0m"), std::string::npos) << coloured;
  EXPECT_NE(coloured.find("\033[1mSTATE\033[0m"), std::string::npos) << coloured;
}

TEST(Table, UseColourFollowsTheTerminalAndNoColor) {
  EXPECT_TRUE(UseColour(ColourMode::kAlways, -1));
  EXPECT_FALSE(UseColour(ColourMode::kNever, STDOUT_FILENO));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_FALSE(UseColour(ColourMode::kAuto, fds[1])) << "a pipe is not a terminal";
  close(fds[0]);
  close(fds[1]);
  const char* old = std::getenv("NO_COLOR");
  std::string saved = old != nullptr ? old : "";
  setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(UseColour(ColourMode::kAuto, STDOUT_FILENO));
  EXPECT_TRUE(UseColour(ColourMode::kAlways, STDOUT_FILENO)) << "an explicit --color always wins";
  if (old != nullptr) setenv("NO_COLOR", saved.c_str(), 1); else unsetenv("NO_COLOR");
}

}  // namespace
}  // namespace nanokv::kvctl
