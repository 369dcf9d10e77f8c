// ops/http_server.h: /metrics over HTTP on its own thread; a scraper that
// hangs holds only its own connection, and the server's limits hold.
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include <gtest/gtest.h>

#include "ops/http_server.h"
#include "tests/integration/process_util.h"
#include "tests/util/http_get.h"

namespace nanokv::ops {
namespace {

using namespace std::chrono_literals;
using testing::HttpGet;
using testing::WaitFor;

// A TCP connection to 127.0.0.1:port that sends what it is given and never reads.
int ConnectRaw(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd`: past what it sent (drained here), a read
// returns 0 (or fails) instead of blocking.
// Whether the server closes `fd` within `within` (what it sent before is
// read and dropped). A sanitizer build on a busy machine closed one after
// more than the 200 ms this once waited.
bool ClosedByPeer(int fd, std::chrono::milliseconds within = 5s) {
  char bytes[64 << 10];
  timeval wait{0, 200'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    ssize_t n = recv(fd, bytes, sizeof(bytes), 0);
    if (n > 0) continue;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

TEST(MetricsServerTest, ServesMetricsAndRefusesTheRest) {
  std::atomic<int> renders{0};
  auto server = MetricsServer::Start({}, [&] {
    ++renders;
    return std::string("# HELP t_up Up.\n# TYPE t_up gauge\nt_up 1\n");
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ((*server)->url(), "http://127.0.0.1:" + std::to_string(port) + "/metrics");

  auto metrics = HttpGet("127.0.0.1", port, "/metrics?x=1");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics->body, "# HELP t_up Up.\n# TYPE t_up gauge\nt_up 1\n");
  EXPECT_EQ(renders.load(), 1);
  EXPECT_EQ((*server)->scrapes(), 1u);

  auto other = HttpGet("127.0.0.1", port, "/nothing");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 404);
  auto post = HttpGet("127.0.0.1", port, "/metrics", 5s, "POST");
  ASSERT_TRUE(post.ok());
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(renders.load(), 1);  // neither rendered anything
}

TEST(MetricsServerTest, BadAddressAndBusyPortAreErrorsAtStart) {
  MetricsServerOptions bad;
  bad.address = "localhost:80";
  auto refused = MetricsServer::Start(bad, [] { return std::string(); });
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << refused.status().ToString();

  auto first = MetricsServer::Start({}, [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  MetricsServerOptions same;
  same.port = (*first)->port();
  auto second = MetricsServer::Start(same, [] { return std::string(); });
  EXPECT_EQ(second.status().code(), Code::kUnavailable);
  EXPECT_NE(second.status().ToString().find("port " + std::to_string(same.port)), std::string::npos)
      << second.status().ToString();
}

// Scrapers that connect and never send, or send and never read, hold their
// own connections only: another scrape is answered meanwhile, and each hung
// one is closed once its timeout passes.
TEST(MetricsServerTest, HungScrapersDoNotStallOthers) {
  MetricsServerOptions options;
  options.timeout = 300ms;
  auto server = MetricsServer::Start(options, [] { return std::string(64 << 10, '#') + "\n"; });
  ASSERT_TRUE(server.ok());
  const uint16_t port = (*server)->port();
  std::vector<int> hung;
  for (int i = 0; i < 4; ++i) hung.push_back(ConnectRaw(port));  // silent
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 4; ++i) {  // ask, never read
    int fd = ConnectRaw(port);
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    hung.push_back(fd);
  }
  for (int fd : hung) ASSERT_GE(fd, 0);
  auto scrape = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status().ToString();
  EXPECT_EQ(scrape->status, 200);
  for (int fd : hung) {
    EXPECT_TRUE(WaitFor([&] { return ClosedByPeer(fd, 200ms); }, 20s)) << "a hung scraper was never closed";
    close(fd);
  }
}

// The finding: 16 idle connections (the default max_connections) refused
// every scrape (27 of 27). A connection waiting for a request, idle or
// sending one slowly, gives way: past the limit a new one closes the one
// that has waited longest, and the scrape is answered.
TEST(MetricsServerTest, IdleAndSlowConnectionsDoNotKeepAScrapeOut) {
  MetricsServerOptions options;  // max_connections 16
  options.timeout = 60s;         // none of them times out in this test
  auto server = MetricsServer::Start(options, [] { return std::string("t_up 1\n"); });
  ASSERT_TRUE(server.ok());
  const uint16_t port = (*server)->port();
  std::vector<int> held;
  for (uint32_t i = 0; i < options.max_connections; ++i) {
    held.push_back(ConnectRaw(port));
    ASSERT_GE(held.back(), 0);
    if (i % 2 == 1) {  // every other one starts a request and never ends it
      const std::string part = "GET /metrics HTTP/1.1\r\nHo";
      ASSERT_EQ(send(held.back(), part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
    }
  }
  // The server accepts in the order connections came: all 16 before the scrapes.
  for (int i = 0; i < 5; ++i) {
    auto scrape = HttpGet("127.0.0.1", port, "/metrics", 5s);
    ASSERT_TRUE(scrape.ok()) << "scrape " << i << ": " << scrape.status().ToString();
    EXPECT_EQ(scrape->status, 200);
    EXPECT_EQ(scrape->body, "t_up 1\n");
  }
  EXPECT_EQ((*server)->refused_connections(), 0u);
  // The first scrape made room; the rest came as each before it left.
  EXPECT_GE((*server)->evicted_connections(), 1u);
  EXPECT_TRUE(ClosedByPeer(held.front())) << "the longest waiting was closed first";
  EXPECT_FALSE(ClosedByPeer(held.back(), 200ms)) << "the latest to come still waits";
  for (int fd : held) close(fd);
}

// Only when every open connection is being answered (here: asked for a
// reply larger than the socket buffers and never reading it) is a new one
// closed at once; once those go, scrapes are served again.
TEST(MetricsServerTest, ConnectionsPastTheLimitAllBeingAnsweredAreClosed) {
  MetricsServerOptions options;
  options.max_connections = 2;
  options.timeout = 60s;
  std::atomic<int> renders{0};
  auto server = MetricsServer::Start(options, [&] {
    ++renders;
    return std::string(32u << 20, '#');
  });
  ASSERT_TRUE(server.ok());
  const uint16_t port = (*server)->port();
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  std::vector<int> held;
  for (uint32_t i = 0; i < options.max_connections; ++i) {
    held.push_back(ConnectRaw(port));
    ASSERT_GE(held.back(), 0);
    ASSERT_EQ(send(held.back(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  }
  ASSERT_TRUE(WaitFor([&] { return renders.load() == 2; }, 10s)) << "both requests are being answered";
  int fd = ConnectRaw(port);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_TRUE(WaitFor([&] { return (*server)->refused_connections() >= 1; }, 10s));
  EXPECT_EQ((*server)->evicted_connections(), 0u);
  for (int held_fd : held) close(held_fd);
  EXPECT_TRUE(WaitFor([&] { return HttpGet("127.0.0.1", port, "/metrics", 5s).ok(); }, 20s));
}

}  // namespace
}  // namespace nanokv::ops
