// File descriptors across a Unix socket (SCM_RIGHTS): the one way pages cross a
// process boundary. A message carries some bytes and up to kMaxFdsPerMessage fds,
// below the kernel's SCM_MAX_FD (253), so senders batch larger sets.
#ifndef NANOKV_IPC_UDS_FD_PASSING_H_
#define NANOKV_IPC_UDS_FD_PASSING_H_

#include <cstddef>
#include <span>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::ipc {

inline constexpr size_t kMaxFdsPerMessage = 250;

// Sends `data` (non-empty) with `fds` attached to the first byte, all of it or
// an error. The caller keeps ownership of `fds` (the kernel duplicates them).
Status SendWithFds(int socket, std::span<const std::byte> data, std::span<const int> fds);

// Receives up to data.size() bytes and any fds that came with them, which the
// caller then owns (they are close-on-exec). Returns the bytes read; 0 means
// the peer closed. kProtocolError (and every received fd closed) when the
// kernel truncated the fds or the datagram (SOCK_SEQPACKET), or more than
// `max_fds` arrived. A non-blocking socket with nothing to read gives
// kUnavailable with error_name "EAGAIN".
Result<size_t> ReceiveWithFds(int socket, std::span<std::byte> data, std::vector<int>* fds,
                              size_t max_fds = kMaxFdsPerMessage);

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_UDS_FD_PASSING_H_
