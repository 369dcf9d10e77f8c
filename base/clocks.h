// Two clocks in nanoseconds: Unix time for what the segment and journal
// record (attach, grant times), steady time for the object store (deadlines,
// lease ends and last_access are never Unix time, which can jump).
#ifndef NANOKV_BASE_CLOCKS_H_
#define NANOKV_BASE_CLOCKS_H_

#include <chrono>
#include <cstdint>

namespace nanokv {

inline uint64_t NowUnixNs() {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
}

inline uint64_t SteadyNowNs() {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count());
}

}  // namespace nanokv

#endif  // NANOKV_BASE_CLOCKS_H_
