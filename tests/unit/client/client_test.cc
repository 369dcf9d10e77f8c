// The engine side against a scripted kvd (fake_kvd.h): attach, the import
// cache (import once, reuse, new generations, forget), multi-datagram grants,
// protocol faults, reclaim callbacks, kvd going away, timeouts, fd
// ownership. KVTensor's own tests are in kv_tensor_test.cc.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"
#include "tests/unit/client/fake_kvd.h"

namespace nanokv {
namespace {

using testing::FakeKvd;
using ClientTest = testing::FakeKvdTest;
constexpr size_t kPage = FakeKvd::kPageBytes;

TEST_F(ClientTest, AttachWithoutKvdIsUnavailable) {
  ClientOptions options;
  options.ipc_name = "nobody";
  auto client = Client::Attach(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
  EXPECT_NE(client.status().ToString().find("is kvd running?"), std::string::npos);
}

TEST_F(ClientTest, AttachRejectsBadOptions) {
  ClientOptions options;
  options.ipc_name = "a/b";
  EXPECT_EQ(Client::Attach(options).status().code(), Code::kInvalidArgument);
  options.ipc_name = "fine";
  options.tenant = "no spaces";
  EXPECT_EQ(Client::Attach(options).status().code(), Code::kInvalidArgument);
  options.tenant = "";
  options.limit_fraction = 1.5;
  EXPECT_EQ(Client::Attach(options).status().code(), Code::kInvalidArgument);
}

TEST_F(ClientTest, AttachReportsGeometry) {
  auto client = Start(16, {}, 2);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->tenant_id(), 7u);
  EXPECT_EQ(client->tenant(), "test-engine");
  EXPECT_EQ(client->page_bytes(), kPage);
  EXPECT_EQ(client->backend_name(), "host");
  EXPECT_EQ(client->segment_name(), "nanokv_fake");
  EXPECT_EQ(client->limit_bytes(), 16 * kPage);
  ASSERT_EQ(client->devices().size(), 2u);
  EXPECT_EQ(client->devices()[1].device, 1);
  EXPECT_EQ(client->devices()[1].capacity_pages, 16u);
  EXPECT_TRUE(client->connected());
}

TEST_F(ClientTest, DefaultTenantNameIsProgramAndPid) {
  kvd_ = std::make_unique<FakeKvd>("fake", 4);
  ClientOptions options;
  options.ipc_name = "fake";
  auto client = Client::Attach(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_NE((*client)->tenant().find("-" + std::to_string(getpid())), std::string::npos)
      << (*client)->tenant();
}

TEST_F(ClientTest, PageSizeMismatchIsInvalidArgument) {
  kvd_ = std::make_unique<FakeKvd>("fake", 4);
  ClientOptions options;
  options.ipc_name = "fake";
  options.expect_page_bytes = 4u << 20;
  auto client = Client::Attach(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kInvalidArgument);
  EXPECT_NE(client.status().ToString().find("2097152"), std::string::npos);
  kvd_.reset();  // the fake serves one connection
  kvd_ = std::make_unique<FakeKvd>("fake", 4);
  options.expect_page_bytes = kPage;
  EXPECT_TRUE(Client::Attach(options).ok());
}

TEST_F(ClientTest, GrantImportsOnceThenReusesTheHandle) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto first = client->Grant(0, 3);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 3u);
  EXPECT_EQ(kvd_->fds_sent(), 3);
  EXPECT_EQ(client->stats().pages_imported, 3u);
  EXPECT_EQ(client->stats().cached_handles, 3u);

  ASSERT_OK(client->Return(0, testing::Ids(*first)));
  EXPECT_EQ(kvd_->held_pages(), 0u);
  EXPECT_EQ(client->stats().cached_handles, 3u);  // Return keeps the handles

  auto again = client->Grant(0, 3);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(kvd_->fds_sent(), 3);  // no fd the second time
  EXPECT_EQ(client->stats().pages_imported, 3u);
  EXPECT_EQ(client->stats().pages_reused, 3u);
}

TEST_F(ClientTest, NewGenerationReplacesTheHandle) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto first = client->Grant(0, 1);
  ASSERT_TRUE(first.ok());
  ASSERT_OK(client->Return(0, testing::Ids(*first)));
  kvd_->Recycle(0, (*first)[0].id, /*send_forget=*/false);
  auto again = client->Grant(0, 1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)[0].id, (*first)[0].id);
  EXPECT_EQ((*again)[0].generation, (*first)[0].generation + 1);
  ClientStats stats = client->stats();
  EXPECT_EQ(stats.pages_imported, 2u);
  EXPECT_EQ(stats.pages_released, 1u);
  EXPECT_EQ(stats.cached_handles, 1u);
}

TEST_F(ClientTest, ForgetReleasesTheHandle) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto first = client->Grant(0, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_OK(client->Return(0, testing::Ids(*first)));
  kvd_->Recycle(0, (*first)[0].id);
  // The forget is processed in order, before the reply to this request.
  ASSERT_TRUE(client->SetLimit(16 * kPage).ok());
  EXPECT_EQ(client->stats().cached_handles, 1u);
  EXPECT_EQ(client->stats().pages_released, 1u);
  auto again = client->Grant(0, 2);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(client->stats().pages_imported, 3u);
  EXPECT_EQ(client->stats().pages_reused, 1u);
}

TEST_F(ClientTest, LargeGrantComesInSeveralDatagrams) {
  auto client = Start(600);
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 520);  // 250 + 250 + 20 fds
  ASSERT_TRUE(pages.ok()) << pages.status().ToString();
  EXPECT_EQ(pages->size(), 520u);
  std::set<uint32_t> distinct;
  for (const auto& page : *pages) distinct.insert(page.id);
  EXPECT_EQ(distinct.size(), 520u);
  EXPECT_EQ(client->stats().pages_imported, 520u);
}

TEST_F(ClientTest, KvdErrorKeepsItsCode) {
  auto client = Start(4);
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 5);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), Code::kResourceExhausted);
  EXPECT_TRUE(client->connected());
  EXPECT_TRUE(client->Grant(0, 4).ok());
}

TEST_F(ClientTest, LocalChecksNeverReachKvd) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->Grant(0, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(client->Grant(0, 5000).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(client->Grant(3, 1).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(client->connected());
}

TEST_F(ClientTest, FdCountMismatchIsProtocolErrorAndDrops) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  FakeKvd* kvd = kvd_.get();
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

TEST_F(ClientTest, UnknownPageWithoutFdIsProtocolError) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  FakeKvd* kvd = kvd_.get();
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

TEST_F(ClientTest, GarbageFromKvdDropsTheConnection) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  wire::Message reply;
  reply.set_request_id(12345);  // a request nobody made
  reply.mutable_return_reply();
  kvd_->Send(reply);
  for (int i = 0; i < 200 && client->connected(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(client->connected());
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kUnavailable);
}

TEST_F(ClientTest, ReclaimCallbackMayReturnPages) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 4);
  ASSERT_TRUE(pages.ok());
  std::vector<uint32_t> ids = testing::Ids(*pages);
  std::atomic<int> calls{0};
  std::atomic<bool> returned_ok{false};
  client->OnReclaim([&](const ReclaimNotice& notice) {
    EXPECT_EQ(notice.pages, 2u);
    EXPECT_EQ(notice.limit_bytes, 2 * kPage);
    // Runs on the callback thread: a blocking request here must not deadlock.
    std::vector<uint32_t> give(ids.begin(), ids.begin() + notice.pages);
    returned_ok = client->Return(0, give).ok();
    ++calls;
  });
  wire::Message reclaim;
  reclaim.mutable_reclaim()->set_device(-1);
  reclaim.mutable_reclaim()->set_pages(2);
  reclaim.mutable_reclaim()->set_limit_bytes(2 * kPage);
  kvd_->SendNotice(reclaim);
  for (int i = 0; i < 400 && calls == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(returned_ok);
  EXPECT_EQ(client->pending_reclaim_pages(), 0u);
  EXPECT_EQ(client->limit_bytes(), 2 * kPage);
  EXPECT_EQ(kvd_->held_pages(), 2u);
}

TEST_F(ClientTest, PendingReclaimForPollers) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 4);
  ASSERT_TRUE(pages.ok());
  wire::Message reclaim;
  reclaim.mutable_reclaim()->set_device(0);
  reclaim.mutable_reclaim()->set_pages(3);
  reclaim.mutable_reclaim()->set_limit_bytes(kPage);
  kvd_->SendNotice(reclaim);
  for (int i = 0; i < 400 && client->pending_reclaim_pages() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(client->pending_reclaim_pages(), 3u);
  std::vector<uint32_t> ids = testing::Ids(*pages);
  ASSERT_OK(client->Return(0, std::vector<uint32_t>(ids.begin(), ids.begin() + 2)));
  EXPECT_EQ(client->pending_reclaim_pages(), 1u);
  // A SetLimit reply states the excess itself: 2 pages used, limit 1 page.
  auto limit = client->SetLimit(kPage);
  ASSERT_TRUE(limit.ok());
  EXPECT_EQ(client->pending_reclaim_pages(), 1u);
  limit = client->SetLimit(8 * kPage);
  ASSERT_TRUE(limit.ok());
  EXPECT_EQ(*limit, 8 * kPage);
  EXPECT_EQ(client->limit_bytes(), 8 * kPage);
  EXPECT_EQ(client->pending_reclaim_pages(), 0u);
}

TEST_F(ClientTest, ShutdownNoticeKeepsMappedPagesValid) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto tensor = KVTensor::Create(*client, 0, 2 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_OK((*tensor)->Grow(2));
  ASSERT_OK(client->FillDevice((*tensor)->data(), 0x5a, 2 * kPage));

  wire::Message shutdown;
  shutdown.mutable_shutdown()->set_reason("test says stop");
  kvd_->SendNotice(shutdown);
  for (int i = 0; i < 400 && client->connected(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(client->connected());
  auto grant = client->Grant(0, 1);
  EXPECT_EQ(grant.status().code(), Code::kUnavailable);
  EXPECT_NE(grant.status().ToString().find("kvd went away"), std::string::npos);

  std::vector<uint8_t> host(2 * kPage);
  ASSERT_OK(client->CopyToHost(host.data(), (*tensor)->data(), host.size()));
  EXPECT_EQ(host.front(), 0x5a);
  EXPECT_EQ(host.back(), 0x5a);
  tensor->reset();  // teardown with kvd gone: logs, no error
}

TEST_F(ClientTest, ClosedSocketFailsRequestsInFlight) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  FakeKvd* kvd = kvd_.get();
  kvd->SetHook([kvd](const wire::Message& request) {
    if (request.has_grant()) kvd->Close();  // crash instead of answering
    return request.has_grant();
  });
  auto pages = client->Grant(0, 1);
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), Code::kUnavailable);
  EXPECT_FALSE(client->connected());
}

TEST_F(ClientTest, TimedOutGrantIsReturnedWhenItArrives) {
  ClientOptions options;
  options.request_timeout_ms = 100;
  auto client = Start(16, options);
  ASSERT_NE(client, nullptr);
  FakeKvd* kvd = kvd_.get();
  // Shared with the hook, which the fake may still call while the client
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
  kvd->SendGrant(late_request, 0, kvd->Take(0, 2));
  for (int i = 0; i < 400 && kvd->returns() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(kvd->returns(), 1);
  EXPECT_EQ(kvd->held_pages(), 0u);
  EXPECT_TRUE(client->connected());
  EXPECT_EQ(client->stats().cached_handles, 2u);  // imported all the same
  EXPECT_TRUE(client->Grant(0, 2).ok());
}

TEST_F(ClientTest, DetachIsIdempotent) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  ASSERT_OK(client->Detach());
  EXPECT_FALSE(client->connected());
  ASSERT_OK(client->Detach());
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kFailedPrecondition);
  for (int i = 0; i < 400 && !kvd_->client_closed(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(kvd_->client_closed());
}

TEST_F(ClientTest, ManyThreadsGrantAndReturn) {
  auto client = Start(64);
  ASSERT_NE(client, nullptr);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto pages = client->Grant(0, 4);
        if (!pages.ok() || pages->size() != 4 || !client->Return(0, testing::Ids(*pages)).ok())
          ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(kvd_->held_pages(), 0u);
  ClientStats stats = client->stats();
  EXPECT_LE(stats.pages_imported, 64u);  // never more imports than pages
  EXPECT_EQ(stats.pages_imported + stats.pages_reused, 8u * 50 * 4);
}

size_t OpenFds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

TEST_F(ClientTest, EveryFdIsClosedOrOwned) {
  size_t before = OpenFds();
  {
    auto client = Start(300);
    ASSERT_NE(client, nullptr);
    auto pages = client->Grant(0, 260);  // two datagrams of fds
    ASSERT_TRUE(pages.ok());
    ASSERT_OK(client->Return(0, testing::Ids(*pages)));
    kvd_->Recycle(0, (*pages)[0].id);
    ASSERT_TRUE(client->Grant(0, 260).ok());
    // A reply with more fds than pages: all of them must be closed.
    FakeKvd* kvd = kvd_.get();
    kvd->SetHook([kvd](const wire::Message& request) {
      if (!request.has_grant()) return false;
      wire::Message reply;
      reply.set_request_id(request.request_id());
      wire::PageGrant* g = reply.mutable_grant_reply()->add_pages();
      g->set_page_id(299);
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
  EXPECT_EQ(OpenFds(), before);
}

}  // namespace
}  // namespace nanokv
