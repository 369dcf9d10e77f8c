#include "master/service/master_metrics.h"

#include <map>
#include <string>

#include "master/service/cluster_master.h"
#include "ops/version.h"

namespace nanokv::master {
namespace {

using ops::MetricType;

constexpr const char* kCallNames[kMasterCalls] = {"open", "commit",  "revoke", "remove", "locate",
                                                  "list", "cluster", "ping",   "hello"};

double Seconds(uint64_t ms) { return static_cast<double>(ms) / 1000.0; }

}  // namespace

const char* MasterCallName(MasterCall call) { return kCallNames[static_cast<size_t>(call)]; }

MasterMetrics::MasterMetrics(ops::Registry& registry, const ClusterMaster& master) : master_(master) {
  for (size_t call = 0; call < kMasterCalls; ++call) {
    latency_[call] = &registry.AddHistogram(
        "nanokv_master_request_duration_seconds",
        "Time from a call's arrival at the master to its answer (an open waits for the nodes that make "
        "its plans), by call.",
        ops::LatencyBuckets(), {{"call", kCallNames[call]}});
  }
  registry.AddCollector([this](ops::TextWriter& out) { Collect(out); });
}

void MasterMetrics::Count(std::array<std::atomic<uint64_t>, kMasterCalls * kCodes>& table, MasterCall call,
                          uint32_t code) {
  // A code this build does not know counts as the last one; the master
  // makes every code it answers, so none is expected.
  const size_t c = code < kCodes ? code : kCodes - 1;
  table[static_cast<size_t>(call) * kCodes + c].fetch_add(1, std::memory_order_relaxed);
}

void MasterMetrics::Answered(MasterCall call, const Status& result, Clock::time_point started) {
  latency_[static_cast<size_t>(call)]->Observe(std::chrono::duration<double>(Clock::now() - started).count());
  Count(calls_, call, static_cast<uint32_t>(result.code()));
}

void MasterMetrics::Items(MasterCall call, const google::protobuf::RepeatedPtrField<v1::ItemStatus>& results) {
  for (const v1::ItemStatus& item : results) Count(items_, call, item.code());
}

void MasterMetrics::Items(MasterCall call, const google::protobuf::RepeatedPtrField<v1::OpenResult>& results) {
  for (const v1::OpenResult& item : results) Count(items_, call, item.status().code());
}

void MasterMetrics::Collect(ops::TextWriter& out) const {
  auto write_table = [&](const char* name, const char* help, const auto& table) {
    out.Family(name, help, MetricType::kCounter);
    for (size_t call = 0; call < kMasterCalls; ++call) {
      for (size_t code = 0; code < kCodes; ++code) {
        const uint64_t n = table[call * kCodes + code].load(std::memory_order_relaxed);
        if (n != 0) out.Sample(name, {{"call", kCallNames[call]}, {"code", CodeName(static_cast<Code>(code))}}, n);
      }
    }
  };
  write_table("nanokv_master_requests_total",
              "Calls answered, by call and result (OK, or why the whole call was refused: Unavailable when "
              "this master does not lead or is rebuilding its index, PermissionDenied without the token, ...).",
              calls_);
  write_table("nanokv_master_items_total",
              "Items of the calls answered, by call and the item's result: call=\"open\" counts plans "
              "(OK: placed; Unavailable: no live node's store took it; AlreadyExists: the key is READY; "
              "FailedPrecondition: the key is being written).",
              items_);

  const v1::ClusterReply cluster = master_.Cluster();
  const bool leads = master_.Ping().leader();
  const ops::BuildInfo& build = ops::Build();
  out.Family("nanokv_master_info", "The master's version, commit and id; always 1.", MetricType::kGauge);
  out.Sample("nanokv_master_info",
             {{"version", build.version}, {"commit", build.commit}, {"id", cluster.master_id()}}, uint64_t{1});
  out.Family("nanokv_master_leader", "1 while this master leads (serves calls, holds the index), else 0.",
             MetricType::kGauge);
  out.Sample("nanokv_master_leader", {}, uint64_t{leads ? 1u : 0u});
  out.Family("nanokv_master_term",
             "The term this master leads at (0 while it does not lead); a new leader's is always higher.",
             MetricType::kGauge);
  out.Sample("nanokv_master_term", {}, cluster.term());
  out.Family("nanokv_master_rebuilding",
             "1 while the leader rebuilds its index from the nodes' registrations (object calls answer "
             "Unavailable), else 0.",
             MetricType::kGauge);
  out.Sample("nanokv_master_rebuilding", {}, uint64_t{cluster.rebuilding() ? 1u : 0u});
  out.Family("nanokv_master_index_objects", "Objects the index holds (READY on some live node).",
             MetricType::kGauge);
  out.Sample("nanokv_master_index_objects", {}, cluster.objects());
  out.Family("nanokv_master_index_bytes", "Memory of the index itself (keys, copies, tables).", MetricType::kGauge);
  out.Sample("nanokv_master_index_bytes", {}, cluster.index_bytes());
  out.Family("nanokv_master_writes_in_progress", "Writes planned and not yet committed or revoked.",
             MetricType::kGauge);
  out.Sample("nanokv_master_writes_in_progress", {}, cluster.writes_in_progress());
  out.Family("nanokv_master_uptime_seconds", "Seconds since this master started.", MetricType::kGauge);
  out.Sample("nanokv_master_uptime_seconds", {}, Seconds(cluster.uptime_ms()));

  std::map<std::string, uint64_t> by_state{{"alive", 0}, {"registering", 0}, {"dead", 0}};
  for (const v1::NodeStatus& node : cluster.nodes()) ++by_state[node.state()];
  out.Family("nanokv_master_nodes", "Nodes the master knows, by state (alive, registering, dead).",
             MetricType::kGauge);
  for (const auto& [state, n] : by_state) out.Sample("nanokv_master_nodes", {{"state", state}}, n);

  out.Family("nanokv_master_node_objects", "READY copies the index holds on each node.", MetricType::kGauge);
  for (const v1::NodeStatus& node : cluster.nodes()) {
    out.Sample("nanokv_master_node_objects", {{"node", node.node_id()}, {"state", node.state()}}, node.objects());
  }
  out.Family("nanokv_master_node_heartbeat_age_seconds",
             "Seconds since each node's last message (its lease ends at the master's lease_ttl).",
             MetricType::kGauge);
  for (const v1::NodeStatus& node : cluster.nodes()) {
    out.Sample("nanokv_master_node_heartbeat_age_seconds", {{"node", node.node_id()}, {"state", node.state()}},
               Seconds(node.heartbeat_age_ms()));
  }
  out.Family("nanokv_master_node_store_capacity_bytes",
             "Object store payload space of each node's device, as the node last reported.", MetricType::kGauge);
  for (const v1::NodeStatus& node : cluster.nodes()) {
    for (const v1::DeviceStatus& d : node.devices()) {
      out.Sample("nanokv_master_node_store_capacity_bytes",
                 {{"node", node.node_id()}, {"device", std::to_string(d.device())}}, d.capacity_bytes());
    }
  }
  out.Family("nanokv_master_node_store_used_bytes",
             "Object store payload bytes in use on each node's device: as the node last reported, plus "
             "what the master planned there since.",
             MetricType::kGauge);
  for (const v1::NodeStatus& node : cluster.nodes()) {
    for (const v1::DeviceStatus& d : node.devices()) {
      out.Sample("nanokv_master_node_store_used_bytes",
                 {{"node", node.node_id()}, {"device", std::to_string(d.device())}}, d.used_bytes());
    }
  }
}

}  // namespace nanokv::master
