// The engine side against faults the real kvd never sends, from a scripted
// peer (misbehaving_kvd.h): replies whose fds do not match their pages,
// replies to requests nobody made, surplus fds, a recycled page without its
// forget, a late answer, a socket closed mid-request. Every normal behaviour
// is tested against the real kvd in client_test.cc.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/client.h"
#include "tests/unit/client/misbehaving_kvd.h"

namespace nanokv {
namespace {

using ClientFaultTest = testing::MisbehavingKvdTest;
using testing::MisbehavingKvd;

TEST_F(ClientFaultTest, FdCountMismatchIsProtocolErrorAndDrops) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  MisbehavingKvd* kvd = kvd_.get();
  kvd->SetHook([kvd](const wire::Message& request) {
    if (!request.has_grant()) return false;
    wire::Message reply;
    reply.set_request_id(request.request_id());
    wire::PageGrant* g = reply.mutable_grant_reply()->add_pages();
    g->set_page_id(0);
    g->set_fd_attached(true);
    reply.mutable_grant_reply()->add_pages()->set_page_id(1);  // no fd, never imported
    kvd->Send(reply);                                          // and no fd at all
    return true;
  });
  auto pages = client->Grant(0, 2);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), Code::kProtocolError) << pages.status().ToString();
  EXPECT_FALSE(client->connected());
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kUnavailable);
}

TEST_F(ClientFaultTest, UnknownPageWithoutFdIsProtocolError) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  MisbehavingKvd* kvd = kvd_.get();
  kvd->SetHook([kvd](const wire::Message& request) {
    if (!request.has_grant()) return false;
    wire::Message reply;
    reply.set_request_id(request.request_id());
    reply.mutable_grant_reply()->add_pages()->set_page_id(3);
    kvd->Send(reply);
    return true;
  });
  auto pages = client->Grant(0, 1);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), Code::kProtocolError);
  EXPECT_NE(pages.status().ToString().find("without an fd"), std::string::npos);
}

// A page this process imported, granted again at a newer generation but
// without an fd: the cached handle is the old physical page, so using it would
// read another group's old bytes or a freed page. A protocol error, not a map.
TEST_F(ClientFaultTest, NewerGenerationWithoutFdIsProtocolError) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto first = client->Grant(0, 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_OK(client->Return(0, testing::Ids(*first)));
  const uint32_t id = (*first)[0].id;
  const uint32_t generation = (*first)[0].generation + 1;
  MisbehavingKvd* kvd = kvd_.get();
  kvd->SetHook([kvd, id, generation](const wire::Message& request) {
    if (!request.has_grant()) return false;
    wire::Message reply;
    reply.set_request_id(request.request_id());
    wire::PageGrant* g = reply.mutable_grant_reply()->add_pages();
    g->set_page_id(id);
    g->set_generation(generation);  // and fd_attached false: "you have it"
    kvd->Send(reply);
    return true;
  });
  auto again = client->Grant(0, 1);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kProtocolError) << again.status().ToString();
  EXPECT_NE(again.status().ToString().find("holds generation"), std::string::npos)
      << again.status().ToString();
}

TEST_F(ClientFaultTest, ReplyToNobodyDropsTheConnection) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  wire::Message reply;
  reply.set_request_id(12345);  // a request nobody made
  reply.mutable_return_reply();
  kvd_->Send(reply);
  EXPECT_TRUE(testing::WaitUntil([&] { return !client->connected(); }));
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kUnavailable);
}

// kvd sends a forget before a recycled page can reach this process again;
// a grant of a newer generation without it must still replace the handle.
TEST_F(ClientFaultTest, NewGenerationWithoutForgetReplacesTheHandle) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto first = client->Grant(0, 1);
  ASSERT_TRUE(first.ok());
  ASSERT_OK(client->Return(0, testing::Ids(*first)));
  kvd_->RecycleWithoutForget((*first)[0].id);
  auto again = client->Grant(0, 1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)[0].id, (*first)[0].id);
  EXPECT_EQ((*again)[0].generation, (*first)[0].generation + 1);
  ClientStats stats = client->stats();
  EXPECT_EQ(stats.pages_imported, 2u);
  EXPECT_EQ(stats.pages_released, 1u);
  EXPECT_EQ(stats.cached_handles, 1u);
}

TEST_F(ClientFaultTest, ClosedSocketFailsRequestsInFlight) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  MisbehavingKvd* kvd = kvd_.get();
  kvd->SetHook([kvd](const wire::Message& request) {
    if (request.has_grant()) kvd->Close();  // crash instead of answering
    return request.has_grant();
  });
  auto pages = client->Grant(0, 1);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), Code::kUnavailable);
  EXPECT_FALSE(client->connected());
}

TEST_F(ClientFaultTest, TimedOutGrantIsReturnedWhenItArrives) {
  ClientOptions options;
  options.request_timeout_ms = 100;
  auto client = Start(16, options);
  ASSERT_NE(client, nullptr);
  MisbehavingKvd* kvd = kvd_.get();
  // Shared with the hook, which the peer may still call while the client
  // detaches at the end of the test.
  auto late = std::make_shared<std::atomic<uint64_t>>(0);
  kvd->SetHook([late](const wire::Message& request) {
    if (!request.has_grant() || *late != 0) return false;
    *late = request.request_id();  // answered later, by the test
    return true;
  });
  std::atomic<uint64_t>& late_request = *late;
  auto pages = client->Grant(0, 2);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), Code::kUnavailable);
  ASSERT_NE(late_request, 0u);
  kvd->SendGrant(late_request, kvd->Take(2));
  EXPECT_TRUE(testing::WaitUntil([&] { return kvd->returns() > 0; }));
  EXPECT_EQ(kvd->returns(), 1);
  EXPECT_EQ(kvd->held_pages(), 0u);
  EXPECT_TRUE(client->connected());
  EXPECT_EQ(client->stats().cached_handles, 2u);  // imported all the same
  EXPECT_TRUE(client->Grant(0, 2).ok());
}

TEST_F(ClientFaultTest, SurplusFdsAreClosed) {
  size_t before = testing::OpenFds();
  {
    auto client = Start();
    ASSERT_NE(client, nullptr);
    // A reply with more fds than pages: all of them must be closed.
    MisbehavingKvd* kvd = kvd_.get();
    kvd->SetHook([kvd](const wire::Message& request) {
      if (!request.has_grant()) return false;
      wire::Message reply;
      reply.set_request_id(request.request_id());
      wire::PageGrant* g = reply.mutable_grant_reply()->add_pages();
      g->set_page_id(0);
      g->set_fd_attached(true);
      int fds[2] = {dup(0), dup(0)};
      kvd->Send(reply, {fds[0], fds[1]});
      close(fds[0]);
      close(fds[1]);
      return true;
    });
    EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kProtocolError);
    client.reset();
    kvd_.reset();
  }
  EXPECT_EQ(testing::OpenFds(), before);
}

// Issue 16 item 3: a kvd of another release is said to be one, in the
// engine's error, not as a protocol fault.
TEST_F(ClientFaultTest, AKvdOfAnotherWireVersionIsNamedAsSuch) {
  const std::string ipc_name = testing::UniqueIpcName("misbehaving");
  kvd_ = std::make_unique<MisbehavingKvd>(ipc_name, 4);
  ASSERT_TRUE(kvd_->bind_status().ok());
  MisbehavingKvd* kvd = kvd_.get();
  kvd->SetHook([kvd](const wire::Message& request) {
    wire::Message reply;
    reply.set_version(wire::kWireVersion + 1);
    reply.set_request_id(request.request_id());
    reply.mutable_attach_reply()->set_tenant_id(1);
    kvd->SendRaw(reply);
    return true;
  });
  ClientOptions options;
  options.ipc_name = ipc_name;
  options.tenant = "engine";
  auto client = Client::Attach(options);
  ASSERT_EQ(client.status().code(), Code::kUnsupported) << client.status().ToString();
  EXPECT_NE(client.status().message().find("kvd: incompatible nanokv versions: the peer speaks wire "
                                           "version " + std::to_string(wire::kWireVersion + 1) +
                                           ", this side " + std::to_string(wire::kWireVersion)),
            std::string::npos) << client.status().ToString();
}

}  // namespace
}  // namespace nanokv
