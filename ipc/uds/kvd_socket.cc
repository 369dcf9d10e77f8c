#include "ipc/uds/kvd_socket.h"

#include <sys/stat.h>

#include <cstdlib>

#include "base/kvd_identity.h"
#include "base/naming.h"
#include "base/run_dir.h"
#include "ipc/segment/segment_reader.h"

namespace nanokv::ipc {

KvdAddress FindKvdSocket(std::string_view ipc_name) {
  KvdAddress address;
  const char* dir = std::getenv("NANOKV_RUN_DIR");
  if (dir != nullptr && *dir != '\0') {
    address.path = SocketPathIn(dir, ipc_name);
    address.source = "NANOKV_RUN_DIR";
    return address;
  }
  auto snapshot = ReadSegment(ipc_name);
  if (snapshot.ok()) {
    const std::string_view published = ReadString(snapshot->segment.header.socket_path);
    // A path kvd made: absolute, ending in its own name.
    const std::string expected_tail = "/" + std::string(ipc_name) + ".sock";
    if (!published.empty() && published.front() == '/' && published.ends_with(expected_tail)) {
      address.path = std::string(published);
      address.source = "kvd's segment";
      return address;
    }
  } else {
    address.segment_error = snapshot.status();
  }
  address.path = SocketPath(ipc_name);
  address.source = "the default run directory";
  return address;
}

Result<Channel> ConnectToKvd(const std::string& path) {
  auto channel = Channel::Connect(path);
  if (!channel.ok()) {
    const Status& s = channel.status();
    struct stat st{};
    if (s.code() == Code::kPermissionDenied && stat(path.c_str(), &st) == 0) {
      return Status(Code::kPermissionDenied,
                    "may not connect to kvd's socket " + path + " (owner " +
                        DescribeUid(st.st_uid) + ", group " + DescribeGid(st.st_gid) + ", mode " +
                        ModeText(st.st_mode) +
                        "): kvd's config keys socket_mode and group say who may connect",
                    s.call(), s.error_name());
    }
    return s;
  }
  NANOKV_ASSIGN_OR_RETURN(PeerCredentials peer, channel->Peer());
  if (!IsTrustedKvdUid(peer.uid)) {
    return Status::PermissionDenied(
        "the process listening at " + path + " (pid " + std::to_string(peer.pid) + ", " +
        DescribeUid(peer.uid) + ") is not kvd: kvd runs as " + TrustedKvdUidsText() +
        "; nothing was sent to it (if kvd really runs as that user, set " + kKvdUidVariable +
        "=" + std::to_string(peer.uid) + ")");
  }
  return channel;
}

Result<Channel> ConnectToKvdNamed(std::string_view ipc_name, std::string* path_out) {
  KvdAddress address = FindKvdSocket(ipc_name);
  if (path_out != nullptr) *path_out = address.path;
  auto channel = ConnectToKvd(address.path);
  if (channel.ok() || channel.status().code() != Code::kUnavailable) return channel;
  const Status& s = channel.status();
  std::string why = "cannot reach kvd '" + std::string(ipc_name) + "': nothing listens at " +
                    address.path + " (from " + address.source + ")";
  if (!address.segment_error.ok() && address.segment_error.code() != Code::kNotFound) {
    why += "; its segment did not say where it listens: " +
           std::string(address.segment_error.message());
  } else if (address.source != "kvd's segment") {
    why += "; is kvd running? (a kvd with another run_dir is found by its segment, or set "
           "NANOKV_RUN_DIR to it)";
  } else {
    why += "; is kvd running?";
  }
  return Status(Code::kUnavailable, why, s.call(), s.error_name());
}

}  // namespace nanokv::ipc
