// The transfer agent's gate before a peer's hello (daemon/transfer/hello_gate.h):
// the verdict on a hello, and the endpoints allowed to wait for one.
#include "daemon/transfer/hello_gate.h"

#include <gtest/gtest.h>

#include "ipc/ucx/transfer_wire.h"
#include "tests/util/status_matchers.h"

namespace nanokv::kvd {
namespace {

transfer::v1::Hello HelloWith(uint32_t protocol, const std::string& token) {
  transfer::v1::Hello hello;
  hello.set_protocol(protocol);
  hello.set_token(token);
  return hello;
}

TEST(HelloVerdictTest, AdmitsTheProtocolAndTheTokenOnly) {
  EXPECT_OK(HelloVerdict(HelloWith(ucx::kTransferProtocol, "secret"), "secret"));
  EXPECT_OK(HelloVerdict(HelloWith(ucx::kTransferProtocol, "anything"), ""));  // no token: any peer
  EXPECT_EQ(HelloVerdict(HelloWith(ucx::kTransferProtocol + 1, "secret"), "secret").code(), Code::kUnsupported);
  const Status wrong = HelloVerdict(HelloWith(ucx::kTransferProtocol, "secreT"), "secret");
  EXPECT_EQ(wrong.code(), Code::kPermissionDenied);
  EXPECT_NE(wrong.ToString().find("master.token_file"), std::string::npos) << wrong.ToString();
  EXPECT_EQ(HelloVerdict(HelloWith(ucx::kTransferProtocol, ""), "secret").code(), Code::kPermissionDenied);
}

TEST(HelloWaitersTest, AHostPastItsBoundEndsItsOwnOldest) {
  HelloWaiters gate(/*per_host=*/2, /*total=*/10);
  EXPECT_FALSE(gate.Add(1, "a").has_value());
  EXPECT_FALSE(gate.Add(2, "b").has_value());
  EXPECT_FALSE(gate.Add(3, "a").has_value());
  EXPECT_EQ(gate.Add(4, "a"), std::optional<HelloWaiters::Id>(1));  // a's oldest, not b's
  EXPECT_FALSE(gate.Waiting(1));
  EXPECT_TRUE(gate.Waiting(2));
  EXPECT_EQ(gate.Of("a"), 2u);
  EXPECT_EQ(gate.size(), 3u);
}

TEST(HelloWaitersTest, AllPastTheirBoundEndTheOldestOfAll) {
  HelloWaiters gate(/*per_host=*/5, /*total=*/3);
  gate.Add(1, "a");
  gate.Add(2, "b");
  gate.Add(3, "c");
  EXPECT_EQ(gate.Add(4, "d"), std::optional<HelloWaiters::Id>(1));
  EXPECT_EQ(gate.size(), 3u);
  EXPECT_EQ(gate.Of("a"), 0u);
}

TEST(HelloWaitersTest, AdmittedOrEndedEndpointsLeaveRoom) {
  HelloWaiters gate(/*per_host=*/1, /*total=*/4);
  gate.Add(1, "a");
  gate.Remove(1);  // admitted
  gate.Remove(1);  // again: nothing
  gate.Remove(9);  // never there: nothing
  EXPECT_FALSE(gate.Add(2, "a").has_value());
  EXPECT_EQ(gate.size(), 1u);
}

}  // namespace
}  // namespace nanokv::kvd
