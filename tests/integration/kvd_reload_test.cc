// kvd's SIGHUP (issue 21, item 4): the config is read again and what can
// change live changes: an instance's limit (its tenant's, the engine kept),
// an instance added (started) or removed (stopped), the default limit; a key
// that needs a restart is logged as such and kept; a config that does not
// load changes nothing. kvd runs on, and SIGTERM still stops it cleanly.
#include <signal.h>

#include <fstream>

#include "ipc/segment/segment_reader.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

const ipc::InstanceRow* FindInstance(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.instance_count; ++i) {
    if (ipc::ReadString(s.segment.instances[i].name) == name) return &s.segment.instances[i];
  }
  return nullptr;
}

const ipc::TenantRow* FindTenant(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
    if (ipc::ReadString(s.segment.tenants[i].name) == name) return &s.segment.tenants[i];
  }
  return nullptr;
}

class KvdReloadTest : public KvdFixture {
 protected:
  // An instance that takes 2 pages and holds them (giving back what kvd asks).
  std::string Instance(const std::string& name, const std::string& limit = "") {
    return "  - name: " + name + "\n    command: " + Binary("NANOKV_ENGINE_BINARY", NANOKV_ENGINE_BINARY) +
           "\n    args: [--pages, '2', --step, '2', --rounds, '1', --hold-ms, '60000']\n    grace: 2s\n" +
           (limit.empty() ? "" : "    limit: " + limit + "\n");
  }

  void Write(const std::string& text) { std::ofstream(path_) << text; }

  void Reload() { ASSERT_EQ(kill(kvd_.pid(), SIGHUP), 0); }

  // Waits until `done` holds of the segment.
  bool WaitSegment(const std::function<bool(const ipc::Snapshot&)>& done) {
    return WaitFor([&] {
      auto s = ipc::ReadSegment(ipc_);
      return s.ok() && done(*s);
    }, 30s);
  }

  bool Logged(const std::string& text) {
    return WaitFor([&] { return kvd_.Log().find(text) != std::string::npos; }, 10s);
  }

  std::string path_ = dir_.path() + "/kvd.yaml";
};

TEST_F(KvdReloadTest, SighupChangesALimitAndAddsAndRemovesInstances) {
  Write("default_limit: 32M\ninstances:\n" + Instance("alpha", "8M"));
  StartKvd(32, {"--config", path_});
  pid_t alpha_pid = 0;
  ASSERT_TRUE(WaitSegment([&](const ipc::Snapshot& s) {
    const ipc::TenantRow* t = FindTenant(s, "alpha");
    const ipc::InstanceRow* row = FindInstance(s, "alpha");
    if (t == nullptr || row == nullptr || t->used_bytes != 2 * kPage) return false;
    alpha_pid = static_cast<pid_t>(row->pid);
    return t->limit_bytes == 4 * kPage;
  })) << kvd_.Log();

  // alpha's limit below its use, beta added, the default lowered, and a key
  // that needs a restart.
  Write("default_limit: 16M\npage_size: 4MiB\ninstances:\n" + Instance("alpha", "2M") + Instance("beta"));
  Reload();
  ASSERT_TRUE(WaitSegment([&](const ipc::Snapshot& s) {
    const ipc::TenantRow* alpha = FindTenant(s, "alpha");
    const ipc::TenantRow* beta = FindTenant(s, "beta");
    return alpha != nullptr && alpha->limit_bytes == kPage && alpha->used_bytes == kPage && beta != nullptr &&
           beta->used_bytes == 2 * kPage;
  })) << kvd_.Log();
  auto s = ipc::ReadSegment(ipc_);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(FindInstance(*s, "alpha")->pid, static_cast<uint32_t>(alpha_pid)) << "a limit restarts nothing";
  EXPECT_EQ(FindTenant(*s, "beta")->limit_bytes, 8 * kPage) << "beta asked none: the new default, 16M";
  EXPECT_TRUE(Logged("kvd: reload: instances: 'alpha' limit: 8388608 -> 2097152")) << kvd_.Log();
  EXPECT_TRUE(Logged("kvd: reload: instances: 'beta' added")) << kvd_.Log();
  EXPECT_TRUE(Logged("kvd: reload: default_limit: 33554432 -> 16777216")) << kvd_.Log();
  EXPECT_TRUE(Logged("kvd: reload: page_size: changed, needs a restart")) << kvd_.Log();
  EXPECT_EQ(s->segment.header.page_bytes, kPage) << "page_size is kept";

  // beta removed: stopped, its row and its tenant gone; alpha untouched.
  Write("default_limit: 16M\ninstances:\n" + Instance("alpha", "2M"));
  Reload();
  ASSERT_TRUE(WaitSegment([&](const ipc::Snapshot& snap) {
    return FindInstance(snap, "beta") == nullptr && FindTenant(snap, "beta") == nullptr;
  })) << kvd_.Log();
  s = ipc::ReadSegment(ipc_);
  ASSERT_TRUE(s.ok());
  ASSERT_NE(FindInstance(*s, "alpha"), nullptr);
  EXPECT_EQ(FindInstance(*s, "alpha")->pid, static_cast<uint32_t>(alpha_pid));

  // A config that does not load changes nothing, and kvd runs on.
  Write("default_limit: 16M\nbogus: 1\n");
  Reload();
  EXPECT_TRUE(Logged("kvd.yaml:2: bogus: unknown key; nothing changed")) << kvd_.Log();
  EXPECT_TRUE(kvd_.Running());
  s = ipc::ReadSegment(ipc_);
  ASSERT_TRUE(s.ok());
  EXPECT_NE(FindInstance(*s, "alpha"), nullptr);
  StopKvd();  // SIGTERM: exit 0, its instances stopped first
}

}  // namespace
}  // namespace nanokv::testing
