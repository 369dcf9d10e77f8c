// Issue 19 item 8 against a real kvd: an engine that keeps its page fds after
// kvd recycled those pages to another group keeps their memory alive. kvd
// counts such pages (held after recycle) against the device's capacity until
// the holder says it dropped them (forget_done) or its connection is gone,
// publishes them, and refuses what would go past the capacity. A libkv
// client says so on its own, and nothing stays charged.
#include <unistd.h>

#include <string>
#include <vector>

#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kPages = 16;

// A raw engine on kvd's socket that keeps every fd it is sent and answers no
// forget notice unless told to: the hostile holder.
class KeeperPeer {
 public:
  explicit KeeperPeer(const std::string& socket) {
    auto channel = ipc::Channel::Connect(socket);
    EXPECT_TRUE(channel.ok()) << channel.status().ToString();
    if (channel.ok()) channel_ = std::move(channel).value();
  }
  ~KeeperPeer() { Close(); }

  // Its process "dies": every fd it kept, and its connection, are closed.
  void Close() {
    for (int fd : fds_) close(fd);
    fds_.clear();
    channel_ = ipc::Channel();
  }

  void Send(wire::Message m) {
    m.set_request_id(++request_id_);
    ASSERT_TRUE(channel_.Send(wire::Encode(std::move(m))).ok());
  }

  // The next message; forget notices are collected on the way.
  wire::Message Next() {
    for (;;) {
      std::vector<std::byte> data;
      std::vector<int> fds;
      auto got = channel_.Receive(&data, &fds);
      fds_.insert(fds_.end(), fds.begin(), fds.end());  // kept, never closed
      wire::Message m;
      if (!got.ok() || *got != ipc::Channel::Received::kMessage) return m;
      EXPECT_TRUE(wire::Decode(data, &m).ok());
      if (m.has_forget()) {
        forgotten_.insert(forgotten_.end(), m.forget().page_ids().begin(),
                          m.forget().page_ids().end());
        continue;
      }
      return m;
    }
  }

  void Attach(const std::string& tenant, const std::string& group) {
    wire::Message m;
    m.mutable_attach()->set_tenant(tenant);
    m.mutable_attach()->set_group(group);
    Send(m);
    wire::Message reply = Next();
    ASSERT_TRUE(reply.has_attach_reply()) << reply.DebugString();
  }

  // Grants `pages` and returns them all: kvd keeps them for its group, and
  // it keeps their fds.
  void GrantAndReturn(uint32_t pages) {
    wire::Message m;
    m.mutable_grant()->set_device(0);
    m.mutable_grant()->set_pages(pages);
    Send(m);
    std::vector<uint32_t> ids;
    for (;;) {
      wire::Message reply = Next();
      ASSERT_TRUE(reply.has_grant_reply()) << reply.DebugString();
      for (const auto& p : reply.grant_reply().pages()) ids.push_back(p.page_id());
      if (!reply.grant_reply().more()) break;
    }
    ASSERT_EQ(ids.size(), pages);
    wire::Message back;
    back.mutable_return_pages()->set_device(0);
    for (uint32_t id : ids) back.mutable_return_pages()->add_page_ids(id);
    Send(back);
    ASSERT_TRUE(Next().has_return_reply());
  }

  // Says it dropped `ids` (it did not, but kvd has its word), then waits for
  // a reply to a request after it, so kvd has read it.
  void ForgetDone(const std::vector<uint32_t>& ids) {
    wire::Message m;
    m.mutable_forget_done()->set_device(0);
    for (uint32_t id : ids) m.mutable_forget_done()->add_page_ids(id);
    Send(m);
    wire::Message limit;
    limit.mutable_set_limit()->set_limit_bytes(0);
    Send(limit);
    ASSERT_TRUE(Next().has_set_limit_reply());
  }

  // Reads what kvd sent without asking anything.
  void DrainNotices() {
    ASSERT_TRUE(channel_.SetNonBlocking(true).ok());
    for (;;) {
      std::vector<std::byte> data;
      std::vector<int> fds;
      auto got = channel_.Receive(&data, &fds);
      fds_.insert(fds_.end(), fds.begin(), fds.end());
      if (!got.ok() || *got != ipc::Channel::Received::kMessage) break;
      wire::Message m;
      ASSERT_TRUE(wire::Decode(data, &m).ok());
      ASSERT_TRUE(m.has_forget()) << m.DebugString();
      forgotten_.insert(forgotten_.end(), m.forget().page_ids().begin(), m.forget().page_ids().end());
    }
    ASSERT_TRUE(channel_.SetNonBlocking(false).ok());
  }

  const std::vector<uint32_t>& forgotten() const { return forgotten_; }
  size_t kept_fds() const { return fds_.size(); }

 private:
  ipc::Channel channel_;
  uint64_t request_id_ = 0;
  std::vector<int> fds_;
  std::vector<uint32_t> forgotten_;
};

class KvdRecycleTest : public KvdFixture {
 protected:
  // Device 0's pages: created + held after recycle, never over the capacity.
  ipc::DeviceRow Device() {
    ipc::DeviceRow row = Read().segment.devices[0];
    EXPECT_LE(row.created_pages + row.held_after_recycle_pages, row.capacity_pages)
        << "created " << row.created_pages << " + held after recycle "
        << row.held_after_recycle_pages;
    return row;
  }

  // Waits until kvd publishes `pages` held after recycle on device 0.
  void ExpectHeldAfterRecycle(uint32_t pages) {
    bool seen = WaitFor([&] { return Device().held_after_recycle_pages == pages; }, 5s);
    EXPECT_TRUE(seen) << "kvd publishes " << Device().held_after_recycle_pages
                      << " pages held after recycle, expected " << pages;
  }
};

// The reproduction: grants that recycle pages away from an engine
// that keeps its fds, three rounds. kvd never makes a page past its capacity
// (where the issue saw /dev/shm grow 208 MiB against 128 MiB), refuses the
// grant that would need one with kResourceExhausted naming the cause, does
// not recycle more for a grant asked again, and the room comes back when the
// holder says it dropped the pages and when it is gone.
TEST_F(KvdRecycleTest, AnEngineKeepingFdsNeverTakesTheDevicePastItsCapacity) {
  StartKvd(kPages);
  KeeperPeer keeper(SocketPath());
  keeper.Attach("keeper", "g1");
  keeper.GrantAndReturn(kPages);
  ASSERT_EQ(keeper.kept_fds(), kPages);

  ClientOptions options = Options("taker", "g2");
  options.request_timeout_ms = 300;  // how long its grant waits for forget answers
  auto taker = Client::Attach(options);
  ASSERT_TRUE(taker.ok()) << taker.status().ToString();
  for (int round = 1; round <= 3; ++round) {
    auto refused = (*taker)->Grant(0, 4);
    ASSERT_FALSE(refused.ok()) << "round " << round << ": granted past the capacity";
    EXPECT_EQ(refused.status().code(), Code::kResourceExhausted) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("held after recycle"), std::string::npos)
        << refused.status().ToString();
    ExpectHeldAfterRecycle(4);
    EXPECT_EQ(Device().created_pages, kPages - 4);
  }
  keeper.DrainNotices();
  ASSERT_EQ(keeper.forgotten().size(), 4u) << "each recycled page is named to its holder once";
  EXPECT_TRUE(kvd_.Running());

  // Its word for the four: four fresh pages may be made.
  keeper.ForgetDone(keeper.forgotten());
  ExpectHeldAfterRecycle(0);
  auto four = (*taker)->Grant(0, 4);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_TRUE(WaitFor([&] { return Device().created_pages == kPages; }, 5s));

  // Four more of its pages recycled away, and kept again.
  EXPECT_EQ((*taker)->Grant(0, 4).status().code(), Code::kResourceExhausted);
  ExpectHeldAfterRecycle(4);
  EXPECT_EQ(Device().created_pages, kPages - 4);

  // Gone: their room comes back, and its other pages are recycled freely.
  keeper.Close();
  ExpectHeldAfterRecycle(0);
  auto rest = (*taker)->Grant(0, kPages - 4);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  PageLedger ledger;
  ledger.Attach("taker", "g2");
  ledger.Hold("taker", 0, *four);
  ledger.Hold("taker", 0, *rest);
  ExpectLedger(ledger);  // waits for kvd's publish
  ipc::DeviceRow row = Device();
  EXPECT_EQ(row.granted_pages, kPages);
  EXPECT_EQ(row.created_pages, kPages);
}

// A libkv engine drops a page kvd recycles away and says so on its own: the
// other group's grant, refused until then, is served once it has, and
// nothing stays charged.
TEST_F(KvdRecycleTest, ALibkvEngineAnswersItsForgetsAndNothingStaysCharged) {
  StartKvd(kPages);
  auto first = AttachClient("first", "g1");
  auto second = AttachClient("second", "g2");
  ASSERT_TRUE(first && second);
  auto all = first->Grant(0, kPages);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<uint32_t> ids;
  for (const GrantedPage& p : *all) ids.push_back(p.id);
  ASSERT_TRUE(first->Return(0, ids).ok());

  auto taken = second->Grant(0, kPages);  // every one of first's, recycled
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  for (const GrantedPage& p : *taken) EXPECT_GE(p.generation, 1u);
  EXPECT_EQ(first->stats().pages_released, kPages) << "first dropped every old page";
  EXPECT_EQ(first->stats().cached_handles, 0u);
  ExpectHeldAfterRecycle(0);
  PageLedger ledger;
  ledger.Attach("first", "g1");
  ledger.Attach("second", "g2");
  ledger.Hold("second", 0, *taken);
  ExpectLedger(ledger);
  EXPECT_EQ(Device().created_pages, kPages);
}

}  // namespace
}  // namespace nanokv::testing
