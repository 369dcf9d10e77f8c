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
bool ClosedByPeer(int fd) {
  char bytes[64 << 10];
  timeval wait{0, 200'000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  for (;;) {
    ssize_t n = recv(fd, bytes, sizeof(bytes), 0);
    if (n > 0) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
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
    EXPECT_TRUE(WaitFor([&] { return ClosedByPeer(fd); }, 20s)) << "a hung scraper was never closed";
    close(fd);
  }
}

// Past max_connections a new connection is closed at once; once the open
// ones go, scrapes are served again.
TEST(MetricsServerTest, ConnectionsPastTheLimitAreClosed) {
  MetricsServerOptions options;
  options.max_connections = 3;
  options.timeout = 60s;
  auto server = MetricsServer::Start(options, [] { return std::string("t_up 1\n"); });
  ASSERT_TRUE(server.ok());
  const uint16_t port = (*server)->port();
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(ConnectRaw(port));
  ASSERT_TRUE(WaitFor([&] {
    int fd = ConnectRaw(port);
    bool closed = fd >= 0 && ClosedByPeer(fd);
    if (fd >= 0) close(fd);
    return closed;
  }, 10s));
  EXPECT_GE((*server)->refused_connections(), 1u);
  for (int fd : held) close(fd);
  EXPECT_TRUE(WaitFor([&] { return HttpGet("127.0.0.1", port, "/metrics", 1s).ok(); }, 10s));
}

}  // namespace
}  // namespace nanokv::ops
