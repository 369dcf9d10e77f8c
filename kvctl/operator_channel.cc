#include "kvctl/operator_channel.h"

#include "ipc/rpc/call.h"
#include "ipc/uds/channel_transport.h"
#include "ipc/uds/kvd_socket.h"
#include "ipc/wire/codec.h"

namespace nanokv::kvctl {

Result<OperatorChannel> OperatorChannel::Connect(std::string_view ipc_name) {
  // Where kvd's segment says it listens (or --run-dir), and only if the
  // listener is kvd's uid: an operator's request is never sent to another.
  std::string path;
  NANOKV_ASSIGN_OR_RETURN(ipc::Channel channel, ipc::ConnectToKvdNamed(ipc_name, &path));
  return OperatorChannel(std::move(channel), "kvd at " + path);
}

Result<wire::Message> OperatorChannel::Call(wire::Message request, std::chrono::milliseconds timeout) {
  ipc::ChannelTransport transport(channel_);
  ipc::CallOptions call;
  call.peer = peer_;
  call.timeout = timeout;
  call.reply_fds = ipc::ReplyFds::kClose;  // an operator is granted nothing
  call.stray_replies = ipc::StrayReplies::kSkip;
  // Other notices (none is sent to an operator today) are not its business;
  // a refusal at connect ends the call in ipc::Call itself.
  call.on_notice = [](const wire::Message&) { return Status::OK(); };
  NANOKV_ASSIGN_OR_RETURN(ipc::Reply reply,
                          ipc::Call(transport, next_request_id_++, std::move(request), {}, call));
  return std::move(reply.message);
}

}  // namespace nanokv::kvctl
