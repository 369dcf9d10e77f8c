// The soft RLIMIT_NOFILE raised to the hard limit. kvd keeps an fd per page it
// creates and engines one per page they map (the page cache keeps the fd a
// page came in, for kvd restarts): 40 GiB of 2 MiB pages is 20,000 fds, far
// past the usual soft default of 1024.
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
