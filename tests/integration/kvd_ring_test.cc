// The shared-memory request rings against a real kvd (issue 15 item 2): a
// raw client is served through its ring (the socket stays silent), a
// client scribbling random bytes over its ring, or doing anything to its
// doorbell, hurts only itself while others are served, and ring clients
// ride through kvd being killed and restarted with no wrong byte.
#include <fcntl.h>
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

  // Rings unless the doorbell takes no more now (a client that made its
  // end blocking would block here: kvd does not owe it a drain).
  void Ring() {
    pollfd room{doorbell, POLLOUT, 0};
    if (poll(&room, 1, 0) != 1 || (room.revents & POLLOUT) == 0) return;
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

// One request on a connection of its own, by the socket, as kvctl sends it.
Result<wire::Message> AskBySocket(const std::string& path, wire::Message ask) {
  NANOKV_ASSIGN_OR_RETURN(ipc::Channel socket, ipc::Channel::Connect(path));
  ipc::ChannelTransport transport(socket);
  ipc::CallOptions call;
  call.timeout = 10s;
  NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply, ipc::Call(transport, 1, ask, {}, call));
  return reply.message;
}

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

// The finding: every ring's client got the same doorbell eventfd; one that
// cleared O_NONBLOCK on it (one open file for all) and read it took kvd's
// wake-up and left kvd's thread blocked in read(2) for good: no socket
// client and no operator was answered again. Now the client holds only its
// own end of its own doorbell: its reads get no bell, and kvd serves everyone.
TEST_F(KvdRingTest, AClientReadingItsDoorbellBlockingHangsOnlyItself) {
  StartWithStore();
  auto engine = AttachClient("engine");
  ASSERT_NE(engine, nullptr);
  RawRingClient thief;
  ASSERT_OK(thief.Setup(SocketPath()));
  const int flags = fcntl(thief.doorbell, F_GETFL);
  ASSERT_GE(flags, 0);
  ASSERT_EQ(fcntl(thief.doorbell, F_SETFL, flags & ~O_NONBLOCK), 0);
  // The thief, in a loop: requests on its socket (kvd handles them between
  // its epoll_wait and its read of the bell, in the same turn), a bell, a
  // pause of varying length, then a read of the doorbell when it is
  // readable: sooner or later inside that window, where a shared eventfd
  // left kvd's read blocked.
  int stolen = 0;
  bool hung = false;
  for (int i = 0; i < 300 && !hung; ++i) {
    constexpr int kBusy = 8;
    for (int r = 0; r < kBusy; ++r) {
      wire::Message busy;
      busy.set_request_id(1000 + r);
      busy.mutable_object_info();
      (void)thief.socket.Send(wire::Encode(busy), {});
    }
    thief.Ring();
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(10 * (i % 30));
    while (std::chrono::steady_clock::now() < until) {
    }
    pollfd readable{thief.doorbell, POLLIN, 0};
    uint64_t value = 0;
    if (poll(&readable, 1, 0) == 1 && (readable.revents & POLLIN) != 0 &&
        read(thief.doorbell, &value, sizeof(value)) > 0) {
      ++stolen;
    }
    std::vector<std::byte> answer;  // every answer, read before the next round
    std::vector<int> no_fds;
    for (int r = 0; r < kBusy && !hung; ++r) {
      hung = !thief.SocketReadable(5000ms);
      if (hung) break;
      auto got = thief.socket.Receive(&answer, &no_fds);
      ASSERT_TRUE(got.ok() && *got == ipc::Channel::Received::kMessage)
          << (got.ok() ? "closed" : got.status().ToString()) << "\n" << kvd_.Log();
    }
  }
  EXPECT_FALSE(hung) << "kvd stopped answering the thief's socket";
  EXPECT_EQ(stolen, 0) << "the client read bells meant for kvd";
  // Another ring client, a socket client and an operator are answered.
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Put("after-the-thief", ObjectPattern(5000, 3)));
  wire::Message info;
  info.mutable_object_info();
  auto answered = AskBySocket(SocketPath(), info);
  ASSERT_TRUE(answered.ok()) << answered.status().ToString();
  EXPECT_TRUE(answered->has_object_info_reply()) << wire::BodyName(*answered);
  wire::Message limit;
  limit.mutable_set_limit()->set_tenant("engine");
  limit.mutable_set_limit()->set_limit_bytes(4u << 20);
  auto limited = AskBySocket(SocketPath(), limit);
  ASSERT_TRUE(limited.ok()) << limited.status().ToString();
  ASSERT_TRUE(limited->has_set_limit_reply()) << wire::BodyName(*limited);
  EXPECT_EQ(limited->set_limit_reply().limit_bytes(), 4u << 20);
  // The thief's own ring still works: kvd drains its own end.
  wire::Message own;
  own.set_request_id(9);
  own.mutable_object_info();
  ASSERT_OK(thief.Send(own));
  auto reply = thief.Receive();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->request_id(), 9u);
  EXPECT_TRUE(kvd_.Running());
}

// A client ringing its doorbell in a loop with nothing in its ring: kvd
// stops listening to that doorbell (and says so) until its ring holds a
// request, which it still serves; others are served throughout.
TEST_F(KvdRingTest, ADoorbellRungForNothingIsMuted) {
  StartWithStore();
  RawRingClient spammer;
  ASSERT_OK(spammer.Setup(SocketPath()));
  const std::string muted = "rang its ring's doorbell 16 times in a row with nothing in its ring";
  // Each bell with kvd asleep, so kvd wakes for each; once muted, the bells
  // queue at kvd's end until Ring finds no room and skips them.
  int bells = 0;
  EXPECT_TRUE(WaitFor([&] {
    if (bells < 400) {
      spammer.Ring();
      ++bells;
    }
    std::this_thread::sleep_for(2ms);
    return kvd_.Log().find(muted) != std::string::npos;
  }, 20s)) << bells << " bells\n" << kvd_.Log();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Put("beside-the-spammer", ObjectPattern(3000, 5)));
  for (uint64_t id = 2; id < 5; ++id) {  // served though muted, and then heard again
    wire::Message ask;
    ask.set_request_id(id);
    ask.mutable_object_info();
    ASSERT_OK(spammer.Send(ask));
    auto reply = spammer.Receive();
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->request_id(), id);
  }
  EXPECT_TRUE(kvd_.Running());
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
