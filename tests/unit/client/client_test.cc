// The engine side against the real kvd, run in-process (in_process_kvd.h):
// attach, the import cache (import once, reuse, recycled pages and forgets),
// multi-datagram grants, kvd's refusals, reclaim, kvd shutting down, detach,
// concurrency, fd ownership. After each step the test reads kvd's own state
// too. Faults the real kvd never sends are in client_faults_test.cc; KVTensor
// is in kv_tensor_test.cc.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/naming.h"
#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"
#include "tests/unit/client/in_process_kvd.h"

namespace nanokv {
namespace {

using ClientTest = testing::InProcessKvdTest;
using testing::Ids;
constexpr size_t kPage = testing::InProcessKvd::kPageBytes;

ClientOptions Tenant(const std::string& name, const std::string& group = "") {
  ClientOptions options;
  options.tenant = name;
  options.group = group;
  return options;
}

std::set<uint32_t> IdSet(const std::vector<GrantedPage>& pages) {
  std::vector<uint32_t> ids = Ids(pages);
  return {ids.begin(), ids.end()};
}

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
  const kvd::Tenant* tenant = FindTenant("test-engine");
  ASSERT_NE(tenant, nullptr);
  EXPECT_EQ(client->tenant_id(), tenant->id);
  EXPECT_EQ(client->tenant(), "test-engine");
  EXPECT_EQ(tenant->pid, getpid());
  EXPECT_EQ(tenant->uid, geteuid());
  EXPECT_EQ(tenant->group, "uid:" + std::to_string(geteuid())) << "no group named: its uid's own";
  EXPECT_EQ(client->page_bytes(), kPage);
  EXPECT_EQ(client->backend_name(), "host");
  EXPECT_EQ(client->segment_name(), kvd_->segment_name());
  // No limit asked: kvd's default, the node's capacity (both devices).
  EXPECT_EQ(client->limit_bytes(), 32 * kPage);
  EXPECT_EQ(tenant->limit_bytes, 32 * kPage);
  ASSERT_EQ(client->devices().size(), 2u);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(client->devices()[d].device, d);
    EXPECT_EQ(client->devices()[d].page_bytes, kPage);
    EXPECT_EQ(client->devices()[d].capacity_pages, 16u);
    EXPECT_EQ(UsedPages("test-engine", d), 0u);
  }
  EXPECT_TRUE(client->connected());

  // kvd may grant less than asked: a limit over its capacity is clamped.
  ClientOptions greedy = Tenant("greedy");
  greedy.limit_bytes = 100 * kPage;
  auto second = Attach(greedy);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)->limit_bytes(), 32 * kPage);
  EXPECT_NE((*second)->tenant_id(), client->tenant_id());
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(ClientTest, DefaultTenantNameIsProgramAndPid) {
  StartKvd({.pages_per_device = 4});
  ClientOptions options;
  options.ipc_name = kvd_->ipc_name();
  auto client = Client::Attach(options);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_NE((*client)->tenant().find("-" + std::to_string(getpid())), std::string::npos)
      << (*client)->tenant();
  const kvd::Tenant* tenant = FindTenant((*client)->tenant());
  ASSERT_NE(tenant, nullptr) << "kvd knows the tenant by another name";
  EXPECT_EQ(tenant->id, (*client)->tenant_id());
}

TEST_F(ClientTest, PageSizeMismatchIsInvalidArgument) {
  StartKvd({.pages_per_device = 4});
  ClientOptions options = Tenant("pager");
  options.expect_page_bytes = 4u << 20;
  auto client = Attach(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kInvalidArgument);
  EXPECT_NE(client.status().ToString().find("2097152"), std::string::npos);
  // kvd had attached the tenant (it answered); the client's closed socket
  // detaches it. Any snapshot published from now on shows the attach.
  EXPECT_TRUE(kvd_->WaitFor(
      [](const testing::KvdSnapshot& kvd) {
        return kvd.connections == 0 && kvd.FindTenant("pager") == nullptr;
      },
      kvd_->publishes()))
      << "kvd kept the refused engine's tenant";
  options.expect_page_bytes = kPage;
  auto again = Attach(options);  // the same name: kvd let go of it
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->page_bytes(), kPage);
}

TEST_F(ClientTest, GrantImportsOnceThenReusesTheHandle) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto first = client->Grant(0, 3);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 3u);
  EXPECT_EQ(IdSet(*first).size(), 3u);
  EXPECT_EQ(client->stats().pages_imported, 3u);  // one fd per page, each imported
  EXPECT_EQ(client->stats().cached_handles, 3u);
  EXPECT_EQ(UsedPages("test-engine"), 3u);
  EXPECT_EQ(FindTenant("test-engine")->imported[0].size(), 3u);

  ASSERT_OK(client->Return(0, Ids(*first)));
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  EXPECT_EQ(Counts().held_pages, 0u);
  EXPECT_EQ(Counts().group_free_pages, 3u);       // kept for the tenant's group
  EXPECT_EQ(client->stats().cached_handles, 3u);  // Return keeps the handles

  auto again = client->Grant(0, 3);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  std::vector<GrantedPage> sorted_first = *first, sorted_again = *again;
  auto by_id = [](const GrantedPage& a, const GrantedPage& b) { return a.id < b.id; };
  std::sort(sorted_first.begin(), sorted_first.end(), by_id);
  std::sort(sorted_again.begin(), sorted_again.end(), by_id);
  EXPECT_EQ(sorted_again, sorted_first);  // the group's own pages, same generations
  // No fd the second time: an fd would have been imported.
  EXPECT_EQ(client->stats().pages_imported, 3u);
  EXPECT_EQ(client->stats().pages_reused, 3u);
  EXPECT_EQ(client->stats().pages_released, 0u);
  EXPECT_EQ(FindTenant("test-engine")->imported[0].size(), 3u);
  EXPECT_TRUE(KvdInvariantsHold());
}

// kvd recycles a page into another group (a fresh physical page, generation
// + 1) and back: the old group's handle is dropped and the page imported anew.
TEST_F(ClientTest, NewGenerationReplacesTheHandle) {
  StartKvd({.pages_per_device = 8});
  auto a = Attach(Tenant("a"));
  auto b = Attach(Tenant("b", "other"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto first = (*a)->Grant(0, 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const GrantedPage page = (*first)[0];
  ASSERT_OK((*a)->Return(0, Ids(*first)));

  // b takes the whole device: 7 never-used pages, then a's free page, recycled.
  auto all = (*b)->Grant(0, 8);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  auto recycled = std::find_if(all->begin(), all->end(),
                               [&](const GrantedPage& p) { return p.id == page.id; });
  ASSERT_NE(recycled, all->end());
  EXPECT_EQ(recycled->generation, page.generation + 1);
  ASSERT_OK((*b)->Return(0, std::vector<uint32_t>{page.id}));

  // a's next grant can only be that page, recycled back into a's group.
  auto again = (*a)->Grant(0, 1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)[0].id, page.id);
  EXPECT_EQ((*again)[0].generation, page.generation + 2);
  ClientStats stats = (*a)->stats();
  EXPECT_EQ(stats.pages_imported, 2u);
  EXPECT_EQ(stats.pages_reused, 0u);
  EXPECT_EQ(stats.pages_released, 1u);  // the old generation's handle
  EXPECT_EQ(stats.cached_handles, 1u);
  EXPECT_EQ(FindTenant("a")->imported[0].at(page.id), page.generation + 2);

  // b was told to forget its generation too (ordered before this reply).
  std::vector<uint32_t> rest;
  for (const GrantedPage& p : *all) {
    if (p.id != page.id) rest.push_back(p.id);
  }
  ASSERT_OK((*b)->Return(0, rest));
  EXPECT_EQ((*b)->stats().pages_released, 1u);
  EXPECT_EQ((*b)->stats().cached_handles, 7u);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(ClientTest, ForgetReleasesTheHandle) {
  StartKvd({.pages_per_device = 8});
  auto a = Attach(Tenant("a"));
  auto b = Attach(Tenant("b", "other"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto first = (*a)->Grant(0, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_OK((*a)->Return(0, Ids(*first)));
  // 6 never-used pages and one of a's two, recycled: kvd tells a to forget it.
  auto taken = (*b)->Grant(0, 7);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  std::set<uint32_t> mine = IdSet(*first);
  std::vector<uint32_t> recycled, fresh;
  for (const GrantedPage& p : *taken) (mine.count(p.id) ? recycled : fresh).push_back(p.id);
  ASSERT_EQ(recycled.size(), 1u);
  // The forget is processed in order, before the reply to this request.
  ASSERT_TRUE((*a)->SetLimit(8 * kPage).ok());
  EXPECT_EQ((*a)->stats().cached_handles, 1u);
  EXPECT_EQ((*a)->stats().pages_released, 1u);
  EXPECT_EQ(FindTenant("a")->imported[0].count(recycled[0]), 0u);

  // a's kept page comes back with no import; b's returned page is recycled
  // into a's group and imported.
  ASSERT_OK((*b)->Return(0, std::vector<uint32_t>{fresh[0]}));
  auto again = (*a)->Grant(0, 2);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  std::set<uint32_t> expected = {fresh[0]};
  for (uint32_t id : mine) {
    if (id != recycled[0]) expected.insert(id);
  }
  EXPECT_EQ(IdSet(*again), expected);
  ClientStats stats = (*a)->stats();
  EXPECT_EQ(stats.pages_imported, 3u);
  EXPECT_EQ(stats.pages_reused, 1u);
  EXPECT_EQ(stats.pages_released, 1u);
  EXPECT_EQ(stats.cached_handles, 2u);
  ASSERT_TRUE((*b)->SetLimit(8 * kPage).ok());  // orders b's forget of fresh[0]
  EXPECT_EQ((*b)->stats().pages_released, 1u);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(ClientTest, LargeGrantComesInSeveralDatagrams) {
  auto client = Start(600);
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 520);  // 250 + 250 + 20 fds
  ASSERT_TRUE(pages.ok()) << pages.status().ToString();
  EXPECT_EQ(pages->size(), 520u);
  EXPECT_EQ(IdSet(*pages).size(), 520u);
  EXPECT_EQ(client->stats().pages_imported, 520u);
  EXPECT_EQ(UsedPages("test-engine"), 520u);
  EXPECT_EQ(Counts().held_pages, 520u);
  EXPECT_TRUE(KvdInvariantsHold());
  ASSERT_OK(client->Return(0, Ids(*pages)));
  EXPECT_EQ(Counts().held_pages, 0u);
}

TEST_F(ClientTest, KvdErrorKeepsItsCode) {
  auto client = Start(4);
  ASSERT_NE(client, nullptr);
  auto over_limit = client->Grant(0, 5);
  ASSERT_FALSE(over_limit.ok());
  EXPECT_EQ(over_limit.status().code(), Code::kResourceExhausted);
  EXPECT_NE(over_limit.status().ToString().find("limit"), std::string::npos)
      << over_limit.status().ToString();
  EXPECT_TRUE(client->connected());
  EXPECT_EQ(UsedPages("test-engine"), 0u);  // all or none
  ASSERT_TRUE(client->Grant(0, 4).ok());

  // Under its limit, but the device is full: the other refusal, same code.
  auto other = Attach(Tenant("other"));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  auto device_full = (*other)->Grant(0, 1);
  ASSERT_FALSE(device_full.ok());
  EXPECT_EQ(device_full.status().code(), Code::kResourceExhausted);
  EXPECT_NE(device_full.status().ToString().find("0 pages free of 4"), std::string::npos)
      << device_full.status().ToString();
  EXPECT_TRUE((*other)->connected());
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(ClientTest, LocalChecksNeverReachKvd) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  // kvd would answer these with other codes (kvd's decoder: kProtocolError;
  // an unserved device: kNotFound) and other words.
  auto none = client->Grant(0, 0);
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
  EXPECT_NE(none.status().ToString().find("in one request"), std::string::npos);
  auto too_many = client->Grant(0, 5000);
  EXPECT_EQ(too_many.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_many.status().ToString().find("in one request"), std::string::npos);
  EXPECT_EQ(client->Grant(3, 1).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(client->connected());
  const kvd::Tenant* tenant = FindTenant("test-engine");
  ASSERT_NE(tenant, nullptr);
  EXPECT_EQ(tenant->last_activity_unix_ns, tenant->attach_unix_ns);
}

TEST_F(ClientTest, ReclaimCallbackMayReturnPages) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 4);
  ASSERT_TRUE(pages.ok());
  std::vector<uint32_t> ids = Ids(*pages);
  std::atomic<int> calls{0};
  std::atomic<bool> returned_ok{false};
  client->OnReclaim([&](const ReclaimNotice& notice) {
    EXPECT_EQ(notice.device, -1);
    EXPECT_EQ(notice.pages, 2u);
    EXPECT_EQ(notice.limit_bytes, 2 * kPage);
    // Runs on the callback thread: a blocking request here must not deadlock.
    std::vector<uint32_t> give(ids.begin(), ids.begin() + notice.pages);
    returned_ok = client->Return(0, give).ok();
    ++calls;
  });
  // Below its use: kvd asks for the excess back.
  auto limit = client->SetLimit(2 * kPage);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_EQ(*limit, 2 * kPage);
  EXPECT_TRUE(testing::WaitUntil([&] { return calls > 0; }));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(returned_ok);
  EXPECT_EQ(client->pending_reclaim_pages(), 0u);
  EXPECT_EQ(client->limit_bytes(), 2 * kPage);
  // The callback's Return has been answered: kvd is idle.
  const kvd::Tenant* tenant = FindTenant("test-engine");
  ASSERT_NE(tenant, nullptr);
  EXPECT_EQ(tenant->used_pages[0], 2u);
  EXPECT_EQ(tenant->state, kvd::TenantState::kAttached);  // back under its limit
  EXPECT_EQ(tenant->limit_bytes, 2 * kPage);
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kResourceExhausted);
  EXPECT_TRUE(KvdInvariantsHold());
}

TEST_F(ClientTest, PendingReclaimForPollers) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto pages = client->Grant(0, 4);
  ASSERT_TRUE(pages.ok());
  // A SetLimit reply states the excess itself: 4 pages used, limit 1 page.
  auto limit = client->SetLimit(kPage);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_EQ(client->pending_reclaim_pages(), 3u);
  EXPECT_EQ(FindTenant("test-engine")->state, kvd::TenantState::kReclaiming);
  auto refused = client->Grant(0, 1);
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted);
  EXPECT_NE(refused.status().ToString().find("reclaim pending"), std::string::npos)
      << refused.status().ToString();

  // kvd's reclaim notice (3 pages) came before this reply; returns count down.
  std::vector<uint32_t> ids = Ids(*pages);
  ASSERT_OK(client->Return(0, std::vector<uint32_t>(ids.begin(), ids.begin() + 2)));
  EXPECT_EQ(client->pending_reclaim_pages(), 1u);
  EXPECT_EQ(FindTenant("test-engine")->state, kvd::TenantState::kReclaiming);
  limit = client->SetLimit(kPage);
  ASSERT_TRUE(limit.ok());
  EXPECT_EQ(client->pending_reclaim_pages(), 1u);
  limit = client->SetLimit(8 * kPage);
  ASSERT_TRUE(limit.ok());
  EXPECT_EQ(*limit, 8 * kPage);
  EXPECT_EQ(client->limit_bytes(), 8 * kPage);
  EXPECT_EQ(client->pending_reclaim_pages(), 0u);
  EXPECT_EQ(FindTenant("test-engine")->state, kvd::TenantState::kAttached);
  EXPECT_TRUE(client->Grant(0, 1).ok());
}

TEST_F(ClientTest, ShutdownNoticeKeepsMappedPagesValid) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  auto tensor = KVTensor::Create(*client, 0, 2 * kPage);
  ASSERT_TRUE(tensor.ok());
  ASSERT_OK((*tensor)->Grow(2));
  ASSERT_OK(client->FillDevice((*tensor)->data(), 0x5a, 2 * kPage));

  ASSERT_OK(kvd_->Stop());  // as on SIGTERM: the shutdown notice, then close
  EXPECT_TRUE(testing::WaitUntil([&] { return !client->connected(); }));
  EXPECT_FALSE(client->connected());
  auto grant = client->Grant(0, 1);
  EXPECT_EQ(grant.status().code(), Code::kUnavailable);
  EXPECT_NE(grant.status().ToString().find("kvd went away"), std::string::npos);
  EXPECT_NE(grant.status().ToString().find("kvd is stopping"), std::string::npos)
      << grant.status().ToString();
  // kvd took every page back and removed its socket.
  EXPECT_TRUE(kvd_->node().Tenants().empty());
  EXPECT_EQ(Counts().held_pages, 0u);
  EXPECT_NE(access(ipc::SocketPath(kvd_->ipc_name()).c_str(), F_OK), 0);

  std::vector<uint8_t> host(2 * kPage);
  ASSERT_OK(client->CopyToHost(host.data(), (*tensor)->data(), host.size()));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](uint8_t b) { return b == 0x5a; }));
  tensor->reset();  // teardown with kvd gone: logs, no error
}

TEST_F(ClientTest, DetachIsIdempotent) {
  auto client = Start();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Grant(0, 2).ok());
  uint64_t attached = kvd_->publishes();  // any later snapshot shows the connection
  ASSERT_OK(client->Detach());
  EXPECT_FALSE(client->connected());
  // Answered after kvd detached the tenant: its pages are back.
  EXPECT_EQ(FindTenant("test-engine"), nullptr);
  EXPECT_EQ(Counts().held_pages, 0u);
  ASSERT_OK(client->Detach());
  EXPECT_EQ(client->Grant(0, 1).status().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(kvd_->WaitFor(
      [](const testing::KvdSnapshot& kvd) { return kvd.connections == 0; }, attached))
      << "kvd never saw the socket closed";
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
        if (!pages.ok() || pages->size() != 4 || !client->Return(0, Ids(*pages)).ok())
          ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(UsedPages("test-engine"), 0u);
  EXPECT_EQ(Counts().held_pages, 0u);
  ClientStats stats = client->stats();
  EXPECT_EQ(stats.pages_imported + stats.pages_reused, 8u * 50 * 4);
  // Every page the group ever had was imported exactly once: returned pages
  // stay with the group and come back with no fd.
  EXPECT_EQ(stats.pages_imported, Counts().group_free_pages);
  EXPECT_LE(stats.pages_imported, 64u);
  EXPECT_EQ(stats.pages_released, 0u);
  EXPECT_TRUE(KvdInvariantsHold());
}

// kvd's fds and the client's: with both in this process, every fd either
// side opened is closed once both are gone, recycles and forgets included.
TEST_F(ClientTest, EveryFdIsClosedOrOwned) {
  size_t before = testing::OpenFds();
  StartKvd({.pages_per_device = 300});
  {
    auto a = Attach(Tenant("a"));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto pages = (*a)->Grant(0, 260);  // two datagrams of fds
    ASSERT_TRUE(pages.ok()) << pages.status().ToString();
    ASSERT_OK((*a)->Return(0, Ids(*pages)));
    {
      // Another group takes the 40 never-used pages and 5 of a's, recycled.
      auto b = Attach(Tenant("b", "other"));
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      ASSERT_TRUE((*b)->Grant(0, 45).ok());
    }  // b detaches: its pages stay with its group
    // a's 255 kept pages, and 5 of b's group recycled back.
    auto again = (*a)->Grant(0, 260);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ClientStats stats = (*a)->stats();
    EXPECT_EQ(stats.pages_imported, 265u);
    EXPECT_EQ(stats.pages_reused, 255u);
    EXPECT_EQ(stats.pages_released, 5u);
    EXPECT_EQ(stats.cached_handles, 260u);
  }
  ASSERT_OK(kvd_->Stop());
  EXPECT_TRUE(KvdInvariantsHold());
  kvd_.reset();
  EXPECT_EQ(testing::OpenFds(), before);
}

}  // namespace
}  // namespace nanokv
