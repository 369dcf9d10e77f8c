// The transfer protocol's vocabulary, shared by kvd's agent
// (daemon/transfer/) and ClusterClient (libkv/cluster/): active message ids,
// the version, limits, and decoding of the headers (ipc/proto/transfer.proto)
// as hostile input: a header that does not parse or breaks a limit is a
// Status, and whoever got it ends that endpoint.
#ifndef NANOKV_IPC_UCX_TRANSFER_WIRE_H_
#define NANOKV_IPC_UCX_TRANSFER_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ipc/proto/transfer.pb.h"
#include "nanokv/status.h"

namespace nanokv::ucx {

// 2: the hello carries the data path key made from the token, not the token.
inline constexpr uint32_t kTransferProtocol = 2;

// Active message ids.
enum AmId : uint16_t {
  kHello = 1,       // client -> agent: Hello
  kHelloReply = 2,  // agent -> client: Reply (chunk_bytes, depth, mode)
  kPut = 3,         // client -> agent: Put + a chunk
  kPutReply = 4,    // agent -> client: Reply (complete on the last)
  kGet = 5,         // client -> agent: Get
  kGetData = 6,     // agent -> client: Reply (bytes_total, offset) + a chunk, or an error
};

inline constexpr size_t kMaxHeaderBytes = 1024;                  // a key is at most 256
inline constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;    // transfer.chunk's upper bound
inline constexpr uint32_t kMaxDepth = 64;                        // transfer.depth's upper bound
inline constexpr uint64_t kMaxObjectBytes = uint64_t{1} << 40;   // the master's bytes_total bound

// Parses `header` into `out`; kProtocolError naming `what` when it does not.
template <typename Message>
Status DecodeHeader(const void* header, size_t bytes, const char* what, Message* out) {
  if (bytes > kMaxHeaderBytes || !out->ParseFromArray(header, static_cast<int>(bytes))) {
    return Status::ProtocolError(std::string("transfer: a ") + what + " header that does not parse");
  }
  return Status::OK();
}

// The range checks on what a peer says, each OK or kProtocolError /
// kInvalidArgument naming the limit (fuzz/fuzz_transfer_headers.cc):
// an agent's hello reply: chunk_bytes in [4096, kMaxChunkBytes], depth in
// [1, kMaxDepth].
Status CheckHelloReply(const transfer::v1::Reply& reply);
// A get chunk of `length` bytes (kProtocolError): 1 <= bytes_total <=
// kMaxObjectBytes, the same total as the get's earlier chunks
// (`known_total`, 0 before the first), length >= 1, and offset + length
// inside the object.
Status CheckGetChunk(const transfer::v1::Reply& reply, uint64_t length, uint64_t known_total);
// A put chunk of `length` bytes at put.offset() (kInvalidArgument): inside a
// plan of `plan_bytes`.
Status CheckPutChunk(const transfer::v1::Put& put, uint64_t length, uint64_t plan_bytes);

// A Reply carrying `status` (code and message).
transfer::v1::Reply ReplyOf(uint64_t request_id, const Status& status);
// The Status a Reply carries; kProtocolError for a code out of range.
Status StatusOf(const transfer::v1::Reply& reply, const std::string& peer);

}  // namespace nanokv::ucx

#endif  // NANOKV_IPC_UCX_TRANSFER_WIRE_H_
