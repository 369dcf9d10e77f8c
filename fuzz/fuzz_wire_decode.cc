// libFuzzer target: bytes from a peer -> wire::Decode, as kvd's NodeServer and
// libkv's reader thread take them. Decode must never crash, must fail only with
// kProtocolError (kUnsupported for another wire version), and whatever it
// accepts must survive what kvd does next: re-encoding (the round trip gives
// the same message), names that passed ValidName, an Error body turned back
// into a Status.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "ipc/wire/codec.h"

namespace {

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_wire_decode: %s\n", what);
  std::abort();
}

}  // namespace

// protobuf logs every string field that is not UTF-8 ("Use the 'bytes'
// type"); on random input that is most inputs, and the logging halves the rate.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nanokv;
  using namespace nanokv::wire;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Message message;
  Status decoded = Decode(bytes, &message);
  if (!decoded.ok()) {
    // kUnsupported is another wire version (another release), nothing else.
    const bool version = decoded.code() == Code::kUnsupported && message.version() != kWireVersion;
    if (decoded.code() != Code::kProtocolError && !version) {
      Fail("Decode failed with a code other than kProtocolError (or kUnsupported for a version)");
    }
    return 0;
  }
  if (message.version() != kWireVersion) Fail("Decode accepted a wrong version");
  if (message.body_case() == Message::BODY_NOT_SET) Fail("Decode accepted a message with no body");

  // The round trip: what kvd accepted, re-encoded, decodes to the same message.
  Message again;
  if (!Decode(Encode(message), &again).ok()) Fail("a decoded message did not decode after Encode");
  if (!google::protobuf::util::MessageDifferencer::Equals(message, again)) {
    Fail("Encode/Decode round trip changed the message");
  }

  // What kvd and libkv do with the fields next.
  if (message.has_attach() && !ValidName(message.attach().tenant())) Fail("attach tenant passed Decode, not ValidName");
  if (message.has_evict() && !ValidName(message.evict().tenant())) Fail("evict tenant passed Decode, not ValidName");
  if (message.has_error()) {
    Status status = StatusFromError(message.error());
    Message reply;
    if (!Decode(Encode(ErrorReply(message.request_id(), status)), &reply).ok()) {
      Fail("ErrorReply of a decoded Error does not decode");
    }
  }
  return 0;
}
