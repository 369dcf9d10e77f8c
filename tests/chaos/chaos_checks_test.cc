// The chaos run's own checks must catch what they claim to: each case builds
// a segment and engine reports with one fault and expects that fault counted.
#include "tests/chaos/chaos_checks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "examples/page_pattern.h"

namespace nanokv::chaos {
namespace {

constexpr char kProbe[] = "probe";

class ChaosChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    segment_ = std::make_unique<ipc::Segment>();
    *segment_ = ipc::Segment{};
    segment_->header.device_count = 1;
    ipc::DeviceRow& d = segment_->devices[0];
    d.device = 0;
    d.capacity_pages = 16;
    d.created_pages = 8;
    d.free_pages = 8;
    engines_.reserve(16);  // AddEngine hands out references into it
  }

  // A tenant row and its engine's report, holding `pages` (owned).
  EngineView& AddEngine(const std::string& name, int group, int pid,
                        std::vector<uint32_t> pages, bool count_in_kvd = true) {
    ipc::TenantRow& row = segment_->tenants[segment_->header.tenant_count++];
    ipc::CopyString(row.name, name);
    row.pid = pid;
    if (count_in_kvd) row.used_pages[0] = static_cast<uint32_t>(pages.size());
    EngineView& e = engines_.emplace_back();
    e.name = name;
    e.group = group;
    e.report.pid = pid;
    e.report.attached = true;
    for (uint32_t id : pages) {
      PageContent c{PageContent::Kind::kTagged, MakeTag(group, 0, 1, id)};
      e.report.pages.push_back({0, id, true, c});
    }
    return e;
  }

  // Moves `n` pages from free to granted in kvd's device row.
  void Grant(uint64_t n) {
    segment_->devices[0].free_pages -= n;
    segment_->devices[0].granted_pages += n;
  }

  Findings Check() {
      return CheckBarrier(*segment_, engines_, kProbe);
  }

  std::unique_ptr<ipc::Segment> segment_;
  std::vector<EngineView> engines_;
};

TEST_F(ChaosChecksTest, ConsistentStateIsClean) {
  AddEngine("a", 0, 10, {1, 2});
  AddEngine("b", 1, 11, {3});
  Grant(3);
  Findings f = Check();
  EXPECT_TRUE(f.clean()) << (f.notes.empty() ? "" : f.notes[0]);
}

TEST_F(ChaosChecksTest, SharedPageWithTheOwnersBytesIsClean) {
  EngineView& a = AddEngine("a", 0, 10, {1});
  EngineView& b = AddEngine("b", 0, 11, {});
  b.report.pages.push_back({0, 1, false, a.report.pages[0].content});
  segment_->tenants[1].used_pages[0] = 1;
  Grant(1);
  EXPECT_TRUE(Check().clean());
}

TEST_F(ChaosChecksTest, CountsThatDoNotAddUpAreLostPages) {
  segment_->devices[0].free_pages = 6;  // created 8, granted 0
  Findings f = Check();
  EXPECT_EQ(f.lost_pages, 2u);
}

TEST_F(ChaosChecksTest, GrantedPagesNoEngineHoldsAreLost) {
  AddEngine("a", 0, 10, {1});
  segment_->tenants[0].used_pages[0] = 3;  // kvd thinks it holds 3
  Grant(3);
  Findings f = Check();
  EXPECT_EQ(f.lost_pages, 2u);
  EXPECT_EQ(f.accounting_errors, 1u);
}

TEST_F(ChaosChecksTest, APageInTwoGroupsIsADoubleGrant) {
  AddEngine("a", 0, 10, {1, 2});
  AddEngine("b", 1, 11, {2});
  Grant(2);
  Findings f = Check();
  EXPECT_EQ(f.double_grants, 1u);
}

TEST_F(ChaosChecksTest, APageGrantedToTwoTenantsOfOneGroupIsADoubleGrant) {
  AddEngine("a", 0, 10, {4});
  AddEngine("b", 0, 11, {4});
  Grant(1);
  EXPECT_EQ(Check().double_grants, 1u);
}

TEST_F(ChaosChecksTest, EnginesHoldingMoreThanKvdGrantedIsADoubleGrant) {
  AddEngine("a", 0, 10, {1, 2});
  Grant(1);
  EXPECT_GE(Check().double_grants, 1u);
}

TEST_F(ChaosChecksTest, ASharerReadingOtherBytesIsAPatternFailure) {
  AddEngine("a", 0, 10, {1});
  EngineView& b = AddEngine("b", 0, 11, {});
  b.report.pages.push_back({0, 1, false, {PageContent::Kind::kZero, 0}});
  segment_->tenants[1].used_pages[0] = 1;
  Grant(1);
  EXPECT_EQ(Check().pattern_failures, 1u);
}

TEST_F(ChaosChecksTest, ATenantOfAGoneProcessIsADeadTenant) {
  AddEngine("a", 0, 10, {1});
  engines_.back().report.pid = 99;  // the live engine is another process now
  engines_.back().report.pages.clear();
  Grant(1);
  Findings f = Check();
  EXPECT_EQ(f.dead_tenants, 1u);
  EXPECT_EQ(f.lost_pages, 1u);
}

TEST_F(ChaosChecksTest, TheProbeIsNotATenantToCheck) {
  ipc::TenantRow& row = segment_->tenants[segment_->header.tenant_count++];
  ipc::CopyString(row.name, kProbe);
  EXPECT_TRUE(Check().clean());
}

TEST_F(ChaosChecksTest, DrainedNeedsEveryPageBack) {
  Grant(2);
  Findings f = CheckDrained(*segment_, kProbe);
  EXPECT_EQ(f.lost_pages, 2u);
  segment_->devices[0].granted_pages = 0;
  segment_->devices[0].free_pages = 8;
  EXPECT_TRUE(CheckDrained(*segment_, kProbe).clean());
}

TEST(ChaosPatternTest, ClassifyReadsTheTagBack) {
  uint64_t tag = MakeTag(2, 5, 0xbeef, 77);
  std::vector<uint64_t> words = examples::PageWords(2u << 20, tag);
  PageContent c = Classify(words, true);
  ASSERT_EQ(c.kind, PageContent::Kind::kTagged);
  EXPECT_EQ(c.tag, tag);
  EXPECT_EQ(TagGroup(c.tag), 2);
  EXPECT_EQ(TagIndex(c.tag), 5);
  EXPECT_EQ(Classify(words, false).tag, tag);
}

TEST(ChaosPatternTest, ClassifyTellsZerosAndTornPages) {
  std::vector<uint64_t> zeros(4096, 0);
  EXPECT_EQ(Classify(zeros, true).kind, PageContent::Kind::kZero);
  // Half of one tag's words over another's: a writer killed mid-copy.
  std::vector<uint64_t> torn = examples::PageWords(4096 * 8, MakeTag(0, 0, 1, 1));
  std::vector<uint64_t> other = examples::PageWords(4096 * 8, MakeTag(0, 1, 1, 2));
  std::copy(other.begin() + 2048, other.end(), torn.begin() + 2048);
  EXPECT_EQ(Classify(torn, true).kind, PageContent::Kind::kGarbage);
  EXPECT_EQ(Classify(torn, false).kind, PageContent::Kind::kGarbage);
  torn[0] = 0;  // zeros but one word: not a fresh page
  EXPECT_NE(Classify(zeros, true).kind, Classify(torn, true).kind);
}

// Two devices: what engines held and where the killed one held pages, per
// device ordinal (not per row index), and a row for a device nothing used.
TEST_F(ChaosChecksTest, DeviceUseCountsEachDevice) {
  segment_->header.device_count = 3;
  segment_->devices[1].device = 1;
  segment_->devices[2].device = 2;
  EngineView& a = AddEngine("a", 0, 10, {1, 2});
  a.report.pages.push_back({1, 5, false, {PageContent::Kind::kTagged, MakeTag(0, 0, 1, 5)}});
  segment_->tenants[0].used_pages[1] = 1;
  AddEngine("b", 1, 11, {3});
  DeviceUses uses;
  CountDevices(*segment_, &uses);
  for (const EngineView& e : engines_) CountHeld(e.report, &uses);
  CountKill(*segment_, 10, &uses);
  CountKill(*segment_, 99, &uses);  // not a tenant: nothing
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].granted_page_rounds, 3u);
  EXPECT_EQ(uses[0].shared_page_rounds, 0u);
  EXPECT_EQ(uses[1].granted_page_rounds, 0u);
  EXPECT_EQ(uses[1].shared_page_rounds, 1u);
  EXPECT_EQ(uses[0].kills_holding, 1u);
  EXPECT_EQ(uses[1].kills_holding, 1u);
  EXPECT_EQ(uses[2].granted_page_rounds + uses[2].shared_page_rounds + uses[2].kills_holding, 0u);
}

TEST(ChaosFilesTest, ReportsRoundTrip) {
  char dir_template[] = "/tmp/chaos-files-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  std::string path = std::string(dir_template) + "/e0.state";
  Report r;
  r.pid = 42;
  r.epoch = 7;
  r.attached = true;
  r.tenant_id = 3;
  r.steps = 1000;
  r.pages.push_back({1, 9, false, {PageContent::Kind::kTagged, MakeTag(1, 2, 3, 4)}});
  r.pages.push_back({0, 2, true, {PageContent::Kind::kZero, 0}});
  ASSERT_TRUE(WriteReport(path, r).ok());
  auto back = ReadReport(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->epoch, 7u);
  ASSERT_EQ(back->pages.size(), 2u);
  EXPECT_EQ(back->pages[0].id, 9u);
  EXPECT_FALSE(back->pages[0].owned);
  EXPECT_EQ(back->pages[0].content.tag, MakeTag(1, 2, 3, 4));
  EXPECT_EQ(back->pages[1].content.kind, PageContent::Kind::kZero);
  ASSERT_TRUE(WriteBarrier(dir_template, {5, Command::kHold}).ok());
  EXPECT_EQ(ReadBarrier(dir_template).epoch, 5u);
  EXPECT_EQ(ReadBarrier(dir_template).command, Command::kHold);
  std::filesystem::remove_all(dir_template);
}

}  // namespace
}  // namespace nanokv::chaos
