// The object store across nodes, from an engine or a tool: the cluster
// master (kvd --role master) routes each write to a node and keeps the index
// of every object; the node that owns the bytes makes the plan. The same
// plan API as nanokv/object_store.h, with a preferred segment and replicas,
// and a batch form of each call (a batch of N keys is one request to the
// master).
//
//   auto cluster = nanokv::ClusterClient::Connect({.masters = {"10.0.0.1:7470"}});
//   (*cluster)->Put("sess:42:kv:L0", bytes, {.preferred_segment = "decode-3"});
//   auto where = (*cluster)->GetLocation("sess:42:kv:L0");  // READY copies, nearest first
//   auto again = (*cluster)->Get("sess:42:kv:L0");
//
// A plan for a copy on this process's node (node_id) is written and read
// through the local kvd (ipc_name) as ObjectStore does: pages mapped, kernels
// where built. A copy on another node moves over UCX straight between this
// process and that node's kvd (its transfer agent at the node's
// data_address; docs/ARCHITECTURE.md, "The data path between nodes"): Put,
// Get and their batches work for every node; a pointer into another node's
// pages (PayloadPointer) is kUnimplemented.
//
// Safe to call from many threads.
#ifndef NANOKV_CLUSTER_CLIENT_H_
#define NANOKV_CLUSTER_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanokv/object_types.h"
#include "nanokv/status.h"

namespace nanokv {

struct ClusterClientOptions {
  // "host:port" of the masters, tried in turn (a master that does not lead
  // points at the one that does). Empty: $NANOKV_MASTERS, comma separated.
  std::vector<std::string> masters;
  // The cluster's shared token. Empty: $NANOKV_TOKEN_FILE, else none.
  std::string token_file;
  // TLS (PEM files): ca to speak TLS, cert and key to present a certificate.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // The node this process runs on: kvd's master.node_id there. Empty:
  // $NANOKV_NODE_ID, else the host name (kvd's default too).
  std::string node_id;
  // The local kvd, for the local path. Empty: $NANOKV_IPC_NAME, else "nanokv".
  std::string ipc_name;
  std::string backend;  // the local kvd's backend; empty: $NANOKV_BACKEND, else auto
  uint32_t request_timeout_ms = 10'000;
};

struct WriteOptions {
  // "" (the master chooses), "<node>", or "<node>/<device>" (kvd's ordinal).
  std::string preferred_segment;
  // Copies on distinct nodes, best effort: GetLocation says how many exist.
  uint32_t replica_num = 1;
};

// One copy's plan: the node that made it, and the plan itself.
struct ReplicaPlan {
  std::string node_id;
  std::string data_address;  // that node's data path (cross-node transfers)
  ObjectPlan plan;
  bool local = false;        // on this process's node
};

struct ClusterPlan {
  std::string key;
  uint64_t write_id = 0;  // what Commit and Revoke name
  std::vector<ReplicaPlan> replicas;
};

struct Replica {
  std::string node_id;
  std::string data_address;
  int device = 0;  // kvd's ordinal on that node
  std::string device_uuid;
  uint32_t epoch = 0;
  bool local = false;
};

// Where an object's READY copies are, nearest first: this process's device
// (none yet: a client has no device of its own), this node, other nodes.
struct ObjectLocation {
  std::string key;
  uint64_t bytes_total = 0;
  std::vector<Replica> replicas;
};

struct WriteRequest {
  std::string key;
  uint64_t bytes_total = 0;
  WriteOptions options;
};

struct PutRequest {
  std::string key;
  std::span<const std::byte> bytes;
  WriteOptions options;
};

// kvctl cluster: what the master says of itself and its nodes.
struct ClusterDeviceStatus {
  int device = 0;
  std::string uuid;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  double high_watermark = 0;
  double low_watermark = 0;
  uint64_t objects = 0;
};

struct ClusterNodeStatus {
  std::string node_id;
  std::string data_address;
  std::string peer;
  std::string state;  // alive, registering, dead
  uint64_t objects = 0;
  uint64_t heartbeat_age_ms = 0;
  uint64_t session_age_ms = 0;
  std::vector<ClusterDeviceStatus> devices;
  std::string data_mode;  // its transfer agent's: "staging", "direct", "" (none)
};

struct ClusterStatus {
  std::string master;  // the address that answered
  std::string master_id;
  uint64_t term = 0;   // 0: the master that answered does not lead
  std::string leader_id;
  std::string leader_address;
  uint64_t objects = 0;
  uint64_t writes_in_progress = 0;
  uint64_t index_bytes = 0;
  uint64_t uptime_ms = 0;
  bool rebuilding = false;
  std::vector<ClusterNodeStatus> nodes;
};

class ClusterClient {
 public:
  // kInvalidArgument for no masters or unreadable token/TLS files. Nothing is
  // asked of a master yet (Ping does).
  static Result<std::unique_ptr<ClusterClient>> Connect(const ClusterClientOptions& options);
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;
  ~ClusterClient();

  // The plan API. OpenForWrite: kAlreadyExists for a READY key,
  // kFailedPrecondition while it is being written or removed, kUnavailable
  // when no live node can take it.
  Result<ClusterPlan> OpenForWrite(std::string_view key, uint64_t bytes_total, const WriteOptions& options = {});
  // published_on_device as in ObjectStore::Commit. The write stands once one
  // copy is READY.
  Status Commit(const ClusterPlan& plan, bool published_on_device = false);
  Status Revoke(const ClusterPlan& plan);
  // From every node that holds a copy (kvctl evict of a key, too).
  Status Remove(std::string_view key);
  Result<ObjectLocation> GetLocation(std::string_view key);

  // A plan's payload and header in this process (contiguous, for kernels):
  // for a copy on this node; kUnimplemented for another node's.
  Result<void*> PayloadPointer(const ReplicaPlan& replica);
  Result<void*> HeaderPointer(const ReplicaPlan& replica);

  // Host bytes: open, copy into every copy (another node's through its
  // agent), commit; a failed copy revokes the write (nothing left behind).
  // Get copies out of the nearest copy, the next one when a node is
  // unavailable. kUnavailable: the node went away or fell silent for
  // request_timeout_ms; kFailedPrecondition: the node has no data path
  // (master.data_address).
  Status Put(std::string_view key, std::span<const std::byte> bytes, const WriteOptions& options = {});
  Result<std::vector<std::byte>> Get(std::string_view key);
  // The same into the caller's memory (no allocation, no extra copy): the
  // object's size; kInvalidArgument when it is over out.size() (nothing
  // copied).
  Result<uint64_t> GetInto(std::string_view key, std::span<std::byte> out);

  // Device bytes (an engine's KV, `bytes` at `src`; this process's backend,
  // ClusterClientOptions::backend). To and from another node chunk by
  // chunk through pinned host buffers, the device copy of one chunk
  // overlapping the network of the others; a copy on this node through
  // the local store (ObjectStore::GetToDevice; a put stages it whole).
  // GetToDevice answers the object's size; kInvalidArgument when it is
  // over `capacity` (nothing copied).
  Status PutFromDevice(std::string_view key, const void* src, uint64_t bytes, const WriteOptions& options = {});
  Result<uint64_t> GetToDevice(std::string_view key, void* dst, uint64_t capacity);
  // The backend those device pointers belong to ("cuda", "hip", "host"),
  // opened on first use: what a binding checks its buffers against.
  Result<std::string> DeviceBackendName();

  // Batches: one request to the master each, one result per item in order.
  std::vector<Result<ClusterPlan>> BatchOpenForWrite(const std::vector<WriteRequest>& requests);
  std::vector<Status> BatchCommit(const std::vector<ClusterPlan>& plans, bool published_on_device = false);
  std::vector<Status> BatchRevoke(const std::vector<ClusterPlan>& plans);
  std::vector<Status> BatchRemove(const std::vector<std::string>& keys);
  std::vector<Result<ObjectLocation>> BatchGetLocation(const std::vector<std::string>& keys);
  std::vector<Status> BatchPut(const std::vector<PutRequest>& requests);
  std::vector<Result<std::vector<std::byte>>> BatchGet(const std::vector<std::string>& keys);

  // Operators (kvctl cluster, kvctl objects --cluster).
  Result<ClusterStatus> Cluster();
  Result<std::vector<ObjectLocation>> ListObjects();
  // An empty call: the master answers (and whether it leads: term != 0).
  Result<uint64_t> Ping();

  const std::string& node_id() const;

  class Impl;

 private:
  explicit ClusterClient(std::unique_ptr<Impl> impl);
  void ClosePlans(const std::vector<ClusterPlan>& plans);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanokv

#endif  // NANOKV_CLUSTER_CLIENT_H_
