// ipc::Call over the SOCK_SEQPACKET transport, against a scripted peer on
// the other end of a socketpair: what the four synchronous callers rely on
// (libkv's handshake and re-adopt, the object store, kvctl).
#include "ipc/rpc/call.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ipc/uds/channel.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/wire/codec.h"

namespace nanokv::ipc {
namespace {

using namespace std::chrono_literals;

wire::Message SetLimitRequest(uint64_t bytes) {
  wire::Message m;
  m.mutable_set_limit()->set_limit_bytes(bytes);
  return m;
}

wire::Message SetLimitReply(uint64_t request_id, uint64_t limit) {
  wire::Message m;
  m.set_request_id(request_id);
  m.mutable_set_limit_reply()->set_limit_bytes(limit);
  return m;
}

wire::Message Reclaim(uint32_t pages) {
  wire::Message m;  // request id 0: a notice
  m.mutable_reclaim()->set_device(0);
  m.mutable_reclaim()->set_pages(pages);
  return m;
}

// How many fds this process has open: a refused or skipped fd must be closed.
size_t OpenFds() {
  size_t n = 0;
  for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) >= 0 ? 1 : 0;
  return n;
}

class CallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pair = Channel::Pair();
    ASSERT_TRUE(pair.ok()) << pair.status().ToString();
    ours_ = std::move(pair->first);
    peer_ = std::move(pair->second);
    options_.peer = "test peer";
    options_.timeout = 2s;
  }

  // The peer sends `message` (request id as set) with `fds`. The socket
  // buffers it, so a reply can be queued before the call sends its request.
  void PeerSends(const wire::Message& message, std::vector<int> fds = {}) {
    ASSERT_TRUE(peer_.Send(wire::Encode(message), fds).ok());
  }

  // The request the call sent, as the peer receives it.
  wire::Message PeerReceives(std::vector<int>* fds = nullptr) {
    std::vector<std::byte> data;
    std::vector<int> got;
    auto received = peer_.Receive(&data, &got);
    EXPECT_TRUE(received.ok() && *received == Channel::Received::kMessage);
    wire::Message request;
    EXPECT_TRUE(wire::Decode(data, &request).ok());
    if (fds != nullptr) {
      *fds = got;
    } else {
      for (int fd : got) close(fd);
    }
    return request;
  }

  Result<Reply> CallNow(uint64_t request_id, std::span<const int> fds = {}) {
    ChannelTransport transport(ours_);
    return Call(transport, request_id, SetLimitRequest(1 << 20), fds, options_);
  }

  // A pipe's read end, to pass as a page would be; the write end is closed.
  static int PipeFd() {
    int ends[2];
    EXPECT_EQ(pipe(ends), 0);
    close(ends[1]);
    return ends[0];
  }

  Channel ours_;
  Channel peer_;
  CallOptions options_;
};

TEST_F(CallTest, ReturnsTheReplyThatEchoesTheRequestId) {
  PeerSends(SetLimitReply(7, 4096));
  auto reply = CallNow(7);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->message.request_id(), 7u);
  EXPECT_EQ(reply->message.set_limit_reply().limit_bytes(), 4096u);
  EXPECT_TRUE(reply->fds.empty());
  wire::Message request = PeerReceives();
  EXPECT_EQ(request.request_id(), 7u);
  EXPECT_EQ(request.set_limit().limit_bytes(), 1u << 20);
  EXPECT_TRUE(ours_.valid());
}

TEST_F(CallTest, SendsTheRequestsFdsAndTheCallerKeepsThem) {
  int fd = PipeFd();
  PeerSends(SetLimitReply(3, 1));
  int request_fds[] = {fd};
  ASSERT_TRUE(CallNow(3, request_fds).ok());
  std::vector<int> got;
  EXPECT_EQ(PeerReceives(&got).request_id(), 3u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0], fd);
  EXPECT_GE(fcntl(fd, F_GETFD), 0) << "the caller's fd was closed";
  close(got[0]);
  close(fd);
}

TEST_F(CallTest, WaitsForAReplyThatComesLater) {
  options_.spin = 200us;
  std::thread peer([this] {
    wire::Message request = PeerReceives();
    std::this_thread::sleep_for(20ms);  // past the spin: the call blocks
    PeerSends(SetLimitReply(request.request_id(), 99));
  });
  auto reply = CallNow(11);
  peer.join();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->message.set_limit_reply().limit_bytes(), 99u);
}

TEST_F(CallTest, SkipsAStrayReplyWhenAsked) {
  options_.stray_replies = StrayReplies::kSkip;
  PeerSends(SetLimitReply(4, 1));  // a late answer to a call that gave up
  PeerSends(SetLimitReply(5, 2));
  auto reply = CallNow(5);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->message.set_limit_reply().limit_bytes(), 2u);
}

TEST_F(CallTest, RefusesAStrayReplyByDefault) {
  PeerSends(SetLimitReply(4, 1));
  PeerSends(SetLimitReply(5, 2));
  auto reply = CallNow(5);
  ASSERT_EQ(reply.status().code(), Code::kProtocolError);
  EXPECT_NE(reply.status().ToString().find("test peer sent set_limit_reply for request 4 while "
                                           "set_limit (request 5) waited"),
            std::string::npos)
      << reply.status().ToString();
  EXPECT_TRUE(ours_.valid());
}

TEST_F(CallTest, HandsNoticesToTheCallbackInOrderAndKeepsWaiting) {
  std::vector<uint32_t> seen;
  options_.on_notice = [&seen](const wire::Message& notice) {
    EXPECT_EQ(notice.request_id(), 0u);
    seen.push_back(notice.reclaim().pages());
    return Status::OK();
  };
  PeerSends(Reclaim(3));
  PeerSends(Reclaim(1));
  PeerSends(SetLimitReply(9, 8));
  auto reply = CallNow(9);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(seen, (std::vector<uint32_t>{3, 1}));
}

TEST_F(CallTest, ANoticeCallbacksErrorEndsTheCall) {
  options_.on_notice = [](const wire::Message& notice) {
    return notice.has_error() ? wire::StatusFromError(notice.error()) : Status::OK();
  };
  // kvd speaking first: a refusal at connect.
  PeerSends(wire::ErrorReply(0, Status::ResourceExhausted("too many connections")));
  auto reply = CallNow(1);
  EXPECT_EQ(reply.status().code(), Code::kResourceExhausted);
  EXPECT_NE(reply.status().ToString().find("too many connections"), std::string::npos);
}

// kvd refuses a connection with an Error of request id 0 before any reply:
// that is the call's answer, whatever the caller does with notices.
TEST_F(CallTest, ARefusalAtConnectIsTheAnswerAndClosesTheTransport) {
  PeerSends(wire::ErrorReply(0, Status::PermissionDenied("uid 7 may not connect (allowed_uids)")));
  auto reply = CallNow(1);
  EXPECT_EQ(reply.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(reply.status().ToString(), "PermissionDenied: kvd: uid 7 may not connect (allowed_uids)");
  EXPECT_FALSE(ours_.valid()) << "nothing more comes on a refused connection";
}

TEST_F(CallTest, ANoticeWithoutACallbackIsAStray) {
  PeerSends(Reclaim(2));
  EXPECT_EQ(CallNow(1).status().code(), Code::kProtocolError);

  options_.stray_replies = StrayReplies::kSkip;
  PeerSends(Reclaim(2));
  PeerSends(SetLimitReply(2, 3));
  EXPECT_TRUE(CallNow(2).ok());
}

TEST_F(CallTest, MapsAnErrorReplyToItsStatus) {
  PeerSends(wire::ErrorReply(6, Status::NotFound("no tenant 'x'")));
  auto reply = CallNow(6);
  EXPECT_EQ(reply.status().code(), Code::kNotFound);
  EXPECT_NE(reply.status().ToString().find("no tenant 'x'"), std::string::npos);
  EXPECT_TRUE(ours_.valid()) << "an answer, even an error, keeps the connection";
}

TEST_F(CallTest, ADeadlinePassedIsUnavailableAndClosesTheTransport) {
  options_.timeout = 50ms;
  options_.spin = 100us;
  auto start = std::chrono::steady_clock::now();
  auto reply = CallNow(8);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(reply.status().code(), Code::kUnavailable);
  EXPECT_NE(reply.status().ToString().find("test peer did not answer set_limit (request 8) within "
                                           "50 ms"),
            std::string::npos)
      << reply.status().ToString();
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 2s);
  // A late reply must not answer the next request.
  EXPECT_FALSE(ours_.valid());
}

TEST_F(CallTest, APeerThatClosesIsUnavailable) {
  std::thread peer([this] {
    PeerReceives();
    peer_.Close();
  });
  options_.timeout.reset();  // no deadline: only the close ends the wait
  auto reply = CallNow(2);
  peer.join();
  EXPECT_EQ(reply.status().code(), Code::kUnavailable);
  EXPECT_NE(reply.status().ToString().find("closed the connection before answering"),
            std::string::npos)
      << reply.status().ToString();
  EXPECT_FALSE(ours_.valid());
}

TEST_F(CallTest, RefusesFdsItDidNotAskForAndClosesThem) {
  size_t before = OpenFds();
  int fd = PipeFd();
  PeerSends(SetLimitReply(4, 1), {fd});
  close(fd);
  auto reply = CallNow(4);
  EXPECT_EQ(reply.status().code(), Code::kProtocolError);
  EXPECT_NE(reply.status().ToString().find("carried fds"), std::string::npos);
  EXPECT_EQ(OpenFds(), before);
}

TEST_F(CallTest, ClosesUnwantedFdsAndAnswers) {
  options_.reply_fds = ReplyFds::kClose;
  size_t before = OpenFds();
  int fd = PipeFd();
  PeerSends(SetLimitReply(4, 1), {fd});
  close(fd);
  auto reply = CallNow(4);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->fds.empty());
  EXPECT_EQ(OpenFds(), before);
}

TEST_F(CallTest, KeepsTheRepliesFdsAndClosesTheNoticesAndStrays) {
  options_.reply_fds = ReplyFds::kKeep;
  options_.stray_replies = StrayReplies::kSkip;
  options_.on_notice = [](const wire::Message&) { return Status::OK(); };
  size_t before = OpenFds();
  int fd = PipeFd();
  PeerSends(Reclaim(1), {fd});
  PeerSends(SetLimitReply(3, 1), {fd});  // a stray's
  PeerSends(SetLimitReply(4, 1), {fd, fd});
  close(fd);
  auto reply = CallNow(4);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->fds.size(), 2u);
  EXPECT_EQ(OpenFds(), before + 2) << "only the reply's fds stay open";
  struct stat st;
  EXPECT_EQ(fstat(reply->fds[0], &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  for (int kept : reply->fds) close(kept);
}

TEST_F(CallTest, AnErrorReplysFdsAreClosedEvenWhenKept) {
  options_.reply_fds = ReplyFds::kKeep;
  size_t before = OpenFds();
  int fd = PipeFd();
  PeerSends(wire::ErrorReply(4, Status::NotFound("gone")), {fd});
  close(fd);
  EXPECT_EQ(CallNow(4).status().code(), Code::kNotFound);
  EXPECT_EQ(OpenFds(), before);
}

TEST_F(CallTest, AMessageThatDoesNotDecodeIsAProtocolError) {
  std::byte junk[] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}};
  ASSERT_TRUE(peer_.Send(junk).ok());
  EXPECT_EQ(CallNow(1).status().code(), Code::kProtocolError);
}

TEST_F(CallTest, RequestIdZeroIsRefused) {
  EXPECT_EQ(CallNow(0).status().code(), Code::kInvalidArgument);
}

TEST_F(CallTest, ASendToAClosedPeerFails) {
  peer_.Close();
  EXPECT_FALSE(CallNow(1).ok());
}

// A transport with no socket under it, as the shared-memory ring will be: the
// reply is there after `looks_before_reply` looks, and it counts how the call
// asked for it.
class ScriptedTransport final : public Transport {
 public:
  explicit ScriptedTransport(int looks_before_reply) : looks_before_reply_(looks_before_reply) {}

  Status Send(std::span<const std::byte> message, std::span<const int>) override {
    return wire::Decode(message, &request_);
  }
  Result<Received> Receive(std::vector<std::byte>* message, std::vector<int>*,
                           Clock::time_point deadline) override {
    bool look = deadline <= Clock::now();
    (look ? looks_ : blocking_waits_)++;
    if (look && looks_ <= looks_before_reply_) return Received::kTimedOut;
    *message = wire::Encode(SetLimitReply(request_.request_id(), 1));
    return Received::kMessage;
  }
  void Close() override { closed_ = true; }

  int looks() const { return looks_; }
  int blocking_waits() const { return blocking_waits_; }
  bool closed() const { return closed_; }

 private:
  int looks_before_reply_;
  wire::Message request_;
  int looks_ = 0;
  int blocking_waits_ = 0;
  bool closed_ = false;
};

TEST(CallSpinTest, AReplyWithinTheSpinIsTakenWithoutBlocking) {
  ScriptedTransport transport(/*looks_before_reply=*/3);
  CallOptions options;
  options.spin = 1s;  // ends with the reply, long before this
  auto reply = Call(transport, 1, SetLimitRequest(1), {}, options);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(transport.looks(), 4);
  EXPECT_EQ(transport.blocking_waits(), 0);
}

TEST(CallSpinTest, WithoutASpinTheCallBlocksAtOnce) {
  ScriptedTransport transport(/*looks_before_reply=*/0);
  auto reply = Call(transport, 1, SetLimitRequest(1), {}, CallOptions{});
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(transport.looks(), 0);
  EXPECT_EQ(transport.blocking_waits(), 1);
}

TEST(CallSpinTest, TheSpinStopsAtTheDeadline) {
  ScriptedTransport transport(/*looks_before_reply=*/1'000'000'000);
  CallOptions options;
  options.spin = 10s;
  options.timeout = 20ms;
  auto start = std::chrono::steady_clock::now();
  auto reply = Call(transport, 1, SetLimitRequest(1), {}, options);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 20ms);
  EXPECT_LT(waited, 5s);
  EXPECT_EQ(reply.status().code(), Code::kUnavailable);
  EXPECT_TRUE(transport.closed());
}

}  // namespace
}  // namespace nanokv::ipc
