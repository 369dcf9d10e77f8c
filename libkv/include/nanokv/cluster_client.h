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
// Three paths, chosen per copy (kvctl cluster and the log say which each
// node takes): a copy on this process's node (node_id) is written and read
// through the local kvd (ipc_name) as ObjectStore does, pages mapped,
// device bytes moved by the kernels GPU to GPU; a copy on another node of
// this host (the node's route names this host_id) the same way through that
// kvd's socket, so device bytes never cross host memory within a host; a
// copy on another host moves over UCX straight between this process and
// that node's kvd (its transfer agent at the node's data_address; device
// bytes through pinned staging; docs/ARCHITECTURE.md, "The data path
// between nodes"). A pointer into, or a view of, a copy on another host is
// kUnimplemented: its bytes move with Put/Get.
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

#include "nanokv/object_store.h"
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
  // What identifies this host (kvd's master.host_id on its nodes). Empty:
  // $NANOKV_HOST_ID, else the kernel's boot id.
  std::string host_id;
  // This process's devices given access to the store pages it maps, so a
  // kernel on any of them reaches them (a producer on GPU 0 writing a copy
  // on GPU 1). Empty: every device of this process's backend.
  std::vector<int> access_devices;
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
  bool same_host = false;    // on another node of this host: through kvd_socket
  std::string kvd_socket;    // that node's kvd, as its route says
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
  bool same_host = false;
  std::string kvd_socket;
  // In the host tier under its device's store: a get of it waits while its
  // kvd moves it back up. Locations list GPU-store copies first.
  bool host_tier = false;
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

// An object's bytes in device memory, for a batch put (a request's KV:
// every layer's K and V).
struct DevicePut {
  std::string key;
  const void* src = nullptr;
  uint64_t bytes = 0;
  WriteOptions options;
};

// Where a batch get lands an object: `capacity` bytes of device memory.
struct DeviceGet {
  std::string key;
  void* dst = nullptr;
  uint64_t capacity = 0;
};

// A stream-ordered put (ClusterClient::PutFromDeviceAsync): its copies were
// enqueued on the caller's stream, READY is published on the device after
// each object's last byte, and the commit to the owner kvds and the master
// follows on the client's own thread once the stream has run past them: the
// caller's thread makes no round trip for it. The sources must stay as they
// are until Wait returns (the destructor waits too).
class PendingPuts {
 public:
  virtual ~PendingPuts() = default;
  // One status per item, once the master answered every commit (or the
  // put failed: a failed item is revoked, nothing of it READY).
  virtual std::vector<Status> Wait() = 0;
  // Whether Wait would answer at once.
  virtual bool Done() const = 0;
  // A cudaEvent_t recorded on the stream after the batch's device work:
  // later work on another stream may wait on it (cudaStreamWaitEvent).
  // nullptr where the copies ran when the call did (no kernels, no stream).
  virtual void* event() const = 0;
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
  uint64_t host_capacity_bytes = 0;  // the host tier under the store (0: none)
  uint64_t host_used_bytes = 0;
  uint64_t host_objects = 0;  // of `objects`, the copies in the host tier
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
  std::string host_id;    // its host, as it registered
  std::string kvd_socket;
  // How this client's bytes reach its copies: "local" (this node's kvd),
  // "host" (another node of this host, through its kvd's socket), "network"
  // (UCX through its data path), "none" (no data path).
  std::string path;
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

  // A request's KV as one batch: one round trip to the master plans every
  // object, the copies on this host are all enqueued on `stream` (the
  // kernels, GPU to GPU) with one wait, those to other hosts pipelined over
  // UCX, and one round trip commits them all. One status per item; a failed
  // item is revoked (nothing of it READY), the others stand. `stream`: a
  // cudaStream_t of a device that reaches the sources (nullptr: each copy
  // picks one, as ObjectStore::PutFromDevice).
  std::vector<Status> BatchPutFromDevice(const std::vector<DevicePut>& items, void* stream = nullptr);
  // Puts through slabs of this node's store (ObjectStore::UseSlabs, issue
  // 34): after it, PutFromDevice and BatchPutFromDevice of an item with one
  // replica, preferred_segment "", this node or "<this node>/<device>", that
  // fits options.payload_bytes, ask neither the master nor kvd: the object
  // goes into this node's store (where the master would have placed it
  // elsewhere too), and the master learns of it from this node's events, as
  // of any object the node holds. Until then a get through the master
  // answers kNotFound (FlushSlabPuts, then the node's next event batch);
  // this node's copy is read locally as soon as kvd has indexed it. The
  // stream-ordered put keeps the plan path.
  Status UseSlabs(int device, const SlabPutOptions& options = SlabPutOptions());
  // The same for "<node>/<device>", a node of this host (this one, or one
  // whose kvd this client reaches through its socket: ClusterNodeStatus'
  // path "host"): puts with preferred_segment "<node>" or "<node>/<device>"
  // go into that node's store through its slabs, and the master learns of
  // them from that node's events. kInvalidArgument without a device,
  // kNotFound for a node the master does not know, kFailedPrecondition for
  // one on another host.
  Status UseSlabsOn(std::string_view segment, const SlabPutOptions& options = SlabPutOptions());
  // Every store this client holds slabs of has indexed every slab put made
  // before (ObjectStore::FlushSlabPuts).
  Status FlushSlabPuts(uint32_t timeout_ms = 1000);

  // The same, stream-ordered: returns once the copies are enqueued on
  // `stream` (PendingPuts says how the commit follows). A reader on the
  // device sees each object READY after its last byte; readers through
  // kvd or the master see it once committed.
  Result<std::unique_ptr<PendingPuts>> PutFromDeviceAsync(const std::vector<DevicePut>& items,
                                                          void* stream = nullptr);
  // Gets into device memory: copies on this node first, with no question
  // to the master (one lease request to the local kvd for the batch), the
  // rest located in one round trip to the master; loads on this host
  // enqueued on `stream` with one wait, those from other hosts over UCX.
  // One result per item: the object's size; kInvalidArgument when it is
  // over the item's capacity (nothing copied).
  std::vector<Result<uint64_t>> BatchGetToDevice(const std::vector<DeviceGet>& items, void* stream = nullptr);

  // A view of a READY object where it lies (ObjectView, nanokv/
  // object_store.h): for a copy on this host, read-only, no copy, under a
  // lease held until the view goes. kFailedPrecondition when every copy
  // is on another host (move its bytes with GetToDevice).
  Result<ObjectView> View(std::string_view key);
  std::vector<Result<ObjectView>> BatchView(const std::vector<std::string>& keys);
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
