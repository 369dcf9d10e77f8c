#include "base/open_file_limit.h"

#include <sys/resource.h>

namespace nanokv {

OpenFileLimit RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
  OpenFileLimit out{limit.rlim_cur, limit.rlim_cur};
  if (limit.rlim_cur >= limit.rlim_max) return out;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) == 0) out.after = limit.rlim_cur;
  return out;
}

}  // namespace nanokv
