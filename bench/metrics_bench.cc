// What /metrics costs kvd's request path, against the same kvd without it,
// in the same run.
//
//   round trip: Grant(1 page) + Return(that page) from an engine, per pair,
//               against three kvds started side by side: metrics off, on
//               and never scraped, on and scraped every 10 ms (100x a
//               usual scrape rate) by a thread of this process. Rounds go
//               through the three in turn, so drift hits each alike.
//   hooks:      kvd's server-side work per request in-process: a
//               RequestTimer (two clock reads, a histogram observation)
//               and a page counter, against the same loop with metrics
//               off (null: no clock read).
//
// It starts its own kvds (--kvd, default: next to this binary, else
// ../daemon/kvd) and prints one JSON object.
//
//   metrics_bench [--pairs 2000] [--rounds 10]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "daemon/server/kvd_metrics.h"
#include "ipc/proto/nanokv.pb.h"
#include "nanokv/client.h"

namespace nanokv {
namespace {

using bench::NowMicros;

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "metrics_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Die("a free port", Status::FromErrno("bind", errno));
  }
  close(fd);
  return ntohs(address.sin_port);
}

// GETs /metrics every `gap` until `stop`; counts the scrapes that answered.
void Scrape(uint16_t port, std::chrono::milliseconds gap, const std::atomic<bool>& stop, std::atomic<long long>* done) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  while (!stop.load()) {
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    beast::error_code ec;
    stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), port), ec);
    if (!ec) {
      http::request<http::empty_body> request(http::verb::get, "/metrics", 11);
      request.set(http::field::host, "127.0.0.1");
      http::write(stream, request, ec);
      beast::flat_buffer buffer;
      http::response<http::string_body> reply;
      if (!ec) http::read(stream, buffer, reply, ec);
      if (!ec && reply.result() == http::status::ok) done->fetch_add(1);
    }
    std::this_thread::sleep_for(gap);
  }
}

struct Setup {
  const char* name;
  std::unique_ptr<bench::BenchKvd> kvd;
  std::unique_ptr<Client> client;
  std::vector<double> pairs;  // µs per grant + return
};

// kvd's per-request metrics work, in ns, with `metrics` or without (null).
double HookNanos(kvd::KvdMetrics* metrics, long long requests) {
  const double start = NowMicros();
  for (long long i = 0; i < requests; ++i) {
    kvd::RequestTimer timed(metrics);
    timed.SetKind(wire::Message::kGrant);
    if (metrics != nullptr) metrics->PagesGranted(0, 1);
  }
  return (NowMicros() - start) * 1000.0 / static_cast<double>(requests);
}

}  // namespace

int Main(int argc, char** argv) {
  bench::LogToStderr("metrics_bench");
  std::string kvd_path = bench::DefaultKvd(argv[0]);
  long long pairs = 2000;
  int rounds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kvd")) kvd_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--pairs")) pairs = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
  }
  const std::vector<std::string> common = {"--backend", "host", "--capacity", "64MiB", "--host-device-memory",
                                           "256MiB", "--reserve-pages", "8", "--log-level", "warn"};
  const uint16_t scraped_port = FreePort();
  std::vector<Setup> setups;
  setups.push_back({"metrics_off", nullptr, nullptr, {}});
  setups.push_back({"metrics_on", nullptr, nullptr, {}});
  setups.push_back({"metrics_on_scraped_100hz", nullptr, nullptr, {}});
  for (size_t s = 0; s < setups.size(); ++s) {
    std::vector<std::string> args = common;
    if (s == 1) args.insert(args.end(), {"--metrics-port", "0"});
    if (s == 2) args.insert(args.end(), {"--metrics-port", std::to_string(scraped_port)});
    setups[s].kvd = std::make_unique<bench::BenchKvd>(kvd_path, std::string("mbench") + std::to_string(s), "", args);
    ClientOptions options;
    options.ipc_name = setups[s].kvd->ipc_name();
    options.tenant = "bench";
    auto client = bench::BenchKvd::Retry([&] { return Client::Attach(options); });
    if (!client.ok()) Die("attach", client.status());
    setups[s].client = std::move(client).value();
  }
  std::atomic<bool> stop{false};
  std::atomic<long long> scrapes{0};
  std::thread scraper(Scrape, scraped_port, std::chrono::milliseconds(10), std::cref(stop), &scrapes);

  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up and is dropped
    for (Setup& setup : setups) {
      for (long long i = 0; i < pairs; ++i) {
        const double t = NowMicros();
        auto granted = setup.client->Grant(0, 1);
        if (!granted.ok()) Die("grant", granted.status());
        Status returned = setup.client->Return(0, std::vector<uint32_t>{(*granted)[0].id});
        if (!returned.ok()) Die("return", returned);
        if (round > 0) setup.pairs.push_back(NowMicros() - t);
      }
    }
  }
  stop = true;
  scraper.join();

  ops::Registry registry;
  kvd::KvdMetrics metrics(registry, "bench", {0}, false);
  const long long hook_requests = 5'000'000;
  HookNanos(&metrics, hook_requests / 10);  // warm
  const double hook_on = HookNanos(&metrics, hook_requests);
  const double hook_off = HookNanos(nullptr, hook_requests);

  bench::JsonObject out;
  out.Add("bench", "metrics").Add("backend", "host").Add("pairs_per_round", pairs).Add("rounds", static_cast<long long>(rounds));
  for (const Setup& setup : setups) {
    double mean = 0;
    for (double v : setup.pairs) mean += v;
    bench::JsonObject pair;
    pair.Add("p50_us", bench::Quantile(setup.pairs, 0.5))
        .Add("p99_us", bench::Quantile(setup.pairs, 0.99))
        .Add("mean_us", mean / static_cast<double>(setup.pairs.size()));
    out.Add(std::string("grant_return_") + setup.name, pair);
  }
  out.Add("scrapes_answered", scrapes.load());
  bench::JsonObject hooks;
  hooks.Add("metrics_on_ns", hook_on).Add("metrics_off_ns", hook_off).Add("requests", hook_requests);
  out.Add("server_hooks_per_request", hooks);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
