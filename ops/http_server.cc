#include "ops/http_server.h"

#include <atomic>
#include <list>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

namespace nanokv::ops {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

class MetricsSession;

class MetricsServer::Impl {
 public:
  Impl(MetricsServerOptions options, Render render)
      : options_(std::move(options)), render_(std::move(render)) {}

  Status Listen();
  void Run() {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  // Pending handlers (the accept, every session's read or write) are
  // destroyed with io_, which closes their sockets.
  void Stop() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  // What a request gets. On the server's thread.
  void Answer(const http::request<http::string_body>& request, http::response<http::string_body>* reply);

  const MetricsServerOptions options_;
  const Render render_;
  uint16_t port_ = 0;
  // Before io_: sessions destroyed with io_ still count themselves out.
  std::atomic<uint32_t> open_{0};
  std::atomic<uint64_t> scrapes_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> evicted_{0};
  // Sessions waiting for a request, the longest waiting first (each keeps
  // its place to leave it). On the server's thread only.
  std::list<std::weak_ptr<MetricsSession>> waiting_;

 private:
  void Accept();
  // Closes the session that has waited longest for a request; false if none waits.
  bool EvictLongestWaiting();

  net::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  net::steady_timer retry_{io_};  // after an accept error (out of fds): try again later, not in a spin
  std::thread thread_;
};

// One connection: read a request, answer, again while the client keeps it
// alive. Every read and write has the server's timeout; while it waits for
// a request it is in the server's waiting list, which may close it.
class MetricsSession : public std::enable_shared_from_this<MetricsSession> {
 public:
  MetricsSession(tcp::socket socket, MetricsServer::Impl& server)
      : stream_(std::move(socket)), server_(server) {
    server_.open_.fetch_add(1);
  }
  ~MetricsSession() {
    StopWaiting();
    server_.open_.fetch_sub(1);
  }

  // Closes the connection now, to let a newer one in: the pending read ends
  // (operation_aborted) and the session goes.
  void Evict() {
    StopWaiting();
    Close();
  }

  void Read() {
    waiting_ = server_.waiting_.insert(server_.waiting_.end(), weak_from_this());
    parser_.emplace();
    // A scrape is a GET with a few headers; anything larger is not one.
    parser_->header_limit(16 * 1024);
    parser_->body_limit(16 * 1024);
    stream_.expires_after(server_.options_.timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void StopWaiting() {
    if (waiting_) server_.waiting_.erase(*std::exchange(waiting_, std::nullopt));
  }

  void OnRead(beast::error_code ec) {
    StopWaiting();
    if (ec) return Close();  // closed, timed out, malformed, too large or evicted: nothing to answer
    const http::request<http::string_body>& request = parser_->get();
    reply_ = {};
    server_.Answer(request, &reply_);
    reply_.keep_alive(request.keep_alive());
    reply_.prepare_payload();
    stream_.expires_after(server_.options_.timeout);
    http::async_write(stream_, reply_,
                      [self = shared_from_this()](beast::error_code write_ec, size_t) { self->OnWrite(write_ec); });
  }

  void OnWrite(beast::error_code ec) {
    if (ec || !reply_.keep_alive()) return Close();
    Read();
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  MetricsServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> reply_;
  std::optional<std::list<std::weak_ptr<MetricsSession>>::iterator> waiting_;  // in server_.waiting_
};

Status MetricsServer::Impl::Listen() {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(options_.address, ec);
  if (ec) return Status::InvalidArgument("metrics address '" + options_.address + "' is not an IP address");
  const tcp::endpoint endpoint(address, options_.port);
  const std::string where = options_.address + " port " + std::to_string(options_.port);
  if (acceptor_.open(endpoint.protocol(), ec); ec) return Status::Unavailable("metrics: socket: " + ec.message());
  if (acceptor_.set_option(net::socket_base::reuse_address(true), ec); ec) {
    return Status::Unavailable("metrics: SO_REUSEADDR: " + ec.message());
  }
  if (acceptor_.bind(endpoint, ec); ec) return Status::Unavailable("metrics: bind " + where + ": " + ec.message());
  if (acceptor_.listen(net::socket_base::max_listen_connections, ec); ec) {
    return Status::Unavailable("metrics: listen on " + where + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint(ec).port();
  return Status::OK();
}

void MetricsServer::Impl::Accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // EMFILE and friends: the queued connection stays; try again soon.
      spdlog::warn("metrics: accept: {}; trying again in 100 ms", ec.message());
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    if (open_.load() >= options_.max_connections && !EvictLongestWaiting()) {
      refused_.fetch_add(1);
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<MetricsSession>(std::move(socket), *this)->Read();
    }
    Accept();
  });
}

bool MetricsServer::Impl::EvictLongestWaiting() {
  while (!waiting_.empty()) {
    std::shared_ptr<MetricsSession> session = waiting_.front().lock();
    if (session == nullptr) {  // going already
      waiting_.pop_front();
      continue;
    }
    // Its fd is closed now; the session itself goes when its read ends, so
    // the open count stays past the limit for that moment only.
    session->Evict();
    evicted_.fetch_add(1);
    return true;
  }
  return false;
}

void MetricsServer::Impl::Answer(const http::request<http::string_body>& request,
                                 http::response<http::string_body>* reply) {
  reply->version(request.version());
  reply->set(http::field::server, "nanokv");
  reply->set(http::field::content_type, "text/plain; charset=utf-8");
  std::string_view target(request.target().data(), request.target().size());
  target = target.substr(0, target.find('?'));
  if (request.method() != http::verb::get) {
    reply->result(http::status::method_not_allowed);
    reply->set(http::field::allow, "GET");
    reply->body() = "only GET is served here: GET /metrics\n";
  } else if (target == "/metrics") {
    try {
      reply->body() = render_();
      reply->result(http::status::ok);
      reply->set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      scrapes_.fetch_add(1);
    } catch (const std::exception& e) {
      reply->result(http::status::internal_server_error);
      reply->body() = std::string("rendering the metrics failed: ") + e.what() + "\n";
    }
  } else if (target == "/") {
    reply->result(http::status::ok);
    reply->body() = "nanokv: the metrics are at /metrics\n";
  } else {
    reply->result(http::status::not_found);
    reply->body() = "not found; the metrics are at /metrics\n";
  }
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsServerOptions& options,
                                                            Render render) {
  auto impl = std::make_unique<Impl>(options, std::move(render));
  NANOKV_RETURN_IF_ERROR(impl->Listen());
  impl->Run();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { impl_->Stop(); }

uint16_t MetricsServer::port() const { return impl_->port_; }

std::string MetricsServer::url() const {
  const std::string& address = impl_->options_.address;
  const bool v6 = address.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + address + "]" : address) + ":" + std::to_string(impl_->port_) + "/metrics";
}

uint64_t MetricsServer::scrapes() const { return impl_->scrapes_.load(); }

uint64_t MetricsServer::refused_connections() const { return impl_->refused_.load(); }

uint64_t MetricsServer::evicted_connections() const { return impl_->evicted_.load(); }

}  // namespace nanokv::ops
