// The transfer protocol's replies (ipc/ucx/transfer_wire.h).
#include "ipc/ucx/transfer_wire.h"

namespace nanokv::ucx {

transfer::v1::Reply ReplyOf(uint64_t request_id, const Status& status) {
  transfer::v1::Reply reply;
  reply.set_request_id(request_id);
  reply.set_code(static_cast<int32_t>(status.code()));
  if (!status.ok()) reply.set_message(std::string(status.message()).substr(0, 512));
  return reply;
}

Status StatusOf(const transfer::v1::Reply& reply, const std::string& peer) {
  if (reply.code() == 0) return Status::OK();
  if (reply.code() < 0 || reply.code() > static_cast<int32_t>(kLastCode)) {
    return Status::ProtocolError("transfer: " + peer + " answered code " + std::to_string(reply.code()));
  }
  return Status(static_cast<Code>(reply.code()), peer + ": " + reply.message().substr(0, 512));
}

}  // namespace nanokv::ucx
