// Encoding and validation of the engine protocol (ipc/proto/nanokv.proto).
// Decode is the only way bytes from a peer become a wire::Message, and it
// rejects anything out of range before kvd or libkv looks at it: the wrong
// version, no body, oversized names, counts beyond the limits below.
#ifndef NANOKV_IPC_WIRE_CODEC_H_
#define NANOKV_IPC_WIRE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ipc/proto/nanokv.pb.h"
#include "nanokv/status.h"

namespace nanokv::wire {

inline constexpr uint32_t kWireVersion = 1;
inline constexpr size_t kMaxNameBytes = 63;          // tenant and group names
inline constexpr size_t kMaxDevices = 16;            // devices one kvd serves
inline constexpr uint32_t kMaxPagesPerRequest = 4096;  // 8 GiB of 2 MiB pages
inline constexpr size_t kMaxErrorBytes = 1024;
// A device's uuid (gpu::DeviceInfo::uuid) in an attach reply or a plan.
inline constexpr size_t kMaxDeviceUuidBytes = 64;
// Pages (each with an fd) in one AdoptRequest: well under the 250 fds a
// datagram may carry, so a kvd near its fd limit takes a few at a time.
inline constexpr uint32_t kMaxAdoptPages = 64;

// Serializes `message` as of kWireVersion, without copying it (a reply of
// 64 plans is kilobytes): the version goes first as a message of its own,
// and a parser merges concatenated messages. A message that names another
// version is copied and restamped.
std::vector<std::byte> Encode(const Message& message);

// Parses and validates one datagram. kProtocolError names the fault.
Status Decode(std::span<const std::byte> data, Message* out);

// An Error reply carrying `status`, echoing `request_id`; its hint
// Hint::kRetryAfterForget is sent as Error.retry_after_forget.
Message ErrorReply(uint64_t request_id, const Status& status);
// The Status an Error reply stands for (code range-checked), with
// Hint::kRetryAfterForget when the reply says retry_after_forget.
Status StatusFromError(const Error& error);

// The body's field name ("attach", "object_open"), from the descriptor: new
// messages need no edit; "nothing" for a message without a body.
const char* BodyName(const Message& message);

// Whether a name is acceptable for a tenant or group: 1..kMaxNameBytes of
// [A-Za-z0-9_.:@-], so it prints safely in kvctl and logs.
bool ValidName(const std::string& name);

// Whether a device uuid is acceptable: at most kMaxDeviceUuidBytes of
// printable ASCII (0x21-0x7e); empty means "unknown" (a kvd that sends none).
bool ValidDeviceUuid(const std::string& uuid);

}  // namespace nanokv::wire

#endif  // NANOKV_IPC_WIRE_CODEC_H_
