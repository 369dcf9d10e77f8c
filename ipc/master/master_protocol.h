// The cluster master's protocol beside its schema (ipc/proto/master.proto):
// the version, the metadata every call carries, and the limits every request
// and session message is checked against (master_checks.h). One place, read by
// the master (master/), its nodes (daemon/cluster/), ClusterClient and kvctl.
#ifndef NANOKV_IPC_MASTER_MASTER_PROTOCOL_H_
#define NANOKV_IPC_MASTER_MASTER_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

namespace nanokv::master {

// Sent by every caller as metadata kProtocolKey; a master refuses any other
// (kUnsupported naming both), a kvd refuses a master that answers another.
// Version 2: the token never travels; a Hello proves the master and calls
// carry a credential made from it (master_auth.h).
inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr char kProtocolKey[] = "nanokv-protocol";
// On a refusal by a master that does not lead: where the leader is
// ("host:port"; empty when it knows none), as trailing metadata.
inline constexpr char kLeaderKey[] = "nanokv-leader";

// Limits (each checked, each named in the error that refuses it).
inline constexpr size_t kMaxBatchItems = 4096;         // keys in one request
inline constexpr uint32_t kMaxReplicas = 8;            // replica_num
inline constexpr uint64_t kMaxObjectBytes = 1ull << 40;  // bytes_total of one object
inline constexpr size_t kMaxNodeIdBytes = 63;          // [A-Za-z0-9_.-], not starting with '.'
inline constexpr size_t kMaxAddressBytes = 255;        // data_address, master addresses
inline constexpr size_t kMaxHostIdBytes = 64;          // NodeRoute.host_id
inline constexpr size_t kMaxSocketPathBytes = 107;     // NodeRoute.kvd_socket: sun_path less its NUL
inline constexpr size_t kMaxEventsPerBatch = 4096;     // ObjectEvents in one EventBatch
inline constexpr size_t kMaxTokenBytes = 4096;
// The largest message either side accepts (gRPC's default is 4 MiB): a
// batch of kMaxBatchItems plans of a few spans each fits.
inline constexpr int kMaxMessageBytes = 64 << 20;
// What the master's transport may hold for all callers at once (gRPC's
// resource quota): two of the largest messages and then some.
inline constexpr size_t kMasterBufferBytes = size_t{64} << 20;

}  // namespace nanokv::master

#endif  // NANOKV_IPC_MASTER_MASTER_PROTOCOL_H_
