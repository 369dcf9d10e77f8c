// What a SIGHUP reload changes (docs/OPERATIONS.md, "Reload"): kvd reads its
// config again and compares it with the one it runs. Some keys apply live
// (log_level, default_limit, instances: added, removed, changed; an
// instance's limit alone changes its tenant's limit without a restart), the
// rest need a restart: kvd keeps running on the old value and says so.
#ifndef NANOKV_DAEMON_CONFIG_CONFIG_DIFF_H_
#define NANOKV_DAEMON_CONFIG_CONFIG_DIFF_H_

#include <string>
#include <vector>

#include "daemon/config/config.h"

namespace nanokv::kvd {

struct ConfigDiff {
  bool log_level = false;      // next.log_level applies
  bool default_limit = false;  // next.default_limit applies
  std::vector<std::string> added;      // instance names, in next's order
  std::vector<std::string> removed;    // in running's order
  std::vector<std::string> restarted;  // changed beyond their limit: stopped, started with next's
  std::vector<std::string> limit_only; // only `limit` changed: set live on the tenant of that name
  // Keys whose change needs a restart ("page_size", "object_store", ...).
  std::vector<std::string> needs_restart;
  // One line per change, for the log ("log_level: info -> debug").
  std::vector<std::string> lines;

  bool instances_changed() const {
    return !added.empty() || !removed.empty() || !restarted.empty() || !limit_only.empty();
  }
  bool empty() const { return lines.empty(); }
};

ConfigDiff Diff(const KvdConfig& running, const KvdConfig& next);

// Whether two instances differ in anything but `limit` (and `where`, the
// line of its entry, which moves when others are added above it).
bool SameButLimit(const InstanceConfig& a, const InstanceConfig& b);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_CONFIG_DIFF_H_
