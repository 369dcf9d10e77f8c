// Summarised log lines (daemon/transfer/event_tally.h).
#include "daemon/transfer/event_tally.h"

#include <utility>

namespace nanokv::kvd {

EventTally::EventTally(std::string prefix, std::chrono::seconds window)
    : prefix_(std::move(prefix)), window_(window) {}

void EventTally::Note(spdlog::level::level_enum level, const std::string& text, Clock::time_point now) {
  Flush(now);
  const std::string key = texts_.size() < kMaxTexts || texts_.contains(text) ? text : std::string("(other events)");
  auto [at, first] = texts_.try_emplace(key, Count{level});
  if (first) {
    spdlog::log(level, "{}{}", prefix_, key == text ? text : key + ": " + text);
  } else {
    ++at->second.more;
  }
}

void EventTally::Flush(Clock::time_point now, bool now_anyway) {
  if (!now_anyway && now - started_ < window_) return;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - started_).count();
  for (const auto& [text, count] : texts_) {
    if (count.more > 0) spdlog::log(count.level, "{}{} more in {} s: {}", prefix_, count.more, seconds, text);
  }
  texts_.clear();
  started_ = now;
}

}  // namespace nanokv::kvd
