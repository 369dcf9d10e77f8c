// Issue 16 item 3: every refusal at attach reaches the engine through libkv
// as its own error, naming the cause and, where there is one, kvd's config
// key; never "request id 0", never a bare protocol error. (The refusals at
// connect are in kvd_trust_test.cc and kvd_limits_test.cc; the C ABI's in
// capi_test.c, Python's in python/tests/test_client.py.)
#include <memory>
#include <string>
#include <vector>

#include "ipc/segment/layout.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/util/other_user.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdRefusalsTest : public KvdFixture {
 protected:
  void StartWithConfig(const std::string& yaml) {
    StartKvd(16, {"--config", WriteConfig(yaml)});
  }

  // Attaches `name`, waiting while kvd still counts a connection that just
  // ended (the fixture's probe, a refused attach's).
  std::unique_ptr<Client> AttachEventually(const std::string& name) {
    Result<std::unique_ptr<Client>> client = Status::Unavailable("not tried");
    EXPECT_TRUE(WaitFor([&] {
      client = Client::Attach(Options(name));
      return client.ok();
    }, 10s)) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // The refusal of an attach with `options`, once kvd no longer counts the
  // connection of a refusal just before (max_connections_per_process is 2).
  Status RefusalOf(const ClientOptions& options) {
    Status refused;
    WaitFor([&] {
      auto client = Client::Attach(options);
      refused = client.status();
      return refused.message().find("max_connections_per_process") == std::string_view::npos;
    }, 10s);
    return refused;
  }

  static void ExpectSaid(const Status& status, Code code, const std::string& words) {
    EXPECT_EQ(status.code(), code) << status.ToString();
    EXPECT_NE(status.message().find(words), std::string_view::npos) << status.ToString();
    EXPECT_EQ(status.ToString().find("request id 0"), std::string::npos) << status.ToString();
    EXPECT_NE(status.code(), Code::kProtocolError) << status.ToString();
  }
};

TEST_F(KvdRefusalsTest, AttachRefusalsNameTheirCauseAndTheConfigKey) {
  StartWithConfig("max_connections_per_process: 2\n");
  auto first = AttachEventually("first");
  ASSERT_TRUE(first);

  ExpectSaid(RefusalOf(Options("first")), Code::kAlreadyExists, "a tenant named 'first' is already attached");

  ClientOptions far = Options("far");
  far.devices = {5};
  // "it serves 0" on host, "0, 1" on two GPUs.
  ExpectSaid(RefusalOf(far), Code::kNotFound, "kvd does not serve device 5 (it serves 0");
  ExpectSaid(RefusalOf(far), Code::kNotFound, ": devices in kvd's config)");

  auto second = AttachEventually("second");
  ASSERT_TRUE(second);
  auto third = Client::Attach(Options("third"));
  ExpectSaid(third.status(), Code::kResourceExhausted,
             "connections to kvd, its most (max_connections_per_process in kvd's config)");
}

TEST_F(KvdRefusalsTest, AGroupAUidMayNotJoinNamesTheGroupsKeys) {
  NANOKV_SKIP_UNLESS_ROOT();
  StartWithConfig("socket_mode: \"0666\"\nallowed_uids: [65534]\ngroups:\n  shared: {uids: [4242]}\n");
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  int code = RunAs(kNobody, kNobody, [&] {
    auto listed = Client::Attach(Options("nobody-shared", "shared"));
    if (listed.ok() || listed.status().code() != Code::kPermissionDenied) return 1;
    if (listed.status().message().find("uid 65534 (gid 65534) may not join group 'shared': kvd's config "
                                       "(groups.shared.uids or groups.shared.gids) does not list it") ==
        std::string_view::npos) return 2;
    auto unknown = Client::Attach(Options("nobody-other", "other"));
    if (unknown.ok() || unknown.status().code() != Code::kPermissionDenied) return 3;
    if (unknown.status().message().find("it is not in kvd's config (groups)") == std::string_view::npos) {
      return 4;
    }
    // A forked child cannot use CUDA once its parent has (this test process
    // attached on cuda before): the attach that opens the backend is
    // checked on host only; the refusals above come before any backend.
    if (Backend() != "host") return 0;
    auto own = Client::Attach(Options("nobody-own"));  // allowed_uids lets it in, to its own group
    return own.ok() ? 0 : 5;
  });
  EXPECT_EQ(code, 0) << "1, 3: attached or another code; 2, 4: the message lacks its key; 5: refused";
}

// Issue 16 item 4: tenant 257 is refused naming the segment's table, not
// attached and left out of kvctl's rows.
TEST_F(KvdRefusalsTest, Tenant257IsRefusedNamingTheTable) {
  StartWithConfig("max_connections_per_process: 300\n");
  std::vector<std::unique_ptr<Client>> tenants;
  for (uint32_t i = 0; i < ipc::kMaxTenants; ++i) {
    tenants.push_back(AttachEventually("t" + std::to_string(i)));
    ASSERT_TRUE(tenants.back()) << "tenant " << i;
  }
  auto refused = Client::Attach(Options("t256"));
  ExpectSaid(refused.status(), Code::kResourceExhausted,
             "kvd has 256 tenants attached, the most its state segment's tenant table holds (256");
  ASSERT_TRUE(WaitFor([&] { return Read().segment.header.tenant_count == ipc::kMaxTenants; }, 10s));
  tenants.pop_back();  // a place comes free
  EXPECT_TRUE(AttachEventually("t256"));
}

}  // namespace
}  // namespace nanokv::testing
