// Who a client takes for kvd. A socket or a /dev/shm segment is kvd's only if
// the process behind it (SO_PEERCRED) or the file's owner is a uid the client
// trusts: root, the client's own uid, or one named in $NANOKV_KVD_UID (for a
// kvd that runs as another, unprivileged user). Anyone may create a file in
// /dev/shm or listen on a socket, so a name alone proves nothing
// (docs/ARCHITECTURE.md, "Security").
#ifndef NANOKV_BASE_KVD_IDENTITY_H_
#define NANOKV_BASE_KVD_IDENTITY_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv {

// "NANOKV_KVD_UID": uids or user names, separated by commas.
inline constexpr const char* kKvdUidVariable = "NANOKV_KVD_UID";

// Root, this process's effective uid, and $NANOKV_KVD_UID's. kInvalidArgument
// naming the variable for an entry that is neither a number nor a user.
Result<std::vector<uid_t>> TrustedKvdUids();

// Whether `uid` is one of TrustedKvdUids() (false if the variable is malformed:
// nothing is trusted on a typo but root and ourselves).
bool IsTrustedKvdUid(uid_t uid);

// "root, uid 1000 (alice)" plus ", or NANOKV_KVD_UID" when unset: who counts
// as kvd, for a refusal's message.
std::string TrustedKvdUidsText();

// "uid 1001 (bob)", or "uid 1001" when the user has no name.
std::string DescribeUid(uid_t uid);
// "gid 1001 (bob)", or "gid 1001".
std::string DescribeGid(gid_t gid);

}  // namespace nanokv

#endif  // NANOKV_BASE_KVD_IDENTITY_H_
