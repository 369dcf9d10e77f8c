// What operators see of kvd (issue 21, item 9), against real kvd processes:
// --version, log lines on stderr and in a file as JSON, /metrics agreeing
// with the segment and with what the test did, promtool's check, a hung
// scraper that cannot stall kvd, systemd's readiness datagram.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <nlohmann/json.hpp>

#include "nanokv/kv_tensor.h"
#include "tests/integration/metrics_fixture.h"

namespace nanokv::testing {
namespace {

std::vector<nlohmann::json> JsonLines(const std::string& text, std::string* bad) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    try {
      lines.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      *bad += line + "\n";
    }
  }
  return lines;
}

bool Logged(const std::vector<nlohmann::json>& lines, const std::string& start) {
  for (const auto& line : lines) {
    if (line.contains("msg") && line["msg"].get<std::string>().starts_with(start)) return true;
  }
  return false;
}

class KvdOpsTest : public MetricsFixture {};

TEST_F(KvdOpsTest, VersionNamesTheCommitAndBackends) {
  for (const std::string& binary : {Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), KvctlBinary()}) {
    Ran run = Shell("exec " + Quote(binary) + " --version");
    EXPECT_EQ(run.code, 0) << run.err;
    const std::string program = binary.substr(binary.find_last_of('/') + 1);
    EXPECT_TRUE(run.out.starts_with(program + " " NANOKV_EXPECTED_VERSION " (commit ")) << run.out;
    EXPECT_NE(run.out.find("backends: host"), std::string::npos) << run.out;
    EXPECT_TRUE(run.err.empty()) << run.err;
    // Built from this checkout: the commit is its HEAD's.
    Ran head = Shell("git -C " + Quote(NANOKV_SOURCE_DIR) + " rev-parse --short=12 HEAD");
    if (head.code == 0 && !head.out.empty()) {
      EXPECT_NE(run.out.find("(commit " + head.out.substr(0, 12)), std::string::npos) << run.out << head.out;
    }
  }
}

// Every line kvd logs goes to stderr (stdout stays empty) and, with
// --log-file, to the file; with --log-format json each is one JSON object.
TEST_F(KvdOpsTest, JsonLogLinesOnStderrAndInTheFile) {
  const std::string file = dir_.path() + "/kvd.jsonl", err = dir_.path() + "/kvd.stderr";
  kvd_prefix_ = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>" + Quote(err)};  // kvd.log gets stdout alone
  StartKvd(32, {"--log-format", "json", "--log-file", file});
  auto client = AttachClient("logged");
  ASSERT_NE(client, nullptr);
  client.reset();
  StopKvd();
  EXPECT_EQ(kvd_.Log(), "") << "kvd wrote to stdout";
  for (const std::string& path : {file, err}) {
    std::string bad;
    std::vector<nlohmann::json> lines = JsonLines(ReadFile(path), &bad);
    EXPECT_EQ(bad, "") << path << ": lines that are not JSON";
    ASSERT_GE(lines.size(), 3u) << path;
    for (const auto& line : lines) {
      for (const char* key : {"ts", "level", "logger", "pid", "msg"}) EXPECT_TRUE(line.contains(key)) << line;
      EXPECT_EQ(line["logger"], "kvd");
      EXPECT_EQ(line["pid"], kvd_.pid());
    }
    EXPECT_TRUE(Logged(lines, "kvd 0.")) << path;  // the version line
    EXPECT_TRUE(Logged(lines, "kvd: ready")) << path;
    EXPECT_TRUE(Logged(lines, "kvd: stopped cleanly")) << path;
  }
}

TEST_F(KvdOpsTest, MetricsSayWhatTheSegmentAndTheRequestsSay) {
  StartKvdWithMetrics(32);
  auto a = AttachClient("a", "g1", 4 * kPage);
  auto b = AttachClient("b", "g2");
  ASSERT_TRUE(a && b);
  auto granted = a->Grant(0, 3);
  ASSERT_TRUE(granted.ok());
  EXPECT_EQ(a->Grant(0, 2).status().code(), Code::kResourceExhausted);  // over its 4-page limit
  ASSERT_TRUE(b->Grant(0, 2).ok());
  ASSERT_TRUE(a->Return(0, std::vector<uint32_t>{(*granted)[0].id}).ok());
  auto a2 = AttachClient("a2", "g1");  // a's group-mate shares one of its pages
  ASSERT_NE(a2, nullptr);
  ASSERT_TRUE(a2->Share(0, std::vector<uint32_t>{(*granted)[1].id}).ok());
  // An engine that dies holding 4 pages: kvd takes them back.
  Process dying = StartEngine("dying", {"--pages", "4", "--step", "4", "--rounds", "1", "--exit-holding", "3"});
  ASSERT_EQ(dying.Wait(30s).value_or(-1), 3) << dying.Log();

  // The pool refills its reserve in the background: compare once still.
  std::map<std::string, double> want, got;
  std::string body;
  bool agreed = WaitFor([&] {
    auto scraped = Scrape();
    if (!scraped.ok()) return false;
    body = *scraped;
    auto samples = ParseExposition(body);
    if (!samples.ok()) return false;
    got = ScrapedSeries(*samples);
    want = SegmentSeries(Read());
    // kvd learns of a closed connection (the start's readiness probe, the
    // dead engine's) when it next polls: await the three the test holds.
    return got == want && FindSample(*samples, "nanokv_engines_lost_total") == 1.0 &&
           FindSample(*samples, "nanokv_connections") == 3.0;
  }, 20s);
  ASSERT_TRUE(agreed) << body;
  EXPECT_EQ(want.at("nanokv_tenant_used_bytes{group=g1,tenant=a}"), 2.0 * kPage);
  EXPECT_EQ(want.at("nanokv_tenant_limit_bytes{group=g1,tenant=a}"), 4.0 * kPage);

  auto samples = ParseExposition(body);
  ASSERT_TRUE(samples.ok());
  auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels = {}) {
    return FindSample(*samples, name, labels).value_or(-1);
  };
  // What the test itself did: 3 grants (one refused) plus the engine's one,
  // 2 + 3 + 4 pages granted, 1 shared, 1 returned, 4 taken back from the
  // dead engine.
  EXPECT_EQ(value("nanokv_request_duration_seconds_count", {{"request", "grant"}}), 4);
  EXPECT_EQ(value("nanokv_request_duration_seconds_count", {{"request", "attach"}}), 4);
  EXPECT_EQ(value("nanokv_request_duration_seconds_count", {{"request", "share"}}), 1);
  EXPECT_EQ(value("nanokv_granted_pages_total", {{"device", "0"}, {"request", "share"}}), 1);
  EXPECT_EQ(value("nanokv_request_duration_seconds_count", {{"request", "return"}}), 1);
  EXPECT_EQ(value("nanokv_refusals_total", {{"request", "grant"}, {"code", "ResourceExhausted"}}), 1);
  EXPECT_EQ(value("nanokv_granted_pages_total", {{"device", "0"}, {"request", "grant"}}), 9);
  EXPECT_EQ(value("nanokv_returned_pages_total", {{"device", "0"}}), 1);
  EXPECT_EQ(value("nanokv_lost_engine_pages_total"), 4);
  EXPECT_EQ(value("nanokv_connections"), 3);  // a, a2 and b
  EXPECT_EQ(value("nanokv_segment_up"), 1);
  EXPECT_EQ(value("nanokv_kvd_info", {{"ipc_name", ipc_}, {"backend", Backend()}}), 1);

  // Prometheus's own linter agrees with the format and the names.
  Ran which = Shell("command -v promtool");
  if (which.code != 0) GTEST_SKIP() << "promtool not installed (Debian's prometheus package): format not linted";
  { std::ofstream(dir_.path() + "/metrics.txt") << body; }
  Ran lint = Shell("promtool check metrics < " + Quote(dir_.path() + "/metrics.txt"));
  EXPECT_EQ(lint.code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "") << "promtool found problems";
}

// Scrapers that connect and never send, or ask and never read, hold only
// their own connections: kvd keeps serving engines, publishing its segment,
// and answering another scrape.
TEST_F(KvdOpsTest, AHungScraperDoesNotStallKvd) {
  StartKvdWithMetrics(32);
  std::vector<int> hung;
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 8; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(metrics_port_);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    if (i % 2 == 1) {  // asks, and never reads
      ASSERT_GT(send(fd, request.data(), request.size(), MSG_NOSIGNAL), 0);
    }
    hung.push_back(fd);
  }
  const uint64_t publishes = Read().segment.header.publish_count;
  std::vector<Process> engines;
  for (int i = 0; i < 3; ++i) {
    engines.push_back(StartEngine("served" + std::to_string(i),
                                  {"--pages", "6", "--step", "2", "--rounds", "5", "--quiet"}));
  }
  for (auto& e : engines) {
    auto code = e.Wait(120s);
    ASSERT_TRUE(code.has_value()) << "an engine was not served:\n" << e.Log() << kvd_.Log();
    EXPECT_EQ(*code, 0) << e.Log();
  }
  EXPECT_GT(Read().segment.header.publish_count, publishes);
  auto scrape = Scrape();
  EXPECT_TRUE(scrape.ok()) << scrape.status().ToString();
  EXPECT_EQ(Kvctl({"list"}).code, 0);
  for (int fd : hung) close(fd);
  ExpectLedger(PageLedger{});
}

TEST_F(KvdOpsTest, TellsSystemdWhenReadyAndWhenStopping) {
  const std::string path = dir_.path() + "/notify";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  StartKvd(8);
  unsetenv("NOTIFY_SOCKET");
  char got[512] = {};
  timeval wait{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  ssize_t n = recv(fd, got, sizeof(got) - 1, 0);
  ASSERT_GT(n, 0) << kvd_.Log();
  EXPECT_EQ(std::string(got, n), "READY=1\nSTATUS=serving " + SocketPath());
  StopKvd();
  n = recv(fd, got, sizeof(got) - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(got, n), "STOPPING=1");
  close(fd);
}

// A port already taken stops kvd at start, before it made anything.
TEST_F(KvdOpsTest, AMetricsPortInUseIsAnErrorAtStart) {
  StartKvdWithMetrics(8);
  const std::string ipc = ipc_ + "_second";
  Process second = Process::Start({Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(),
                                   "--ipc-name", ipc, "--capacity", std::to_string(8 * kPage),
                                   "--host-device-memory", std::to_string(32 * kPage), "--metrics-port",
                                   std::to_string(metrics_port_)},
                                  {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/second.log");
  auto code = second.Wait(20s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(second.Log().find("metrics: bind 127.0.0.1 port " + std::to_string(metrics_port_)), std::string::npos)
      << second.Log();
  EXPECT_EQ(ipc::ReadSegment(ipc).status().code(), Code::kNotFound);  // nothing left behind
}

}  // namespace
}  // namespace nanokv::testing
