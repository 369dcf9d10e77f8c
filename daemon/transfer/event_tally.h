// Log lines for what a peer can make happen at will (endpoints ended,
// connections refused, hellos refused), summarised: the first line of each
// text in a window is logged at once, the rest counted and logged as one
// line a text when the window ends. A flood of thousands of endpoints costs
// a few lines, not one each.
#ifndef NANOKV_DAEMON_TRANSFER_EVENT_TALLY_H_
#define NANOKV_DAEMON_TRANSFER_EVENT_TALLY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::kvd {

class EventTally {
 public:
  using Clock = std::chrono::steady_clock;
  // Distinct texts a window keeps apart; later ones are counted as one.
  static constexpr size_t kMaxTexts = 16;

  // Every line starts with `prefix`.
  explicit EventTally(std::string prefix, std::chrono::seconds window = std::chrono::seconds(10));
  void Note(spdlog::level::level_enum level, const std::string& text, Clock::time_point now = Clock::now());
  // Logs the counts once the window is over (all of them with `now_anyway`)
  // and starts the next.
  void Flush(Clock::time_point now, bool now_anyway = false);

 private:
  struct Count {
    spdlog::level::level_enum level;
    uint64_t more = 0;  // since its first line
  };
  const std::string prefix_;
  const std::chrono::seconds window_;
  Clock::time_point started_ = Clock::now();
  std::map<std::string, Count> texts_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_TRANSFER_EVENT_TALLY_H_
