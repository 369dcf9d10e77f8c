// ClusterClient's end of the data path between nodes: its own UCP worker,
// one endpoint per node it talks to (kvd's transfer agent at the node's
// data_address, daemon/transfer/), a hello with a key made from the cluster token first.
// The bytes go straight between this process and the owner kvd: one hop
// (through the local kvd would add a copy and a process hop).
//
// Put: the plan's chunks from the caller's host bytes (rendezvous: UCX reads
// them in place), the agent's chunk size and depth as its hello said; the
// agent publishes READY after the last byte, the caller commits through the
// master as for a local plan. Get: the chunks land straight in the result.
// A batch is pipelined over one endpoint per node.
//
// Device memory (a put from it, a get into it) goes chunk by chunk through
// pinned host buffers of this object's own, with the caller's backend:
// the device copy of one chunk overlaps the network of the others.
//
// Threads: every call takes the one lock and progresses the worker itself
// (sleeping on its event fd); no thread of its own.
#ifndef NANOKV_LIBKV_CLUSTER_REMOTE_TRANSFER_H_
#define NANOKV_LIBKV_CLUSTER_REMOTE_TRANSFER_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanokv/object_types.h"
#include "nanokv/status.h"

namespace nanokv {

namespace gpu {
class Backend;
}

namespace cluster {

// A put's bytes: plan.bytes_total of them in host memory at `host`, or at
// `device`, memory of `backend` (host unused).
struct PutBytes {
  std::span<const std::byte> host;
  const void* device = nullptr;
  gpu::Backend* backend = nullptr;
};

// Where a get lands an object: `capacity` bytes of host memory at `host`,
// or of `backend`'s device memory at `device`.
struct GetLanding {
  std::byte* host = nullptr;
  void* device = nullptr;
  gpu::Backend* backend = nullptr;
  uint64_t capacity = 0;
};

struct RemotePut {
  std::string node_id;
  std::string data_address;
  ObjectPlan plan;
  PutBytes bytes;
};

struct RemoteGet {
  std::string node_id;
  std::string data_address;
  std::string key;
};

struct RemoteGetInto {
  RemoteGet from;
  GetLanding to;
};

// A get refused for room: the object's `size` against the `capacity` given.
Status NoRoom(std::string_view key, uint64_t size, uint64_t capacity);

class RemoteTransfers {
 public:
  // `token`: the cluster's ("" none). `timeout`: a transfer with no progress
  // for this long fails kUnavailable.
  RemoteTransfers(std::string token, std::chrono::milliseconds timeout);
  ~RemoteTransfers();
  RemoteTransfers(const RemoteTransfers&) = delete;
  RemoteTransfers& operator=(const RemoteTransfers&) = delete;

  // One status per put, in order: OK once the agent says the object is
  // whole and READY there. kUnavailable when the node went away or fell
  // silent; the agent's own refusals as it gave them.
  std::vector<Status> Put(const std::vector<RemotePut>& puts);
  // One result per get, in order.
  std::vector<Result<std::vector<std::byte>>> Get(const std::vector<RemoteGet>& gets);
  // One result per get, in order: the object's size; kInvalidArgument when
  // it is over the capacity (nothing lands then).
  std::vector<Result<uint64_t>> GetInto(const std::vector<RemoteGetInto>& gets);
  // "staging" or "direct", as the node's agent said in its hello ("" before one).
  std::string ModeOf(const std::string& data_address);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cluster
}  // namespace nanokv

#endif  // NANOKV_LIBKV_CLUSTER_REMOTE_TRANSFER_H_
