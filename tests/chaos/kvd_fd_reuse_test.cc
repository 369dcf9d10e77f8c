// Regressions the chaos run (nanokv_chaos) found in kvd, each reproduced
// deterministically against the real kvd binary.
#include <signal.h>

#include <chrono>
#include <future>

#include <gtest/gtest.h>

#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

class KvdFdReuseTest : public KvdFixture {};

// An engine dies; in one turn of kvd's loop its socket hangs up (the
// connection is marked to close at the end of the turn), its pidfd fires
// (the connection is closed at once), and a new engine connects, getting
// the dead one's fd number. kvd closed the new connection at the end of
// that turn, in the middle of its attach. kvd is stopped (SIGSTOP) while
// this happens so all three events land in one epoll_wait.
TEST_F(KvdFdReuseTest, ANewConnectionOnADeadEnginesFdNumberSurvivesTheTurn) {
  StartKvd(16);
  Process engine = StartEngine("dying", {"--pages", "2", "--step", "2", "--hold-ms", "60000"});
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, std::chrono::seconds(20)))
      << engine.Log();

  ASSERT_TRUE(kvd_.Pause());
  engine.Signal(SIGKILL);
  ASSERT_TRUE(engine.Wait(std::chrono::seconds(10)).has_value());
  // Connects (the kernel queues it on the listener) and waits for the reply.
  auto attach = std::async(std::launch::async, [&] { return Client::Attach(Options("newcomer")); });
  // Its connection waits on the listener of the stopped kvd.
  bool connected = WaitFor([&] { return HasConnectionTo(kvd_.pid()); }, std::chrono::seconds(20));
  kvd_.Signal(SIGCONT);
  ASSERT_TRUE(connected) << "the newcomer never connected";

  auto client = attach.get();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*client)->Grant(0, 1).ok());
  EXPECT_TRUE(WaitFor([&] { return GrantedPages() == 1; }, std::chrono::seconds(10)));
  ExpectCountsExact(Read());
}

}  // namespace
}  // namespace nanokv::testing
