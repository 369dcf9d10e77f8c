// Malformed, out-of-order and unauthorised messages against a real kvd: each
// gets its error reply naming the fault, and kvd serves the next engine.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

class KvdProtocolTest : public KvdFixture {
 protected:
  ipc::Channel Connect() {
    auto channel = ipc::Channel::Connect(SocketPath());
    EXPECT_TRUE(channel.ok()) << channel.status().ToString();
    return channel.ok() ? std::move(channel).value() : ipc::Channel();
  }

  // The next reply; an empty message (no body) if the connection closed.
  wire::Message Reply(ipc::Channel& channel) {
    std::vector<std::byte> data;
    std::vector<int> fds;
    auto got = channel.Receive(&data, &fds);
    for (int fd : fds) close(fd);
    wire::Message m;
    if (got.ok() && *got == ipc::Channel::Received::kMessage) {
      EXPECT_TRUE(wire::Decode(data, &m).ok());
    }
    return m;
  }

  // Sends raw bytes and expects an Error reply whose text contains `fault`.
  void ExpectFault(ipc::Channel& channel, std::span<const std::byte> bytes, const std::string& fault,
                   std::span<const int> fds = {}) {
    ASSERT_TRUE(channel.Send(bytes, fds).ok());
    wire::Message reply = Reply(channel);
    ASSERT_TRUE(reply.has_error()) << "no error reply for: " << fault << "\n" << reply.DebugString();
    EXPECT_NE(reply.error().message().find(fault), std::string::npos) << reply.error().message();
  }

  // kvd still serves: a new tenant gets a page, and kvd's rows show that
  // page held by it, besides what `ledger` says the test's peers hold (a
  // refused request took nothing).
  void ExpectKvdServes(PageLedger ledger = {}) {
    EXPECT_TRUE(kvd_.Running()) << kvd_.Log();
    const std::string tenant = "after-" + std::to_string(++probes_);
    auto client = AttachClient(tenant);
    ASSERT_TRUE(client);
    auto granted = client->Grant(0, 1);
    ASSERT_TRUE(granted.ok()) << granted.status().ToString();
    ledger.Attach(tenant, "");
    ledger.Hold(tenant, 0, *granted);
    ExpectLedger(ledger);
  }

  static std::vector<std::byte> Bytes(wire::Message m, bool set_version = true) {
    if (set_version) m.set_version(wire::kWireVersion);
    std::vector<std::byte> out(m.ByteSizeLong());
    m.SerializeToArray(out.data(), static_cast<int>(out.size()));
    return out;
  }

  int probes_ = 0;
};

TEST_F(KvdProtocolTest, MalformedMessagesGetErrorsAndKvdCarriesOn) {
  StartKvd(16, {"--devices", "0"});  // its limit is one device's: a second GPU would double it
  ipc::Channel c = Connect();
  std::vector<std::byte> garbage(100, std::byte{0xA5});
  ExpectFault(c, garbage, "does not parse");

  wire::Message attach;
  attach.mutable_attach()->set_tenant("raw");
  wire::Message wrong_version = attach;
  wrong_version.set_version(wire::kWireVersion + 7);
  ExpectFault(c, Bytes(wrong_version, false), "speaks wire version 8");

  auto truncated = Bytes(attach);
  truncated.resize(truncated.size() - 2);
  ExpectFault(c, truncated, "does not parse");

  wire::Message grant;
  grant.mutable_grant()->set_device(0);
  grant.mutable_grant()->set_pages(1);
  ExpectFault(c, Bytes(grant), "attach first");

  ASSERT_TRUE(c.Send(Bytes(attach)).ok());
  ASSERT_TRUE(Reply(c).has_attach_reply());
  ExpectFault(c, Bytes(attach), "already attached");

  wire::Message huge = grant;
  huge.mutable_grant()->set_pages(wire::kMaxPagesPerRequest + 1);
  ExpectFault(c, Bytes(huge), "at most 4096 per request");
  wire::Message far_device = grant;
  far_device.mutable_grant()->set_device(9);
  ExpectFault(c, Bytes(far_device), "does not serve device 9");
  wire::Message too_many = grant;
  too_many.mutable_grant()->set_pages(17);
  ExpectFault(c, Bytes(too_many), "asked 17 pages");  // over its limit (= the device)

  wire::Message not_mine;
  not_mine.mutable_return_pages()->set_device(0);
  not_mine.mutable_return_pages()->add_page_ids(3);
  ExpectFault(c, Bytes(not_mine), "does not hold");

  wire::Message kvd_only;
  kvd_only.mutable_grant_reply()->set_device(0);
  ExpectFault(c, Bytes(kvd_only), "does not take 'grant_reply'");

  wire::Message empty;
  ExpectFault(c, Bytes(empty), "no body");

  std::vector<std::byte> oversized(ipc::kMaxDatagramBytes + 100, std::byte{1});
  ASSERT_EQ(send(c.fd(), oversized.data(), oversized.size(), 0), static_cast<ssize_t>(oversized.size()));
  wire::Message reply = Reply(c);
  ASSERT_TRUE(reply.has_error());
  EXPECT_NE(reply.error().message().find("larger than"), std::string::npos) << reply.error().message();
  // Issue 19 item 13: one byte over 64 KiB fit kvd's buffer and was taken.
  oversized.resize(ipc::kMaxDatagramBytes + 1);
  ASSERT_EQ(send(c.fd(), oversized.data(), oversized.size(), 0), static_cast<ssize_t>(oversized.size()));
  reply = Reply(c);
  ASSERT_TRUE(reply.has_error());
  EXPECT_NE(reply.error().message().find("over the 65536-byte limit"), std::string::npos)
      << reply.error().message();
  oversized.resize(ipc::kMaxDatagramBytes);  // at the limit: read, and refused as garbage
  ExpectFault(c, oversized, "does not parse");

  // After all that, the same connection still works.
  ASSERT_TRUE(c.Send(Bytes(grant)).ok());
  wire::Message granted = Reply(c);
  ASSERT_TRUE(granted.has_grant_reply()) << granted.DebugString();
  ASSERT_EQ(granted.grant_reply().pages_size(), 1);
  PageLedger ledger;  // raw holds that one page: none of the refused requests took any
  ledger.Attach("raw", "");
  ledger.Hold("raw", 0, std::vector<uint32_t>{granted.grant_reply().pages(0).page_id()});
  ExpectKvdServes(ledger);
}

// Issue 19 item 13: fds kvd did not ask for close the connection at once (as
// ARCHITECTURE says), rather than counting as one fault of 16.
TEST_F(KvdProtocolTest, FdsWithAnythingButAnAdoptCloseTheConnection) {
  StartKvd(16);
  ipc::Channel c = Connect();
  wire::Message attach;
  attach.mutable_attach()->set_tenant("fds");
  ASSERT_TRUE(c.Send(Bytes(attach)).ok());
  ASSERT_TRUE(Reply(c).has_attach_reply());
  wire::Message grant;
  grant.mutable_grant()->set_device(0);
  grant.mutable_grant()->set_pages(1);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ExpectFault(c, Bytes(grant), "file descriptors only with an adopt request", {pipe_fds, 2});
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  wire::Message after = Reply(c);
  EXPECT_FALSE(after.has_grant_reply() || after.has_error()) << "closed: " << after.DebugString();
  (void)c.Send(Bytes(grant));  // may fail: the peer is gone
  EXPECT_EQ(Reply(c).body_case(), wire::Message::BODY_NOT_SET);
  ExpectKvdServes();
}

TEST_F(KvdProtocolTest, AConnectionThatKeepsFaultingIsClosed) {
  StartKvd(16);
  ipc::Channel c = Connect();
  std::vector<std::byte> garbage(10, std::byte{0xFF});
  int errors = 0;
  for (int i = 0; i < 40; ++i) {
    if (!c.Send(garbage).ok()) break;
    wire::Message reply = Reply(c);
    if (!reply.has_error()) break;
    ++errors;
  }
  EXPECT_EQ(errors, 16) << "kvd closes a connection after 16 faults";
  ExpectKvdServes();
}

TEST_F(KvdProtocolTest, APeerThatIsNotAllowedIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  // A socket anyone may connect to, so the refusal is kvd's, not the mode's.
  std::ofstream(dir_.path() + "/open.yaml") << "socket_mode: \"0666\"\n";
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  StartKvd(16, {"--config", dir_.path() + "/open.yaml"});
  int result[2];
  ASSERT_EQ(pipe(result), 0);
  pid_t child = fork();
  if (child == 0) {
    // As 'nobody': kvd allows only root and its own user by default.
    char verdict = 'x';
    if (setgid(65534) == 0 && setuid(65534) == 0) {
      auto channel = ipc::Channel::Connect(SocketPath());
      if (!channel.ok()) {
        verdict = channel.status().code() == Code::kPermissionDenied ? 'p' : 'c';
      } else {
        wire::Message m;
        m.mutable_attach()->set_tenant("intruder");
        (void)channel->Send(wire::Encode(m));
        wire::Message reply = Reply(*channel);
        verdict = reply.has_error() &&
                  reply.error().code() == static_cast<int>(Code::kPermissionDenied) ? 'd' : 'a';
      }
    }
    ssize_t ignored = write(result[1], &verdict, 1);
    (void)ignored;
    _exit(0);
  }
  char verdict = 0;
  ASSERT_EQ(read(result[0], &verdict, 1), 1);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(verdict, 'd') << "p: refused by the socket's mode; a: attached; c/x: other failure";
  ExpectKvdServes();
}

}  // namespace
}  // namespace nanokv::testing
