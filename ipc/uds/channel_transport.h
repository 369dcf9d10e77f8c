// The SOCK_SEQPACKET Channel as an ipc::Transport (rpc/transport.h), so
// ipc::Call runs over it: poll for the deadline, then one datagram with its fds.
#ifndef NANOKV_IPC_UDS_CHANNEL_TRANSPORT_H_
#define NANOKV_IPC_UDS_CHANNEL_TRANSPORT_H_

#include <cstddef>
#include <span>
#include <vector>

#include "ipc/rpc/transport.h"
#include "ipc/uds/channel.h"
#include "nanokv/status.h"

namespace nanokv::ipc {

// Borrows a channel: a stack object for the length of a call costs nothing,
// and the channel's owner keeps it (kvd's connections, a client's socket).
// "*channel" must remain live while this ChannelTransport is in use. The
// channel may be blocking or not: Receive polls before it reads.
class ChannelTransport final : public Transport {
 public:
  explicit ChannelTransport(Channel& channel) : channel_(channel) {}

  Status Send(std::span<const std::byte> message, std::span<const int> fds) override;
  Result<Received> Receive(std::vector<std::byte>* message, std::vector<int>* fds,
                           Clock::time_point deadline) override;
  void Close() override { channel_.Close(); }

 private:
  Channel& channel_;
};

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_UDS_CHANNEL_TRANSPORT_H_
