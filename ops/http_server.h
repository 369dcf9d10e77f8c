// The HTTP endpoint a Prometheus server scrapes: GET /metrics answers what
// `render` returns (text format 0.0.4), GET / a line pointing there, anything
// else 404 or 405. Boost.Beast on a thread of its own, asynchronous, so a
// scraper that connects and never sends, or never reads, holds one
// connection until `timeout` and nothing else: not the other scrapers, and
// never the daemon, whose threads the server does not touch (render reads
// atomics and published snapshots only; ops/metrics.h). Connections that
// wait for a request (idle, or sending one slowly) never keep a scrape
// out: past `max_connections` a new one closes the one that has waited
// longest.
#ifndef NANOKV_OPS_HTTP_SERVER_H_
#define NANOKV_OPS_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "nanokv/status.h"

namespace nanokv::ops {

struct MetricsServerOptions {
  std::string address = "127.0.0.1";  // an IPv4 or IPv6 address to bind ("0.0.0.0": every interface)
  uint16_t port = 0;                   // 0: a free port the kernel picks (port() says which)
  // Connections open at once, so scrapers cannot take the daemon's file
  // descriptors. Past it a new one closes the connection that has waited
  // longest for a request (idle, or sending one slowly); only when every
  // open one is being answered is the new one closed at once.
  uint32_t max_connections = 16;
  // A request must arrive, and its reply be taken, within this; then the
  // connection is closed. Idle keep-alive connections get it too.
  std::chrono::milliseconds timeout{10'000};
};

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // Binds and listens now (a bad address or a port in use is an error here,
  // at the daemon's start), then serves on its own thread until destroyed.
  //   kInvalidArgument  not an IP address
  //   kUnavailable      bind or listen failed ("address already in use")
  // `render` runs on the server's thread, once per scrape.
  static Result<std::unique_ptr<MetricsServer>> Start(const MetricsServerOptions& options, Render render);

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops accepting, closes every connection, joins the thread.
  ~MetricsServer();

  uint16_t port() const;
  // "http://127.0.0.1:9464/metrics" (IPv6 in brackets).
  std::string url() const;
  uint64_t scrapes() const;             // /metrics answers sent
  uint64_t refused_connections() const;  // closed at once: max_connections were being answered
  uint64_t evicted_connections() const;  // waiting for a request, closed to let a newer one in

  class Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_HTTP_SERVER_H_
