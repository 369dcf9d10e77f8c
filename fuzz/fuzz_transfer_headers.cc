// libFuzzer target: what a peer on the data path between nodes says
// (issue 17; ipc/ucx/transfer_wire.h). The first byte picks the header
// (Hello, Put, Get, Reply), the next 16 are a chunk's length and what the
// receiver knows (the get's total so far, or the put's plan size), the rest
// the header's bytes. A header that parses goes through the checks kvd's
// agent and ClusterClient apply; whatever they pass must be inside its
// object or plan, and StatusOf must turn any code into a Status in range.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ipc/ucx/transfer_wire.h"

namespace {

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_transfer_headers: %s\n", what);
  std::abort();
}

uint64_t Word(const uint8_t* data) {
  uint64_t v = 0;
  std::memcpy(&v, data, sizeof(v));
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nanokv;
  if (size < 17) return 0;
  const uint8_t mode = data[0] % 4;
  const uint64_t length = Word(data + 1);
  const uint64_t known = Word(data + 9);
  const uint8_t* header = data + 17;
  const size_t bytes = size - 17;
  switch (mode) {
    case 0: {
      transfer::v1::Hello hello;
      if (ucx::DecodeHeader(header, bytes, "hello", &hello).ok() && bytes > ucx::kMaxHeaderBytes) {
        Fail("a hello past the header bound parsed");
      }
      break;
    }
    case 1: {
      transfer::v1::Put put;
      if (!ucx::DecodeHeader(header, bytes, "put", &put).ok()) break;
      if (ucx::CheckPutChunk(put, length, known).ok() &&
          (length < 1 || put.offset() + length < put.offset() || put.offset() + length > known)) {
        Fail("a put chunk outside its plan passed");
      }
      break;
    }
    case 2: {
      transfer::v1::Get get;
      (void)ucx::DecodeHeader(header, bytes, "get", &get);
      break;
    }
    default: {
      transfer::v1::Reply reply;
      if (!ucx::DecodeHeader(header, bytes, "reply", &reply).ok()) break;
      const Status status = ucx::StatusOf(reply, "peer");
      if (static_cast<uint32_t>(status.code()) > static_cast<uint32_t>(kLastCode)) Fail("a code out of range");
      if (status.message().size() > 4 + 2 + 512 + 64) Fail("a message past its bound");
      if (ucx::CheckHelloReply(reply).ok() &&
          (reply.chunk_bytes() < 4096 || reply.chunk_bytes() > ucx::kMaxChunkBytes || reply.depth() < 1 ||
           reply.depth() > ucx::kMaxDepth)) {
        Fail("a hello reply past the limits passed");
      }
      if (ucx::CheckGetChunk(reply, length, known).ok()) {
        const uint64_t total = reply.bytes_total();
        if (total < 1 || total > ucx::kMaxObjectBytes || (known != 0 && known != total) || length < 1 ||
            reply.offset() + length < reply.offset() || reply.offset() + length > total) {
          Fail("a get chunk outside its object passed");
        }
      }
      break;
    }
  }
  return 0;
}
