// Finding kvd's socket and making sure kvd is who answers there: engines
// (libkv), the object store's client and kvctl all connect through here.
//
// Where: $NANOKV_RUN_DIR/<ipc>.sock when the variable is set (it overrides),
// else the path kvd published in its segment (whatever its run_dir), else
// <default run dir>/<ipc>.sock (base/naming.h).
// Who: a socket is only a name in a directory; the process listening on it
// must be root or a uid trusted as kvd's (base/kvd_identity.h), checked with
// SO_PEERCRED before a single byte is sent, so a fake kvd never sees an
// engine's attach nor hands it pages to write its KV into.
#ifndef NANOKV_IPC_UDS_KVD_SOCKET_H_
#define NANOKV_IPC_UDS_KVD_SOCKET_H_

#include <string>
#include <string_view>

#include "ipc/uds/channel.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

struct KvdAddress {
  std::string path;
  // Where the path came from, for messages: "NANOKV_RUN_DIR", "kvd's
  // segment" or "the default run directory".
  std::string source;
  // Why kvd's segment did not say (unset when it did, or was not asked):
  // e.g. it is not readable by this user.
  Status segment_error;
};

KvdAddress FindKvdSocket(std::string_view ipc_name);

// Connects to `path` and checks the listener's credentials.
//   kUnavailable      nothing listens there
//   kPermissionDenied the socket's mode keeps this user out (naming its owner,
//                     group and mode, and kvd's config keys socket_mode and
//                     group), or the listener is not a uid trusted as kvd's
//                     (naming its uid and pid, and NANOKV_KVD_UID)
Result<Channel> ConnectToKvd(const std::string& path);

// Both: where, then connect and check. Messages name the IPC name and where
// the path came from.
Result<Channel> ConnectToKvdNamed(std::string_view ipc_name, std::string* path_out = nullptr);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_UDS_KVD_SOCKET_H_
