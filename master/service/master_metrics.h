// The master's Prometheus series (docs/OPERATIONS.md lists each), on an
// ops::Registry that the master's /metrics server renders.
//
// Two sources, neither of which makes a call wait on a scrape:
//   - the service's calls (MasterService): each call's latency from its
//     arrival to its answer, its result, and for calls of items (open,
//     commit, revoke, remove) each item's result: an open's items are its
//     plans. Relaxed atomic adds from gRPC's threads.
//   - ClusterMaster::Cluster(), taken at each scrape on the metrics thread
//     (what `kvctl cluster` shows): leadership and term, the rebuild, the
//     index's size and memory, nodes by state, each node's store.
#ifndef NANOKV_MASTER_SERVICE_MASTER_METRICS_H_
#define NANOKV_MASTER_SERVICE_MASTER_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "ipc/proto/master.pb.h"
#include "nanokv/status.h"
#include "ops/metrics.h"

namespace nanokv::master {

class ClusterMaster;

enum class MasterCall : uint8_t { kOpen, kCommit, kRevoke, kRemove, kLocate, kList, kCluster, kPing, kHello };
inline constexpr size_t kMasterCalls = 9;
const char* MasterCallName(MasterCall call);

class MasterMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers every series on `registry`; both `registry` and `master` must
  // outlive this object, and the registry be rendered only while it lives.
  MasterMetrics(ops::Registry& registry, const ClusterMaster& master);
  MasterMetrics(const MasterMetrics&) = delete;
  MasterMetrics& operator=(const MasterMetrics&) = delete;

  // A call answered: `result` is OK, or why it was refused as a whole (not
  // the leader, rebuilding, no token, a batch too large).
  void Answered(MasterCall call, const Status& result, Clock::time_point started);
  // The results of an answered call's items (ItemStatus codes).
  void Items(MasterCall call, const google::protobuf::RepeatedPtrField<v1::ItemStatus>& results);
  void Items(MasterCall call, const google::protobuf::RepeatedPtrField<v1::OpenResult>& results);

 private:
  static constexpr size_t kCodes = static_cast<size_t>(kLastCode) + 1;
  void Count(std::array<std::atomic<uint64_t>, kMasterCalls * kCodes>& table, MasterCall call, uint32_t code);
  void Collect(ops::TextWriter& out) const;

  const ClusterMaster& master_;
  std::array<ops::Histogram*, kMasterCalls> latency_{};
  std::array<std::atomic<uint64_t>, kMasterCalls * kCodes> calls_{};  // by call and result code
  std::array<std::atomic<uint64_t>, kMasterCalls * kCodes> items_{};  // by call and item code
};

}  // namespace nanokv::master

#endif  // NANOKV_MASTER_SERVICE_MASTER_METRICS_H_
