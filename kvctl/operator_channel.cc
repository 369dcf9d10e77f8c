#include "kvctl/operator_channel.h"

#include <poll.h>

#include <cerrno>
#include <unistd.h>

#include "base/naming.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvctl {

Result<OperatorChannel> OperatorChannel::Connect(std::string_view ipc_name) {
  std::string path = ipc::SocketPath(ipc_name);
  auto channel = ipc::Channel::Connect(path);
  if (!channel.ok()) {
    if (channel.status().code() == Code::kUnavailable) {
      return Status::Unavailable("kvd '" + std::string(ipc_name) + "': nothing listens at " + path +
                                 " (is kvd running? a kvd started with --run-dir needs the same "
                                 "--run-dir or NANOKV_RUN_DIR here)");
    }
    return channel.status();
  }
  return OperatorChannel(std::move(channel).value(), std::move(path));
}

Result<wire::Message> OperatorChannel::Call(wire::Message request, std::chrono::milliseconds timeout) {
  const uint64_t id = next_request_id_++;
  request.set_request_id(id);
  NANOKV_RETURN_IF_ERROR(channel_.Send(wire::Encode(request)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::byte> data;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{channel_.fd(), POLLIN, 0};
    int n = left.count() > 0 ? poll(&ready, 1, static_cast<int>(left.count())) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("poll", errno, path_);
    if (n == 0) {
      return Status::Unavailable("kvd did not answer at " + path_ + " within " +
                                 std::to_string(timeout.count()) + " ms (busy or hung?)");
    }
    std::vector<int> fds;
    NANOKV_ASSIGN_OR_RETURN(ipc::Channel::Received received, channel_.Receive(&data, &fds));
    for (int fd : fds) close(fd);  // an operator is granted nothing
    if (received == ipc::Channel::Received::kWouldBlock) continue;
    if (received == ipc::Channel::Received::kClosed) {
      return Status::Unavailable("kvd closed the connection at " + path_ + " without answering");
    }
    wire::Message reply;
    NANOKV_RETURN_IF_ERROR(wire::Decode(data, &reply));
    // Request id 0 is kvd speaking first: a refusal at connect is an Error.
    if (reply.request_id() != id && !(reply.request_id() == 0 && reply.has_error())) continue;
    if (reply.has_error()) return wire::StatusFromError(reply.error());
    return reply;
  }
}

}  // namespace nanokv::kvctl
