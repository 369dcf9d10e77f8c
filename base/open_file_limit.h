// The soft RLIMIT_NOFILE raised to the hard limit, for kvd: it keeps an fd per
// host page (a memfd) and per connection, far past the usual soft default of
// 1024 on a big node. Engines keep no fd per page and do not raise it.
#ifndef NANOKV_BASE_OPEN_FILE_LIMIT_H_
#define NANOKV_BASE_OPEN_FILE_LIMIT_H_

#include <cstdint>

namespace nanokv {

struct OpenFileLimit {
  uint64_t before = 0;
  uint64_t after = 0;  // == before when it was at the hard limit already or could not be raised
};

// Never lowers the limit.
OpenFileLimit RaiseOpenFileLimit();

}  // namespace nanokv

#endif  // NANOKV_BASE_OPEN_FILE_LIMIT_H_
