// `kvctl watch`: `list`, `tenants` and `instances` (when a kvd runs any)
// again and again, like watch(1). With an IPC name, that kvd's row, its
// tenants and instances; without, every kvd's. On a terminal each refresh
// replaces the last; otherwise frames follow one another (with --json, one
// JSON document per line).
#ifndef NANOKV_KVCTL_WATCH_H_
#define NANOKV_KVCTL_WATCH_H_

#include <chrono>
#include <string>

#include "kvctl/figures.h"
#include "kvctl/table.h"
#include "nanokv/status.h"

namespace nanokv::kvctl {

struct WatchOptions {
  std::string ipc_name;  // empty: every kvd
  std::chrono::milliseconds interval{2000};
  int count = 0;  // frames to show; 0: until interrupted
  bool json = false;
  ColourMode colour = ColourMode::kAuto;
  SortKey sort = SortKey::kName;
};

// Runs until `count` frames or SIGINT/SIGTERM (then OK). The first frame's
// error, if any (e.g. kNotFound for a named kvd), ends it.
Status RunWatch(const WatchOptions& options);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_WATCH_H_
