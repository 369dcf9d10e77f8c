#include "tests/util/http_get.h"

#include <cmath>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace nanokv::testing {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

Result<HttpReply> HttpGet(const std::string& host, uint16_t port, const std::string& target,
                          std::chrono::milliseconds timeout, const std::string& method) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return Status::Unavailable("resolve " + host + ": " + ec.message());
  stream.expires_after(timeout);
  stream.connect(endpoints, ec);
  if (ec) return Status::Unavailable("connect " + host + ":" + std::to_string(port) + ": " + ec.message());
  http::request<http::string_body> request(http::string_to_verb(method), target, 11);
  request.set(http::field::host, host);
  request.keep_alive(false);
  stream.expires_after(timeout);
  http::write(stream, request, ec);
  if (ec) return Status::Unavailable("send: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  stream.expires_after(timeout);
  http::read(stream, buffer, parser, ec);
  if (ec) return Status::Unavailable("read: " + ec.message());
  HttpReply reply;
  reply.status = static_cast<int>(parser.get().result_int());
  reply.content_type = std::string(parser.get()[http::field::content_type]);
  reply.body = parser.get().body();
  return reply;
}

namespace {

// A label value: the text up to the closing quote, with \\, \" and \n undone.
bool ReadQuoted(const std::string& line, size_t* at, std::string* out) {
  for (size_t i = *at; i < line.size(); ++i) {
    char c = line[i];
    if (c == '"') {
      *at = i + 1;
      return true;
    }
    if (c == '\\' && i + 1 < line.size()) {
      char next = line[++i];
      *out += next == 'n' ? '\n' : next;
    } else {
      *out += c;
    }
  }
  return false;
}

}  // namespace

Result<std::vector<MetricSample>> ParseExposition(const std::string& text) {
  std::vector<MetricSample> samples;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&] { return Status::InvalidArgument("line " + std::to_string(number) + ": " + line); };
    MetricSample sample;
    size_t at = line.find_first_of("{ ");
    if (at == std::string::npos) return bad();
    sample.name = line.substr(0, at);
    if (line[at] == '{') {
      ++at;
      while (at < line.size() && line[at] != '}') {
        size_t eq = line.find("=\"", at);
        if (eq == std::string::npos) return bad();
        std::string name = line.substr(at, eq - at);
        at = eq + 2;
        std::string value;
        if (!ReadQuoted(line, &at, &value)) return bad();
        sample.labels[name] = value;
        if (at < line.size() && line[at] == ',') ++at;
      }
      if (at >= line.size()) return bad();
      ++at;  // '}'
    }
    std::string value = line.substr(at);
    value.erase(0, value.find_first_not_of(' '));
    try {
      sample.value = value == "+Inf" ? HUGE_VAL : value == "-Inf" ? -HUGE_VAL : std::stod(value);
    } catch (const std::exception&) {
      return bad();
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> FindSample(const std::vector<MetricSample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  std::optional<double> found;
  for (const MetricSample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) {
      auto it = s.labels.find(key);
      match &= it != s.labels.end() && it->second == value;
    }
    if (!match) continue;
    if (found) return std::nullopt;
    found = s.value;
  }
  return found;
}

}  // namespace nanokv::testing
