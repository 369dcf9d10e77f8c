// kvd's Prometheus series (docs/OPERATIONS.md lists each), on an
// ops::Registry that kvd's /metrics server renders.
//
// Three sources, none of which makes the server thread wait on a scrape:
//   - events on the server thread (requests and their latency, refusals,
//     pages granted and returned, notices, engines lost, connections):
//     relaxed atomic adds, through the calls below; NodeServer makes them
//     only when metrics are on (a null KvdMetrics* otherwise);
//   - figures the server thread copies at each segment publish (at most 1 s
//     old): connections open, the object store's use;
//   - the /dev/shm segment kvd publishes, read at each scrape on the
//     metrics thread (seqlock: the reader retries, the writer never waits):
//     devices, tenants, instances. So /metrics says what kvctl says.
#ifndef NANOKV_DAEMON_SERVER_KVD_METRICS_H_
#define NANOKV_DAEMON_SERVER_KVD_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/objects/object_index.h"
#include "nanokv/status.h"
#include "ops/metrics.h"

namespace nanokv::kvd {

class KvdMetrics {
 public:
  // Registers every series on `registry`, which must outlive this object and
  // be rendered only while it lives. `devices`: kvd's device ordinals;
  // `object_store`: whether kvd runs one (its series exist only then);
  // `host_tier`: whether it has a host tier under it (its tier series then).
  KvdMetrics(ops::Registry& registry, std::string ipc_name, const std::vector<int>& devices, bool object_store,
             bool host_tier = false);
  KvdMetrics(const KvdMetrics&) = delete;
  KvdMetrics& operator=(const KvdMetrics&) = delete;

  // --- The server thread's events. Lock-free, no allocation. ---
  // A refusal (an Error reply) of the request in progress (RequestTimer);
  // errors sent outside a request are not counted here.
  void Refused(Code code);
  void ConnectionAccepted() { connections_accepted_->Add(); }
  // Refused at admission (not allowed, a connection limit).
  void ConnectionRefused(Code code);
  // Pages a grant or share (the request in progress says which) handed out.
  void PagesGranted(int device, size_t pages);
  void PagesReturned(int device, size_t pages);
  void ReclaimNotice(uint32_t pages) {
    reclaim_notices_->Add();
    reclaim_pages_->Add(pages);
  }
  void ForgetNotice() { forget_notices_->Add(); }
  // An attached engine's connection closed without a detach (it died, or
  // kvd dropped it): `pages` came back to the pools.
  void EngineLost(uint64_t pages) {
    engines_lost_->Add();
    lost_pages_->Add(pages);
  }
  void EvictRequested(uint32_t pages) {
    evict_requests_->Add();
    evict_pages_->Add(pages);
  }

  // --- The server thread, at each publish. ---
  // `device_work_calls`: the backend's (Backend::device_work_calls), copied
  // here so the metrics thread never reads a backend that main has freed.
  void PublishServer(size_t connections, uint64_t shed_connections, uint64_t device_work_calls);
  void PublishObjects(const std::vector<StoreDeviceStats>& stats);
  void PublishSlabs(const SlabCounters& slabs);

 private:
  friend class RequestTimer;
  static constexpr size_t kCodes = 16;         // nanokv::Code values, with room
  static constexpr size_t kDeviceSlots = 16;   // ordinals 0..15 (config's range)

  // The index of a request kind (kRequestKinds in the .cc), or other_.
  size_t KindIndex(int body_case) const;
  void Finish(std::chrono::steady_clock::time_point started);
  void Collect(ops::TextWriter& out) const;  // the segment's series, on the metrics thread

  const std::string ipc_name_;
  size_t other_ = 0;                           // the "other" kind's index
  int share_kind_ = -1;                        // share's index: its pages count as shared
  std::array<uint8_t, 128> kind_by_case_{};    // body case -> kind index
  std::vector<std::string> kind_names_;
  std::vector<ops::Histogram*> latency_;       // by kind
  // Refusals by kind and code: atomics of their own, written out only where
  // non-zero (a registry child each would print hundreds of zeros).
  std::unique_ptr<std::atomic<uint64_t>[]> refusals_;  // [kind * kCodes + code]
  std::array<std::atomic<uint64_t>, kCodes> connection_refusals_{};
  std::array<ops::Counter*, kDeviceSlots> granted_{};  // by ordinal: grants
  std::array<ops::Counter*, kDeviceSlots> shared_{};   // by ordinal: shares
  std::array<ops::Counter*, kDeviceSlots> returned_{};
  struct StoreSeries {
    ops::Gauge* pages = nullptr;
    ops::Gauge* capacity = nullptr;
    ops::Gauge* used = nullptr;
    ops::Gauge* objects = nullptr;
    ops::Counter* evictions = nullptr;
    ops::Counter* reclaimed_writes = nullptr;
    ops::Gauge* recovered_objects = nullptr;  // at this kvd's start (a restart's)
    ops::Gauge* recovered_bytes = nullptr;
    ops::Gauge* reclaimed_at_start = nullptr;
    // The host tier under the store (nullptr without one).
    ops::Gauge* host_capacity = nullptr;
    ops::Gauge* host_used = nullptr;
    ops::Gauge* host_objects = nullptr;
    ops::Counter* demotions = nullptr;
    ops::Counter* promotions = nullptr;
    ops::Counter* host_evictions = nullptr;
    ops::Counter* gpu_hits = nullptr;
    ops::Counter* host_hits = nullptr;
  };
  // The host tier's series of device `device` (kvd_metrics.cc).
  static void AddTierSeries(ops::Registry& registry, int device, StoreSeries& s);
  std::array<StoreSeries, kDeviceSlots> store_{};
  // v2 slabs (nullptr without an object store).
  ops::Counter* slabs_granted_ = nullptr;
  ops::Counter* slab_objects_ = nullptr;
  ops::Counter* slabs_poisoned_ = nullptr;
  ops::Counter* slabs_expired_ = nullptr;
  ops::Gauge* slabs_live_ = nullptr;
  ops::Counter* connections_accepted_;
  ops::Counter* connections_shed_;
  ops::Counter* device_work_calls_;
  ops::Gauge* connections_open_;
  ops::Counter* reclaim_notices_;
  ops::Counter* reclaim_pages_;
  ops::Counter* forget_notices_;
  ops::Counter* engines_lost_;
  ops::Counter* lost_pages_;
  ops::Counter* evict_requests_;
  ops::Counter* evict_pages_;
  // The request in progress (server thread only): its kind, -1 between requests.
  int current_ = -1;
};

// Times one request from construction to destruction into kvd's latency
// histogram, under the kind SetKind names (once decoded; "other" if never).
// A null KvdMetrics* (metrics off) makes it do nothing, not even read the clock.
class RequestTimer {
 public:
  explicit RequestTimer(KvdMetrics* metrics);
  ~RequestTimer();
  RequestTimer(const RequestTimer&) = delete;
  RequestTimer& operator=(const RequestTimer&) = delete;
  void SetKind(int body_case) {
    if (metrics_ != nullptr) metrics_->current_ = static_cast<int>(metrics_->KindIndex(body_case));
  }

 private:
  KvdMetrics* metrics_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_SERVER_KVD_METRICS_H_
