// What tests need of HTTP: a blocking GET (Boost.Beast, HTTP/1.1, one
// connection per call) and a reader of Prometheus's text format into
// samples, to compare a scrape with what kvd published.
#ifndef NANOKV_TESTS_UTIL_HTTP_GET_H_
#define NANOKV_TESTS_UTIL_HTTP_GET_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::testing {

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
};

// GET http://<host>:<port><target>. kUnavailable when the connection, the
// send or the read fails or takes longer than `timeout`.
Result<HttpReply> HttpGet(const std::string& host, uint16_t port, const std::string& target,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10),
                          const std::string& method = "GET");

// One sample line of an exposition.
struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Every sample line of `text` (comments skipped); kInvalidArgument naming
// the line that is not one.
Result<std::vector<MetricSample>> ParseExposition(const std::string& text);

// The value of the one sample named `name` whose labels include `labels`;
// nullopt when none or several match.
std::optional<double> FindSample(const std::vector<MetricSample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& labels = {});

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UTIL_HTTP_GET_H_
