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

Status CheckHelloReply(const transfer::v1::Reply& reply) {
  if (reply.chunk_bytes() < 4096 || reply.chunk_bytes() > kMaxChunkBytes || reply.depth() < 1 ||
      reply.depth() > kMaxDepth) {
    return Status::ProtocolError("transfer: a hello reply past the limits (chunk " +
                                 std::to_string(reply.chunk_bytes()) + " bytes, depth " +
                                 std::to_string(reply.depth()) + ")");
  }
  return Status::OK();
}

Status CheckGetChunk(const transfer::v1::Reply& reply, uint64_t length, uint64_t known_total) {
  const uint64_t total = reply.bytes_total();
  if (total < 1 || total > kMaxObjectBytes || (known_total != 0 && known_total != total) ||
      reply.offset() >= total || length < 1 || length > total - reply.offset()) {
    return Status::ProtocolError("transfer: a chunk of " + std::to_string(length) + " bytes at " +
                                 std::to_string(reply.offset()) + " outside the object of " + std::to_string(total));
  }
  return Status::OK();
}

Status CheckPutChunk(const transfer::v1::Put& put, uint64_t length, uint64_t plan_bytes) {
  if (length < 1 || put.offset() > plan_bytes || length > plan_bytes - put.offset()) {
    return Status::InvalidArgument("a chunk at " + std::to_string(put.offset()) + " of " + std::to_string(length) +
                                   " bytes is outside the plan of " + std::to_string(plan_bytes));
  }
  return Status::OK();
}

}  // namespace nanokv::ucx
