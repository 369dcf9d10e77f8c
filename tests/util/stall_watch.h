// A deadline that only a stuck test meets. A test that loops until it has
// done some work reports its progress toward that goal; Stalled() turns true
// once the progress has not moved for `patience`. A slow or loaded machine
// only makes the test take longer: no assertion depends on how fast it went.
#ifndef NANOKV_TESTS_UTIL_STALL_WATCH_H_
#define NANOKV_TESTS_UTIL_STALL_WATCH_H_

#include <chrono>
#include <cstdint>

namespace nanokv::testing {

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StallWatch(Clock::duration patience) : patience_(patience), moved_at_(Clock::now()) {}

  // `progress`: a count that grows toward the goal and stops growing there
  // (cap each part at its target, so work past the goal is not progress).
  bool Stalled(uint64_t progress) {
    Clock::time_point now = Clock::now();
    if (progress != last_) {
      last_ = progress;
      moved_at_ = now;
      return false;
    }
    return now - moved_at_ >= patience_;
  }

 private:
  Clock::duration patience_;
  Clock::time_point moved_at_;
  uint64_t last_ = 0;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UTIL_STALL_WATCH_H_
