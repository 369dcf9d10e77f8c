// `kvctl top` (also run as `kvtop`): a live full-screen view of one kvd, a
// bar per device and per tenant, redrawn every interval and on every key.
// Keys: q/Q quit, s next sort order, r or space refresh now, n/p (or Tab)
// next/previous kvd on the node. The terminal is restored on quit, on
// SIGINT/SIGTERM/SIGHUP and when the terminal goes away.
#ifndef NANOKV_KVCTL_TOP_H_
#define NANOKV_KVCTL_TOP_H_

#include <chrono>
#include <string>

#include "kvctl/figures.h"
#include "kvctl/table.h"
#include "nanokv/status.h"

namespace nanokv::kvctl {

struct TopOptions {
  std::string ipc_name;  // empty: $NANOKV_IPC_NAME, else the first live kvd
  std::chrono::milliseconds interval{1000};
  SortKey sort = SortKey::kUsed;
  ColourMode colour = ColourMode::kAuto;
  bool once = false;  // print one frame to stdout and return: no full screen, no keys
};

// kFailedPrecondition when stdin or stdout is not a terminal (and not once);
// with once, kNotFound if the named kvd does not exist.
Status RunTop(const TopOptions& options);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_TOP_H_
