// The shared-memory request rings against a real kvd (issue 15 item 2): a
// raw client is served through its ring (the socket stays silent), a
// client scribbling random bytes over its ring hurts only itself while
// another is served, and ring clients ride through kvd being killed and
// restarted with no wrong byte.
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ipc/ring/request_ring.h"
#include "ipc/rpc/call.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/wire/codec.h"
#include "nanokv/object_store.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

// A client of kvd's socket that asks for a ring and talks through it by hand.
struct RawRingClient {
  ipc::Channel socket;
  ipc::RequestRing ring;
  int memfd = -1;  // kept, to map the ring a second time and scribble
  int doorbell = -1;
  ~RawRingClient() {
    if (memfd >= 0) close(memfd);
    if (doorbell >= 0) close(doorbell);
  }

  Status Setup(const std::string& path) {
    NANOKV_ASSIGN_OR_RETURN(socket, ipc::Channel::Connect(path));
    ipc::ChannelTransport transport(socket);
    ipc::CallOptions call;
    call.timeout = 10s;
    call.reply_fds = ipc::ReplyFds::kKeep;
    wire::Message ask;
    ask.mutable_ring_setup();
    NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply, ipc::Call(transport, 1, ask, {}, call));
    if (reply.fds.size() != 2) return Status::Internal("ring_setup: not two fds");
    memfd = reply.fds[0];
    doorbell = reply.fds[1];
    NANOKV_ASSIGN_OR_RETURN(ring, ipc::RequestRing::Attach(memfd));
    return Status::OK();
  }

  void Ring() {
    const uint64_t one = 1;
    ssize_t wrote = write(doorbell, &one, sizeof(one));
    (void)wrote;
  }

  Status Send(wire::Message m) {
    NANOKV_RETURN_IF_ERROR(ring.Push(wire::Encode(std::move(m))));
    if (ring.PeerAsleep()) Ring();
    return Status::OK();
  }

  Result<wire::Message> Receive() {
    std::vector<std::byte> bytes;
    for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
      NANOKV_ASSIGN_OR_RETURN(bool popped, ring.Pop(&bytes));
      if (popped) {
        wire::Message m;
        NANOKV_RETURN_IF_ERROR(wire::Decode(bytes, &m));
        return m;
      }
      ring.WaitIncoming(100ms);
    }
    return Status::Unavailable("no reply on the ring");
  }

  bool SocketReadable(std::chrono::milliseconds wait) {
    pollfd p{socket.fd(), POLLIN, 0};
    return poll(&p, 1, static_cast<int>(wait.count())) > 0;
  }
};

class KvdRingTest : public KvdFixture {
 protected:
  void StartWithStore() { StartKvd(32, {"--config", WriteConfig(kTestStoreYaml)}); }
};

TEST_F(KvdRingTest, ARawClientIsServedThroughItsRing) {
  StartWithStore();
  RawRingClient raw;
  ASSERT_OK(raw.Setup(SocketPath()));
  for (uint64_t id = 2; id < 50; ++id) {
    wire::Message ask;
    ask.set_request_id(id);
    ask.mutable_object_info();
    ASSERT_OK(raw.Send(ask));
    auto reply = raw.Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->request_id(), id);
    EXPECT_TRUE(reply->has_object_info_reply()) << wire::BodyName(*reply);
  }
  // An error comes back the same way; the socket said nothing throughout.
  wire::Message bad;
  bad.set_request_id(77);
  bad.mutable_object_locate()->set_key("");
  ASSERT_OK(raw.Send(bad));
  auto refused = raw.Receive();
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  EXPECT_TRUE(refused->has_error());
  EXPECT_FALSE(raw.SocketReadable(0ms));
  // A second ring on the connection is refused (by the socket).
  wire::Message again;
  again.set_request_id(78);
  again.mutable_ring_setup();
  ASSERT_OK(raw.Send(again));
  auto twice = raw.Receive();
  ASSERT_TRUE(twice.ok());
  ASSERT_TRUE(twice->has_error());
  EXPECT_NE(twice->error().message().find("has a ring already"), std::string::npos);
}

TEST_F(KvdRingTest, AScribblerHurtsOnlyItself) {
  StartWithStore();
  RawRingClient scribbler;
  ASSERT_OK(scribbler.Setup(SocketPath()));
  void* mem = mmap(nullptr, ipc::kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, scribbler.memfd, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto store = OpenStore();  // through its own ring
  ASSERT_NE(store, nullptr);

  std::atomic<bool> stop{false};
  std::thread scribble([&] {
    std::mt19937_64 rng(7);
    auto* words = static_cast<uint64_t*>(mem);
    const size_t data_word = ipc::kRingHeaderBytes / 8;
    while (!stop) {
      // Requests, then random words over the indices and the entries.
      wire::Message info;
      info.set_request_id(rng() % 1000 + 1);
      info.mutable_object_info();
      (void)scribbler.ring.Push(wire::Encode(info));
      for (int i = 0; i < 4; ++i) {
        const size_t at = rng() % 2 == 0 ? rng() % 64 : data_word + rng() % 512;
        words[at] = rng() % 2 == 0 ? rng() : rng() % (2 * ipc::kRingDataBytes);
      }
      scribbler.Ring();
      std::this_thread::sleep_for(100us);
    }
  });
  for (int i = 0; i < 200; ++i) {
    const std::string key = "served:" + std::to_string(i);
    const auto bytes = ObjectPattern(1000 + 37 * i, static_cast<uint8_t>(i));
    ASSERT_OK(store->Put(key, bytes));
    auto got = store->Get(key);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(*got, bytes);
    ASSERT_OK(store->Remove(key));
  }
  stop = true;
  scribble.join();
  munmap(mem, ipc::kRingFileBytes);
  EXPECT_TRUE(kvd_.Running());
  // kvd found the scribbled ring impossible and closed that connection.
  EXPECT_TRUE(WaitFor([&] {
    std::vector<std::byte> data;
    std::vector<int> fds;
    if (!scribbler.SocketReadable(100ms)) return false;
    auto r = scribbler.socket.Receive(&data, &fds);
    for (int fd : fds) close(fd);
    return !r.ok() || *r == ipc::Channel::Received::kClosed;
  }, 10s)) << kvd_.Log();
  EXPECT_NE(kvd_.Log().find("request ring"), std::string::npos) << kvd_.Log();
}

TEST_F(KvdRingTest, RingClientsRideThroughKvdRestarts) {
  StartWithStore();
  constexpr int kClients = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::atomic<int>> served_after(kClients);
  std::atomic<int> restarts{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      std::unique_ptr<ObjectStore> store;
      for (int n = 0; !stop; ++n) {
        if (store == nullptr) {
          auto opened = TryOpenStore(5000);
          if (!opened.ok()) {
            std::this_thread::sleep_for(20ms);
            continue;
          }
          store = std::move(*opened);
        }
        const int life = restarts.load();
        const std::string key = "c" + std::to_string(t) + ":" + std::to_string(n);
        const auto bytes = ObjectPattern(4096 + 13 * n, static_cast<uint8_t>(t * 31 + n));
        Status put = store->Put(key, bytes);
        auto got = put.ok() ? store->Get(key) : Result<std::vector<std::byte>>(put);
        if (got.ok()) {
          if (*got != bytes) ++wrong;
          if (life == restarts.load() && life == 3) ++served_after[t];
          (void)store->Remove(key);
        } else if (got.status().code() == Code::kUnavailable) {
          store.reset();  // kvd went away: open again
        }
      }
    });
  }
  for (int r = 0; r < 3; ++r) {
    std::this_thread::sleep_for(300ms);
    kvd_.Signal(SIGKILL);
    ASSERT_TRUE(kvd_.Wait(10s).has_value());
    StartWithStore();
    ++restarts;
  }
  EXPECT_TRUE(WaitFor([&] {
    for (auto& n : served_after) if (n.load() < 5) return false;
    return true;
  }, 30s)) << "every client is served through the last kvd";
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(wrong.load(), 0) << "a get returned other bytes than its put";
}

}  // namespace
}  // namespace nanokv::testing
