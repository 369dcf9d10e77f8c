#include "ops/logging.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace nanokv::ops {
namespace {

// "2026-11-24T10:00:00.123456Z": UTC, microseconds, what log stores parse.
std::string IsoTime(spdlog::log_clock::time_point when) {
  const auto since = when.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since);
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(since - seconds);
  const std::time_t t = seconds.count();
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[40];
  size_t n = std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof(text) - n, ".%06lldZ", static_cast<long long>(micros.count()));
  return text;
}

// One JSON object per line. nlohmann's dump escapes control characters and
// replaces bytes that are not UTF-8 (a path, a peer's name) with U+FFFD, so
// every line parses whatever a message holds.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    nlohmann::ordered_json line = {
        {"ts", IsoTime(msg.time)},
        {"level", std::string(level.data(), level.size())},
        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"pid", static_cast<int64_t>(getpid())},
        {"tid", static_cast<uint64_t>(msg.thread_id)},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

}  // namespace

Result<LogFormat> ParseLogFormat(std::string_view text) {
  if (text == "text") return LogFormat::kText;
  if (text == "json") return LogFormat::kJson;
  return Status::InvalidArgument("'" + std::string(text) + "' is not one of text, json");
}

Status SetUpLogging(const LogOptions& options) {
  const spdlog::level::level_enum level = spdlog::level::from_str(options.level);
  if (level == spdlog::level::off && options.level != "off") {
    return Status::InvalidArgument("log level '" + options.level +
                                   "' is not one of trace, debug, info, warn, error, critical, off");
  }
  std::vector<spdlog::sink_ptr> sinks;
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  if (!options.file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file, /*truncate=*/false));
    } catch (const spdlog::spdlog_ex& e) {
      return Status(Code::kIOError, "log_file " + options.file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>(options.program, sinks.begin(), sinks.end());
  if (options.format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    // spdlog's default line with the program named: "[...] [kvd] [info] ..."
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %v");
  }
  logger->set_level(level);
  // Every line reaches the file at once: kvd logs little, and a line held
  // in a buffer is lost to a kill -9 and invisible to `tail -f`.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return Status::OK();
}

}  // namespace nanokv::ops
