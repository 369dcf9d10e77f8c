// libFuzzer target: bytes -> the shared memory of a request ring as a
// hostile client leaves it, then kvd's side of it (ipc/ring/request_ring.h):
// Pop until nothing or a fault, each message decoded as kvd's Handle would
// (wire::Decode), then replies pushed until the ring is full or refused.
// Input: the client's to-client head (8 bytes), then the to-kvd ring's
// cells (64 bytes each: stamp, length, 56 bytes). Any input must give
// messages no longer than kMaxRingMessageBytes or a kProtocolError, and
// never a read or write outside the ring (ASan).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <google/protobuf/stubs/logging.h>

#include "ipc/proto/nanokv.pb.h"
#include "ipc/ring/request_ring.h"
#include "ipc/wire/codec.h"

namespace {

using nanokv::ipc::RequestRing;
using nanokv::ipc::RingHeader;

struct Ring {
  RequestRing kvd;
  void* raw = nullptr;  // the client's view, written from the input
};

// A fresh ring per input: kvd's private indices start at 0, as on a new
// connection.
Ring Make() {
  Ring r;
  int fd = -1;
  auto made = RequestRing::Create(&fd);
  if (!made.ok()) std::abort();
  r.kvd = std::move(*made);
  r.raw = mmap(nullptr, nanokv::ipc::kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (r.raw == MAP_FAILED) std::abort();
  return r;
}

}  // namespace

// protobuf logs every string field that is not UTF-8: on random input most.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  Ring r = Make();
  auto* header = static_cast<RingHeader*>(r.raw);
  std::memcpy(&header->to_client.head, data, 8);
  auto* ring_bytes = static_cast<uint8_t*>(r.raw) + nanokv::ipc::kRingHeaderBytes;
  std::memcpy(ring_bytes, data + 8, std::min(size - 8, nanokv::ipc::kRingDataBytes));
  std::vector<std::byte> message;
  for (int i = 0; i < 64; ++i) {
    auto popped = r.kvd.Pop(&message);
    if (!popped.ok()) {
      if (popped.status().code() != nanokv::Code::kProtocolError) std::abort();
      break;
    }
    if (!*popped) break;
    if (message.empty() || message.size() > nanokv::ipc::kMaxRingMessageBytes) {
      std::fprintf(stderr, "fuzz_ring_entries: a message of %zu bytes\n", message.size());
      std::abort();
    }
    nanokv::wire::Message m;
    (void)nanokv::wire::Decode(message, &m);
  }
  // Replies until kvd's copy of the head says full: the client's head is
  // read then, and must be refused or taken, never trusted past the ring.
  std::vector<std::byte> reply(100, std::byte{1});
  for (size_t i = 0; i <= nanokv::ipc::kRingCells && r.kvd.Push(reply).ok(); ++i) {
  }
  munmap(r.raw, nanokv::ipc::kRingFileBytes);
  return 0;
}
