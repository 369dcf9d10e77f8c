#include "kvctl/operator_channel.h"

#include "base/naming.h"
#include "ipc/rpc/call.h"
#include "ipc/uds/channel_transport.h"
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
  return OperatorChannel(std::move(channel).value(), "kvd at " + path);
}

Result<wire::Message> OperatorChannel::Call(wire::Message request, std::chrono::milliseconds timeout) {
  ipc::ChannelTransport transport(channel_);
  ipc::CallOptions call;
  call.peer = peer_;
  call.timeout = timeout;
  call.reply_fds = ipc::ReplyFds::kClose;  // an operator is granted nothing
  call.stray_replies = ipc::StrayReplies::kSkip;
  // Request id 0 is kvd speaking first: a refusal at connect is an Error.
  call.on_notice = [](const wire::Message& notice) {
    return notice.has_error() ? wire::StatusFromError(notice.error()) : Status::OK();
  };
  NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply,
                          ipc::Call(transport, next_request_id_++, std::move(request), {}, call));
  return std::move(reply.message);
}

}  // namespace nanokv::kvctl
