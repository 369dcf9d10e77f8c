// kvctl's side of kvd's socket: an operator's connection (no attach), one
// request and its reply at a time, never waiting past a timeout, so a hung
// kvd costs a command its timeout, not the operator's terminal.
#ifndef NANOKV_KVCTL_OPERATOR_CHANNEL_H_
#define NANOKV_KVCTL_OPERATOR_CHANNEL_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/proto/nanokv.pb.h"
#include "ipc/uds/channel.h"
#include "nanokv/status.h"

namespace nanokv::kvctl {

class OperatorChannel {
 public:
  // Connects to kvd's socket: <--run-dir>/<ipc name>.sock when given, else
  // where kvd's segment says (ipc/uds/kvd_socket.h). kUnavailable when
  // nothing listens there (kvd not running), kPermissionDenied when the
  // socket's mode keeps us out or the listener is not a uid trusted as kvd's.
  static Result<OperatorChannel> Connect(std::string_view ipc_name);

  // Sends `request` and returns kvd's reply to it (ipc::Call). An Error
  // reply becomes its Status (kvd's code: kNotFound, kPermissionDenied, ...),
  // and so does a refusal at connect; no reply within `timeout` is
  // kUnavailable ("kvd at <path> did not answer"), and closes the channel.
  Result<wire::Message> Call(wire::Message request, std::chrono::milliseconds timeout);

 private:
  OperatorChannel(ipc::Channel channel, std::string peer)
      : channel_(std::move(channel)), peer_(std::move(peer)) {}

  ipc::Channel channel_;
  std::string peer_;  // "kvd at <socket path>", for the call's messages
  uint64_t next_request_id_ = 1;
};

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_OPERATOR_CHANNEL_H_
