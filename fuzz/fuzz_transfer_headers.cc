// libFuzzer target: what a peer on the data path between nodes says
// (ipc/ucx/transfer_wire.h). The first byte picks the header (Hello, Put,
// Get, Reply), the next 16 are a chunk's length and what the receiver knows
// (the get's total so far, or the put's plan size), the rest the header's
// bytes. A header that parses goes through the checks kvd's agent and
// ClusterClient apply; whatever they pass must be inside its object or plan,
// a hello the agent admits must carry its protocol and token, and StatusOf
// must turn any code into a Status in range. A fifth mode drives the agent's
// gate before hellos (daemon/transfer/hello_gate.h) with connections from
// hosts and endpoints that end or are admitted, in the order the bytes say:
// its bounds must hold after every step and only a waiting endpoint ends.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "daemon/transfer/hello_gate.h"
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

// Bounds from `shape` (1-4 a host, 1-16 in all); each byte after is a step:
// low 2 bits 0-1 a connection from host (byte >> 2) % 6, 2 or 3 the end or
// admission of endpoint 1 + (byte >> 2) (both leave the gate alike).
void DriveHelloGate(uint64_t shape, const uint8_t* steps, size_t count) {
  using nanokv::kvd::HelloWaiters;
  HelloWaiters gate(1 + shape % 4, 1 + (shape >> 8) % 16);
  std::set<HelloWaiters::Id> waiting;
  HelloWaiters::Id next = 1;
  std::set<std::string> hosts;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t step = steps[i];
    if ((step & 3) < 2) {
      const std::string host = "h" + std::to_string((step >> 2) % 6);
      hosts.insert(host);
      auto ended = gate.Add(next, host);
      if (ended.has_value()) {
        if (waiting.erase(*ended) != 1) Fail("the gate ended an endpoint that was not waiting");
        if (gate.Waiting(*ended)) Fail("an endpoint ended by the gate still waits");
      }
      waiting.insert(next);
      if (!gate.Waiting(next)) Fail("a newcomer does not wait");
      ++next;
    } else {
      const HelloWaiters::Id id = 1 + (step >> 2);
      gate.Remove(id);
      waiting.erase(id);
      if (gate.Waiting(id)) Fail("an endpoint removed still waits");
    }
    if (gate.size() != waiting.size()) Fail("the gate lost count of its waiters");
    if (gate.size() > gate.total()) Fail("more waiters than the bound in all");
    for (const std::string& host : hosts) {
      if (gate.Of(host) > gate.per_host()) Fail("more waiters from one host than its bound");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nanokv;
  if (size < 17) return 0;
  const uint8_t mode = data[0] % 5;
  const uint64_t length = Word(data + 1);
  const uint64_t known = Word(data + 9);
  const uint8_t* header = data + 17;
  const size_t bytes = size - 17;
  switch (mode) {
    case 0: {
      transfer::v1::Hello hello;
      if (!ucx::DecodeHeader(header, bytes, "hello", &hello).ok()) break;
      if (bytes > ucx::kMaxHeaderBytes) Fail("a hello past the header bound parsed");
      const std::string token = (length & 1) != 0 ? "" : "cluster-secret";
      if (kvd::HelloVerdict(hello, token).ok() &&
          (hello.protocol() != ucx::kTransferProtocol || (!token.empty() && hello.token() != token))) {
        Fail("a hello without the protocol or the token was admitted");
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
    case 4:
      DriveHelloGate(known, header, bytes);
      break;
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
