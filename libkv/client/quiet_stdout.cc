#include "libkv/client/quiet_stdout.h"

#include <memory>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace nanokv::client {
namespace {

// spdlog's own default logger: one sink, a colour (or plain) stdout sink.
bool IsSpdlogsStdoutDefault(const spdlog::logger& logger) {
  const auto& sinks = logger.sinks();
  if (sinks.size() != 1) return false;
  const spdlog::sinks::sink* sink = sinks.front().get();
  return dynamic_cast<const spdlog::sinks::stdout_color_sink_mt*>(sink) != nullptr ||
         dynamic_cast<const spdlog::sinks::stdout_color_sink_st*>(sink) != nullptr ||
         dynamic_cast<const spdlog::sinks::stdout_sink_mt*>(sink) != nullptr ||
         dynamic_cast<const spdlog::sinks::stdout_sink_st*>(sink) != nullptr;
}

}  // namespace

void KeepLogsOffStdout() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<spdlog::logger> current = spdlog::default_logger();
  if (current == nullptr || !IsSpdlogsStdoutDefault(*current)) return;
  auto quiet = std::make_shared<spdlog::logger>(
      current->name(), std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  quiet->set_level(current->level());
  quiet->flush_on(current->flush_level());
  spdlog::set_default_logger(std::move(quiet));
}

}  // namespace nanokv::client
