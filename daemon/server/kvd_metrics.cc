#include "daemon/server/kvd_metrics.h"

#include <chrono>

#include "ipc/proto/nanokv.pb.h"

namespace nanokv::kvd {
namespace {

using ops::Labels;
using ops::MetricType;

// The requests kvd takes, by the label their latency and refusals carry.
struct RequestKind {
  int body_case;
  const char* name;
};
constexpr RequestKind kRequestKinds[] = {
    {wire::Message::kAttach, "attach"},
    {wire::Message::kGrant, "grant"},
    {wire::Message::kShare, "share"},
    {wire::Message::kReturnPages, "return"},
    {wire::Message::kSetLimit, "set_limit"},
    {wire::Message::kDetach, "detach"},
    {wire::Message::kAdopt, "adopt"},
    {wire::Message::kForgetDone, "forget_done"},
    {wire::Message::kReserveReport, "reserve_report"},
    {wire::Message::kRingSetup, "ring_setup"},
    {wire::Message::kEvict, "evict"},
    {wire::Message::kObjectOpen, "object_open"},
    {wire::Message::kObjectCommit, "object_commit"},
    {wire::Message::kObjectRevoke, "object_revoke"},
    {wire::Message::kObjectRemove, "object_remove"},
    {wire::Message::kObjectLocate, "object_locate"},
    {wire::Message::kObjectLease, "object_lease"},
    {wire::Message::kObjectPin, "object_pin"},
    {wire::Message::kObjectPages, "object_pages"},
    {wire::Message::kObjectList, "object_list"},
    {wire::Message::kObjectEvict, "object_evict"},
    {wire::Message::kObjectInfo, "object_info"},
    {wire::Message::kObjectLeaseBatch, "object_lease_batch"},
    {wire::Message::kObjectReleaseBatch, "object_release_batch"},
    {wire::Message::kObjectSlab, "object_slab"},
    {wire::Message::kObjectSlabRelease, "object_slab_release"},
    {wire::Message::kObjectReadTable, "object_read_table"},
};

std::string Ordinal(int device) { return std::to_string(device); }

}  // namespace

KvdMetrics::KvdMetrics(ops::Registry& registry, std::string ipc_name, const std::vector<int>& devices,
                       bool object_store, bool host_tier)
    : ipc_name_(std::move(ipc_name)) {
  kind_by_case_.fill(0xff);
  for (const RequestKind& kind : kRequestKinds) {
    kind_by_case_[static_cast<size_t>(kind.body_case)] = static_cast<uint8_t>(kind_names_.size());
    kind_names_.push_back(kind.name);
  }
  share_kind_ = static_cast<int>(KindIndex(wire::Message::kShare));
  other_ = kind_names_.size();
  kind_names_.push_back("other");  // undecodable, or nothing kvd takes
  for (const std::string& kind : kind_names_) {
    latency_.push_back(&registry.AddHistogram(
        "nanokv_request_duration_seconds",
        "Time kvd's server thread spent on a request, from its datagram to its reply, by request.",
        ops::LatencyBuckets(), {{"request", kind}}));
  }
  refusals_.reset(new std::atomic<uint64_t>[kind_names_.size() * kCodes]);
  for (size_t i = 0; i < kind_names_.size() * kCodes; ++i) refusals_[i].store(0, std::memory_order_relaxed);

  for (int device : devices) {
    if (device < 0 || static_cast<size_t>(device) >= kDeviceSlots) continue;
    const Labels grant{{"device", Ordinal(device)}, {"request", "grant"}};
    const Labels share{{"device", Ordinal(device)}, {"request", "share"}};
    const char* granted_help = "Pages handed to engines, by device and request (grant: new pages; share: "
                               "pages a tenant of the same group holds).";
    granted_[device] = &registry.AddCounter("nanokv_granted_pages_total", granted_help, grant);
    shared_[device] = &registry.AddCounter("nanokv_granted_pages_total", granted_help, share);
    returned_[device] = &registry.AddCounter("nanokv_returned_pages_total",
                                             "Pages engines returned with a return request, by device.",
                                             {{"device", Ordinal(device)}});
  }
  if (object_store) {
    for (int device : devices) {
      if (device < 0 || static_cast<size_t>(device) >= kDeviceSlots) continue;
      const Labels on{{"device", Ordinal(device)}};
      StoreSeries& s = store_[device];
      s.pages = &registry.AddGauge("nanokv_object_store_pages", "Pages the object store holds, by device.", on);
      s.capacity = &registry.AddGauge("nanokv_object_store_capacity_bytes",
                                      "Payload bytes the object store's pages hold, by device.", on);
      s.used = &registry.AddGauge("nanokv_object_store_used_bytes",
                                  "Payload bytes allocated to live objects, by device.", on);
      s.objects = &registry.AddGauge("nanokv_object_store_objects",
                                     "Live objects (reserved, writing or ready), by device.", on);
      s.evictions = &registry.AddCounter("nanokv_object_store_evictions_total",
                                         "Objects evicted to make room or by kvctl evict --objects, by device.", on);
      s.reclaimed_writes = &registry.AddCounter(
          "nanokv_object_store_reclaimed_writes_total",
          "Writes reclaimed after write_timeout (their producer never committed), by device.", on);
      s.recovered_objects = &registry.AddGauge(
          "nanokv_object_store_recovered_objects",
          "Objects this kvd brought back READY at its start from a crashed kvd's store, by device.", on);
      s.recovered_bytes = &registry.AddGauge("nanokv_object_store_recovered_bytes",
                                             "Their bytes (bytes_total), by device.", on);
      s.reclaimed_at_start = &registry.AddGauge(
          "nanokv_object_store_reclaimed_at_start",
          "The crashed kvd's objects not brought back (writes cut by the crash, held until write_timeout, "
          "and records refused), by device.", on);
      if (host_tier) AddTierSeries(registry, device, s);
    }
    slabs_granted_ = &registry.AddCounter("nanokv_object_store_slabs_granted_total",
                                          "v2 slabs granted to producers (ObjectSlabRequest).");
    slab_objects_ = &registry.AddCounter("nanokv_object_store_slab_objects_total",
                                         "Objects indexed READY from slabs' announce rings.");
    slabs_poisoned_ =
        &registry.AddCounter("nanokv_object_store_slabs_poisoned_total",
                             "Slabs ended because their announce ring broke a rule (a forged or torn record).");
    slabs_expired_ =
        &registry.AddCounter("nanokv_object_store_slabs_expired_total", "Slabs ended by object_store.slab_ttl.");
    slabs_live_ = &registry.AddGauge("nanokv_object_store_slabs", "Slabs granted and not ended.");
  }
  connections_accepted_ = &registry.AddCounter("nanokv_connections_accepted_total",
                                               "Connections to kvd's socket admitted.");
  device_work_calls_ = &registry.AddCounter(
      "nanokv_device_work_calls_total",
      "Copies and fills kvd's own process made on its devices. Each costs the engines on that GPU a "
      "context switch; kvd makes them at start only, none while it serves.");
  connections_shed_ = &registry.AddCounter(
      "nanokv_connections_shed_total",
      "Connections closed at once because kvd was out of file descriptors (raise LimitNOFILE).");
  connections_open_ = &registry.AddGauge("nanokv_connections",
                                         "Connections to kvd's socket open now (engines, object "
                                         "store clients, kvctl).");
  reclaim_notices_ = &registry.AddCounter("nanokv_reclaim_notices_total",
                                          "Reclaim notices sent: a tenant over its limit was asked for pages back.");
  reclaim_pages_ = &registry.AddCounter("nanokv_reclaim_requested_pages_total",
                                        "Pages asked back by reclaim notices.");
  forget_notices_ = &registry.AddCounter(
      "nanokv_forget_notices_total",
      "Forget notices sent: pages recycled to another group, dropped by the group's engines.");
  engines_lost_ = &registry.AddCounter(
      "nanokv_engines_lost_total",
      "Attached engines whose connection ended without a detach (the process died, or kvd dropped it).");
  lost_pages_ = &registry.AddCounter("nanokv_lost_engine_pages_total",
                                     "Pages taken back from engines that went away without a detach.");
  evict_requests_ = &registry.AddCounter("nanokv_evict_requests_total",
                                         "Operator evictions of a tenant's pages (kvctl evict).");
  evict_pages_ = &registry.AddCounter("nanokv_evict_requested_pages_total",
                                      "Pages operator evictions asked tenants for.");
  registry.AddCollector([this](ops::TextWriter& out) { Collect(out); });
}

size_t KvdMetrics::KindIndex(int body_case) const {
  if (body_case < 0 || static_cast<size_t>(body_case) >= kind_by_case_.size()) return other_;
  uint8_t kind = kind_by_case_[static_cast<size_t>(body_case)];
  return kind == 0xff ? other_ : kind;
}

void KvdMetrics::Finish(std::chrono::steady_clock::time_point started) {
  const auto took = std::chrono::steady_clock::now() - started;
  const size_t kind = current_ < 0 ? other_ : static_cast<size_t>(current_);
  latency_[kind]->Observe(std::chrono::duration<double>(took).count());
  current_ = -1;
}

void KvdMetrics::Refused(Code code) {
  if (current_ < 0) return;
  const size_t c = static_cast<size_t>(code) < kCodes ? static_cast<size_t>(code) : kCodes - 1;
  refusals_[static_cast<size_t>(current_) * kCodes + c].fetch_add(1, std::memory_order_relaxed);
}

void KvdMetrics::ConnectionRefused(Code code) {
  const size_t c = static_cast<size_t>(code) < kCodes ? static_cast<size_t>(code) : kCodes - 1;
  connection_refusals_[c].fetch_add(1, std::memory_order_relaxed);
}

void KvdMetrics::PagesGranted(int device, size_t pages) {
  if (device < 0 || static_cast<size_t>(device) >= kDeviceSlots) return;
  ops::Counter* counter = current_ == share_kind_ ? shared_[device] : granted_[device];
  if (counter != nullptr) counter->Add(pages);
}

void KvdMetrics::PagesReturned(int device, size_t pages) {
  if (device < 0 || static_cast<size_t>(device) >= kDeviceSlots || returned_[device] == nullptr) return;
  returned_[device]->Add(pages);
}

void KvdMetrics::PublishServer(size_t connections, uint64_t shed_connections, uint64_t device_work_calls) {
  connections_open_->Set(static_cast<double>(connections));
  connections_shed_->Set(shed_connections);
  device_work_calls_->Set(device_work_calls);
}

void KvdMetrics::PublishObjects(const std::vector<StoreDeviceStats>& stats) {
  for (const StoreDeviceStats& d : stats) {
    if (d.device < 0 || static_cast<size_t>(d.device) >= kDeviceSlots || store_[d.device].pages == nullptr) continue;
    StoreSeries& s = store_[d.device];
    s.pages->Set(d.pages);
    s.capacity->Set(static_cast<double>(d.payload_capacity));
    s.used->Set(static_cast<double>(d.payload_used));
    s.objects->Set(d.objects);
    s.evictions->Set(d.evictions);
    s.reclaimed_writes->Set(d.reclaimed_writes);
    s.recovered_objects->Set(d.recovered_objects);
    s.recovered_bytes->Set(static_cast<double>(d.recovered_bytes));
    s.reclaimed_at_start->Set(d.recovered_writes + d.refused_records);
    if (s.host_capacity == nullptr) continue;
    s.host_capacity->Set(static_cast<double>(d.host_capacity));
    s.host_used->Set(static_cast<double>(d.host_used));
    s.host_objects->Set(d.host_objects);
    s.demotions->Set(d.demotions);
    s.promotions->Set(d.promotions);
    s.host_evictions->Set(d.host_evictions);
    s.gpu_hits->Set(d.gpu_hits);
    s.host_hits->Set(d.host_hits);
  }
}

void KvdMetrics::PublishSlabs(const SlabCounters& slabs) {
  if (slabs_granted_ == nullptr) return;
  slabs_granted_->Set(slabs.granted);
  slab_objects_->Set(slabs.announced);
  slabs_poisoned_->Set(slabs.poisoned);
  slabs_expired_->Set(slabs.expired);
  slabs_live_->Set(static_cast<double>(slabs.live));
}

void KvdMetrics::AddTierSeries(ops::Registry& registry, int device, StoreSeries& s) {
  const Labels on{{"device", Ordinal(device)}};
  s.host_capacity = &registry.AddGauge("nanokv_object_store_host_capacity_bytes",
                                       "Bytes of the host tier under the object store, by device.", on);
  s.host_used =
      &registry.AddGauge("nanokv_object_store_host_used_bytes", "Host tier bytes allocated to objects, by device.", on);
  s.host_objects = &registry.AddGauge("nanokv_object_store_host_objects", "Objects in the host tier, by device.", on);
  s.demotions = &registry.AddCounter("nanokv_object_store_demotions_total",
                                     "Objects moved from the store down into its host tier, by device.", on);
  s.promotions = &registry.AddCounter("nanokv_object_store_promotions_total",
                                      "Objects moved from the host tier back into the store, by device.", on);
  s.host_evictions = &registry.AddCounter("nanokv_object_store_host_evictions_total",
                                          "Objects dropped from a full host tier, by device.", on);
  const char* hits_help = "Gets (lease and locate) that found their object, by device and the tier it was in.";
  s.gpu_hits =
      &registry.AddCounter("nanokv_object_store_hits_total", hits_help, {{"device", Ordinal(device)}, {"tier", "gpu"}});
  s.host_hits = &registry.AddCounter("nanokv_object_store_hits_total", hits_help,
                                     {{"device", Ordinal(device)}, {"tier", "host"}});
}

RequestTimer::RequestTimer(KvdMetrics* metrics) : metrics_(metrics) {
  if (metrics_ == nullptr) return;
  metrics_->current_ = static_cast<int>(metrics_->other_);
  started_ = std::chrono::steady_clock::now();
}

RequestTimer::~RequestTimer() {
  if (metrics_ != nullptr) metrics_->Finish(started_);
}

}  // namespace nanokv::kvd
