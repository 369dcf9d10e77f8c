// Validation of the object store's messages (ipc/proto/nanokv.proto, fields
// 40-69), called by Decode (codec.h) like every other body check.
#ifndef NANOKV_IPC_WIRE_OBJECT_CODEC_H_
#define NANOKV_IPC_WIRE_OBJECT_CODEC_H_

#include <cstdint>

#include "ipc/proto/nanokv.pb.h"
#include "nanokv/status.h"

namespace nanokv::wire {

inline constexpr uint32_t kMaxObjectPageFds = 64;      // fds in one ObjectPagesReply
inline constexpr uint32_t kMaxObjectListEntries = 128;  // ObjectEntry rows in one reply
inline constexpr uint32_t kMaxObjectSpans = 4096;      // spans of one plan (8 GiB of 2 MiB)
inline constexpr int kMaxObjectInfoDevices = 16;       // devices of one ObjectInfoReply (the segment's rows)
inline constexpr int kMaxObjectStoreOwners = 128;      // owners listed per device in one ObjectInfoReply
inline constexpr int kMaxObjectInfoSlabs = 32;         // slabs listed per device in one ObjectInfoReply
inline constexpr int kMaxObjectBatch = 256;            // keys of one lease batch
// Key bytes a client puts in one lease batch (256 keys of 256 bytes would
// not fit a datagram; 12 KiB stays in one request ring message).
inline constexpr size_t kMaxObjectBatchKeyBytes = 12 * 1024;
inline constexpr int kMaxReleaseBatch = 4096;          // lease ids of one release batch (32 KiB)
// A slab's payload pages (8 GiB of 2 MiB pages; their ids are in the
// grant, their fds asked for apart): kvd grants no more.
inline constexpr uint32_t kMaxSlabPayloadPages = 4096;
inline constexpr uint32_t kMaxSlabRingRecords = 1u << 16;  // ipc::AnnounceRing::kMaxRecords
inline constexpr uint32_t kMaxSlabHeaderSlots = 1u << 24;  // object_store.max_objects' bound
inline constexpr uint32_t kMaxReadTableEntries = 1u << 24;  // a read table's words a device: max_objects' bound

// Whether the body is one of the object store's messages.
bool IsObjectBody(Message::BodyCase body);
// Whether the body is an object request kvd answers (not a reply).
bool IsObjectRequest(Message::BodyCase body);
// Range checks of an object body (keys by nanokv/object_types.h's
// ValidObjectKey, states and pins by nanokv/object_header.h's enums).
// kProtocolError names the fault.
Status CheckObjectBody(const Message& m);
// The same checks of one plan (a master relays plans kvds made).
Status CheckObjectPlan(const ObjectPlan& plan);

}  // namespace nanokv::wire

#endif  // NANOKV_IPC_WIRE_OBJECT_CODEC_H_
