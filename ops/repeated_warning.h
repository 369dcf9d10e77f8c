// A warning logged once per entry of something another process wrote (a
// page journal's pages, an adopt's pages): the first few are logged, the
// rest only counted, and one line at the end says how many more there were.
// So a file of millions of bad entries costs a few lines of log, not
// millions (a journal of 4 million entries once made 4.2 million lines).
#ifndef NANOKV_OPS_REPEATED_WARNING_H_
#define NANOKV_OPS_REPEATED_WARNING_H_

#include <cstddef>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace nanokv::ops {

class RepeatedWarning {
 public:
  static constexpr size_t kShown = 5;

  // `what` names the warnings in the summary, which is logged when more
  // than `shown` came: "<what>: 12 more (only the first 5 were logged)".
  explicit RepeatedWarning(std::string what, size_t shown = kShown)
      : what_(std::move(what)), shown_(shown) {}
  RepeatedWarning(const RepeatedWarning&) = delete;
  RepeatedWarning& operator=(const RepeatedWarning&) = delete;
  ~RepeatedWarning() {
    if (count_ > shown_) {
      spdlog::warn("{}: {} more (only the first {} were logged)", what_, count_ - shown_, shown_);
    }
  }

  // Logs the warning if fewer than `shown` came before; counts it anyway.
  template <typename... Args>
  void Warn(spdlog::format_string_t<Args...> format, Args&&... args) {
    if (count_++ < shown_) spdlog::warn(format, std::forward<Args>(args)...);
  }

  size_t count() const { return count_; }

 private:
  std::string what_;
  size_t shown_;
  size_t count_ = 0;
};

}  // namespace nanokv::ops

#endif  // NANOKV_OPS_REPEATED_WARNING_H_
