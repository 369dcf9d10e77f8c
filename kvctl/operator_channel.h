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
  // Connects to <run dir>/<ipc name>.sock. kUnavailable when nothing listens
  // there (kvd not running, or another --run-dir), kPermissionDenied when
  // the socket's mode keeps us out.
  static Result<OperatorChannel> Connect(std::string_view ipc_name);

  // Sends `request` and returns kvd's reply to it. An Error reply becomes
  // its Status (kvd's code: kNotFound, kPermissionDenied, ...); no reply
  // within `timeout` is kUnavailable ("kvd did not answer").
  Result<wire::Message> Call(wire::Message request, std::chrono::milliseconds timeout);

 private:
  OperatorChannel(ipc::Channel channel, std::string path)
      : channel_(std::move(channel)), path_(std::move(path)) {}

  ipc::Channel channel_;
  std::string path_;
  uint64_t next_request_id_ = 1;
};

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_OPERATOR_CHANNEL_H_
