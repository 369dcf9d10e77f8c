// kvd's `groups:` key: which uids and gids may join each tenant group
// (groups share pages' bytes, so who may join one is the operator's). A
// group is bound to identities here, never to what an engine says: an
// engine that names no group gets one of its own uid ("uid:<uid>"), and a
// group it names must list its uid or primary gid.
#ifndef NANOKV_DAEMON_CONFIG_GROUP_CONFIG_H_
#define NANOKV_DAEMON_CONFIG_GROUP_CONFIG_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "base/yaml_field.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct GroupAccess {
  std::vector<uid_t> uids;
  std::vector<gid_t> gids;  // a peer whose primary gid is listed (SO_PEERCRED)
};
using GroupAccessMap = std::map<std::string, GroupAccess>;

// The prefix of the group an engine that names none gets: "uid:1001".
inline constexpr char kUidGroupPrefix[] = "uid:";
inline std::string UidGroup(uid_t uid) { return kUidGroupPrefix + std::to_string(uid); }

// Reads `groups:` (a mapping of group name -> {uids: [...], gids: [...]},
// names or numbers) into *out. Errors "<file>:<line>: groups.<name>.<key>: <what>";
// a name reserved for per-uid groups ("uid:...") or not 1-63 of
// [A-Za-z0-9_.:@-] is refused.
Status ParseGroupAccess(const YamlField& field, GroupAccessMap* out);

// A user or group by name or number, as every key of kvd's config reads them.
Result<uid_t> ReadUserId(const YamlField& field);
Result<gid_t> ReadGroupId(const YamlField& field);

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONFIG_GROUP_CONFIG_H_
