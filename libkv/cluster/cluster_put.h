// One batch put through the master (ClusterClient's Put, PutFromDevice and
// their batches, the stream-ordered put): every item opened in one round
// trip; the copies on this host written through their kvd's store (device
// bytes by the kernels, enqueued on the caller's stream); then, once that
// work has run, the copies to other hosts over UCX, and one round trip that
// commits what was written and one that revokes what was not.
#ifndef NANOKV_LIBKV_CLUSTER_CLUSTER_PUT_H_
#define NANOKV_LIBKV_CLUSTER_CLUSTER_PUT_H_

#include <span>
#include <vector>

#include "libkv/cluster/cluster_client_impl.h"
#include "libkv/cluster/remote_transfer.h"
#include "nanokv/cluster_client.h"

namespace nanokv::cluster {

// Whether `bytes` at `at` are device memory `backend` reaches (its first and
// last byte read back): checked before a transfer to another host starts,
// so memory no device reaches is refused with nothing moved and no plan or
// read lease taken there. Two one-byte copies against a transfer of
// milliseconds.
Status CheckDeviceRange(gpu::Backend& backend, const void* at, uint64_t bytes);

// A copy on a node that registered without a data path (no
// master.data_address): its bytes cannot move from another host.
Status NoDataPath(const std::string& key, const std::string& node);

// Whether a copy's bytes move through a kvd of this host (its store).
inline bool OnThisHost(const ReplicaPlan& replica) { return replica.local || replica.same_host; }
inline bool OnThisHost(const Replica& replica) { return replica.local || replica.same_host; }

class PutBatch {
 public:
  // `sources[i]` holds item i's bytes (host, or device memory of a backend).
  PutBatch(ClusterClient& client, ClusterClient::Impl& impl, std::vector<WriteRequest> opens,
           std::vector<PutBytes> sources);

  // Opens every item and starts the copies on this host: host bytes copied
  // before it returns, device bytes enqueued on `stream` (nullptr: each
  // copy waits for itself). A large batch is opened in chunks that double
  // (cluster_put.cc says why), the copies of one enqueued while the next is
  // opened. The caller lets `stream` run past them (wait, or an event)
  // before Finish, which commits every item in one round trip: a producer
  // that dies before it leaves nothing READY.
  void Start(void* stream);
  // Copies to other hosts, then commits each item whose every copy was
  // written and revokes the others. One status per item. `device_work`:
  // how Start's work on the stream ended (its fault fails every item).
  std::vector<Status> Finish(const Status& device_work = Status::OK());

 private:
  // `items`, opened: their copies on this host.
  void WriteOnThisHost(std::span<const size_t> items, void* stream);

  ClusterClient& client_;
  ClusterClient::Impl& impl_;
  const std::vector<WriteRequest> opens_;
  const std::vector<PutBytes> sources_;
  std::vector<Result<ClusterPlan>> plans_;
  std::vector<Status> copied_;  // per item: its copies so far
  bool device_ = false;         // device sources: READY published on the device
};

}  // namespace nanokv::cluster

#endif  // NANOKV_LIBKV_CLUSTER_CLUSTER_PUT_H_
