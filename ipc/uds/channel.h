// A connected SOCK_SEQPACKET Unix socket: one datagram is one whole message,
// with its fds attached. Datagram boundaries mean a peer cannot dribble a
// message a byte at a time, and a message is never half-read.
#ifndef NANOKV_IPC_UDS_CHANNEL_H_
#define NANOKV_IPC_UDS_CHANNEL_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::ipc {

inline constexpr size_t kMaxDatagramBytes = 64 * 1024;

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd) : fd_(fd) {}  // takes ownership of a connected socket
  Channel(Channel&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Channel& operator=(Channel&& other) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel() { Close(); }

  // kUnavailable when nothing listens at `path` (kvd not running).
  static Result<Channel> Connect(const std::string& path);
  // Two connected channels (tests, in-process peers).
  static Result<std::pair<Channel, Channel>> Pair();

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void Close();
  Status SetNonBlocking(bool on);

  // Sends one datagram (at most kMaxDatagramBytes) carrying `fds`; the caller
  // keeps its fds. On a non-blocking socket a full peer buffer is kUnavailable.
  Status Send(std::span<const std::byte> data, std::span<const int> fds = {});

  enum class Received { kMessage, kClosed, kWouldBlock };
  // Receives one datagram into *data (resized to it) and its fds (appended,
  // owned by the caller). kProtocolError for an oversized datagram.
  Result<Received> Receive(std::vector<std::byte>* data, std::vector<int>* fds);

  // The peer's pid/uid/gid as the kernel saw them at connect (SO_PEERCRED).
  Result<PeerCredentials> Peer() const;

 private:
  int fd_ = -1;
};

// A listening socket at a filesystem path, removed again on destruction.
class Listener {
 public:
  Listener() = default;
  Listener(Listener&& other) noexcept;
  Listener& operator=(Listener&& other) noexcept;
  ~Listener();

  // Binds `path` with `mode` (applied with chmod, beating the umask) and
  // group `gid` if given. An existing socket file nobody answers on is
  // replaced; one that answers is kFailedPrecondition (another kvd).
  static Result<Listener> Bind(const std::string& path, mode_t mode,
                               std::optional<gid_t> gid = std::nullopt);

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Non-blocking accept: nullopt when no connection is waiting.
  Result<std::optional<Channel>> Accept();
  void Close();  // stops listening and removes the path

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_UDS_CHANNEL_H_
