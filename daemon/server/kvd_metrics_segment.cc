// KvdMetrics' collector, run at each scrape on the metrics thread: the
// refusal counts (written only where non-zero) and every series read from
// the /dev/shm segment kvd publishes (the figures kvctl shows).
#include <chrono>

#include "daemon/server/kvd_metrics.h"
#include "ipc/segment/segment_reader.h"
#include "ops/version.h"

namespace nanokv::kvd {
namespace {

using ops::Labels;
using ops::MetricType;

std::string Ordinal(int device) { return std::to_string(device); }

void DeviceFamily(ops::TextWriter& out, const ipc::Segment& s, const char* name, const char* help,
                  uint64_t ipc::DeviceRow::*field) {
  out.Family(name, help, MetricType::kGauge);
  for (uint32_t d = 0; d < s.header.device_count; ++d) {
    out.Sample(name, {{"device", Ordinal(s.devices[d].device)}}, s.devices[d].*field);
  }
}

void TenantFamilies(ops::TextWriter& out, const ipc::Segment& s) {
  auto labels = [](const ipc::TenantRow& t) {
    return Labels{{"tenant", std::string(ipc::ReadString(t.name))}, {"group", std::string(ipc::ReadString(t.group))}};
  };
  out.Family("nanokv_tenants", "Tenants attached to kvd (engines, and kvd's own object store).", MetricType::kGauge);
  out.Sample("nanokv_tenants", {}, uint64_t{s.header.tenant_count});
  out.Family("nanokv_tenant_used_bytes", "Bytes of pages a tenant holds, all devices.", MetricType::kGauge);
  for (uint32_t i = 0; i < s.header.tenant_count; ++i) {
    out.Sample("nanokv_tenant_used_bytes", labels(s.tenants[i]), s.tenants[i].used_bytes);
  }
  out.Family("nanokv_tenant_limit_bytes", "A tenant's limit in bytes.", MetricType::kGauge);
  for (uint32_t i = 0; i < s.header.tenant_count; ++i) {
    out.Sample("nanokv_tenant_limit_bytes", labels(s.tenants[i]), s.tenants[i].limit_bytes);
  }
  out.Family("nanokv_tenant_used_pages", "Pages a tenant holds, by device.", MetricType::kGauge);
  for (uint32_t i = 0; i < s.header.tenant_count; ++i) {
    for (uint32_t d = 0; d < s.header.device_count; ++d) {
      Labels on = labels(s.tenants[i]);
      on.emplace_back("device", Ordinal(s.devices[d].device));
      out.Sample("nanokv_tenant_used_pages", on, uint64_t{s.tenants[i].used_pages[d]});
    }
  }
  out.Family("nanokv_tenant_reclaiming",
             "1 while a tenant is over its limit: asked for pages back, granted none.", MetricType::kGauge);
  for (uint32_t i = 0; i < s.header.tenant_count; ++i) {
    const bool reclaiming = s.tenants[i].state == static_cast<uint32_t>(ipc::TenantState::kReclaiming);
    out.Sample("nanokv_tenant_reclaiming", labels(s.tenants[i]), uint64_t{reclaiming ? 1u : 0u});
  }
}

void InstanceFamilies(ops::TextWriter& out, const ipc::Segment& s) {
  out.Family("nanokv_instance_state", "1 for the state each engine under instances: is in now.",
             MetricType::kGauge);
  for (uint32_t i = 0; i < s.header.instance_count; ++i) {
    const char* state = ipc::InstanceStateName(static_cast<ipc::InstanceState>(s.instances[i].state));
    out.Sample("nanokv_instance_state",
               {{"instance", std::string(ipc::ReadString(s.instances[i].name))},
                {"state", state != nullptr ? state : "unknown"}},
               uint64_t{1});
  }
  out.Family("nanokv_instance_restarts", "Restarts in a row of each engine under instances: (0 after a minute up).",
             MetricType::kGauge);
  for (uint32_t i = 0; i < s.header.instance_count; ++i) {
    out.Sample("nanokv_instance_restarts", {{"instance", std::string(ipc::ReadString(s.instances[i].name))}},
               uint64_t{s.instances[i].restarts});
  }
}

}  // namespace

void KvdMetrics::Collect(ops::TextWriter& out) const {
  out.Family("nanokv_refusals_total", "Requests kvd answered with an error, by request and error code.",
             MetricType::kCounter);
  for (size_t kind = 0; kind < kind_names_.size(); ++kind) {
    for (size_t code = 0; code < kCodes; ++code) {
      const uint64_t n = refusals_[kind * kCodes + code].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.Sample("nanokv_refusals_total", {{"request", kind_names_[kind]}, {"code", CodeName(static_cast<Code>(code))}}, n);
    }
  }
  out.Family("nanokv_connections_refused_total",
             "Connections refused at admission, by code (PermissionDenied: the peer is not allowed; "
             "ResourceExhausted: max_connections or max_connections_per_process).",
             MetricType::kCounter);
  for (size_t code = 0; code < kCodes; ++code) {
    const uint64_t n = connection_refusals_[code].load(std::memory_order_relaxed);
    if (n != 0) out.Sample("nanokv_connections_refused_total", {{"code", CodeName(static_cast<Code>(code))}}, n);
  }

  auto snapshot = ipc::ReadSegment(ipc_name_);
  const ops::BuildInfo& build = ops::Build();
  out.Family("nanokv_kvd_info", "kvd's version, commit, IPC name and backend; always 1.", MetricType::kGauge);
  out.Sample("nanokv_kvd_info",
             {{"version", build.version},
              {"commit", build.commit},
              {"ipc_name", ipc_name_},
              {"backend", snapshot.ok() ? std::string(ipc::ReadString(snapshot->segment.header.backend)) : ""}},
             uint64_t{1});
  out.Family("nanokv_segment_up",
             "1 when this scrape read kvd's /dev/shm segment; 0 when it could not (the series from it are "
             "missing then).",
             MetricType::kGauge);
  out.Sample("nanokv_segment_up", {}, uint64_t{snapshot.ok() ? 1u : 0u});
  if (!snapshot.ok()) return;
  const ipc::Segment& s = snapshot->segment;

  out.Family("nanokv_start_time_seconds", "When kvd started, in seconds since the epoch.", MetricType::kGauge);
  out.Sample("nanokv_start_time_seconds", {}, static_cast<double>(s.header.start_unix_ns) / 1e9);
  const auto now_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  out.Family("nanokv_segment_age_seconds",
             "Seconds since kvd last published its state. kvd publishes at least once a second: much more "
             "means its server thread is stuck.",
             MetricType::kGauge);
  out.Sample("nanokv_segment_age_seconds", {},
             now_ns > s.header.update_unix_ns ? static_cast<double>(now_ns - s.header.update_unix_ns) / 1e9 : 0.0);
  out.Family("nanokv_segment_publishes_total", "Times kvd published its state to /dev/shm.", MetricType::kCounter);
  out.Sample("nanokv_segment_publishes_total", {}, s.header.publish_count);
  out.Family("nanokv_page_size_bytes", "The size of one page.", MetricType::kGauge);
  out.Sample("nanokv_page_size_bytes", {}, s.header.page_bytes);

  out.Family("nanokv_device_memory_bytes", "The device's memory, as its driver reports it.", MetricType::kGauge);
  for (uint32_t d = 0; d < s.header.device_count; ++d) {
    out.Sample("nanokv_device_memory_bytes",
               {{"device", Ordinal(s.devices[d].device)}, {"name", std::string(ipc::ReadString(s.devices[d].name))}},
               s.devices[d].device_bytes);
  }
  DeviceFamily(out, s, "nanokv_device_capacity_pages", "Pages kvd may create on the device (capacity).",
               &ipc::DeviceRow::capacity_pages);
  DeviceFamily(out, s, "nanokv_device_created_pages", "Pages kvd has created on the device.",
               &ipc::DeviceRow::created_pages);
  DeviceFamily(out, s, "nanokv_device_free_pages", "Created pages no tenant holds.", &ipc::DeviceRow::free_pages);
  DeviceFamily(out, s, "nanokv_device_granted_pages",
               "Created pages tenants hold (free + granted = created), the object store's included.",
               &ipc::DeviceRow::granted_pages);
  DeviceFamily(out, s, "nanokv_device_reserve_pages", "Pages kvd keeps created ahead of demand.",
               &ipc::DeviceRow::reserve_pages);
  out.Family("nanokv_device_held_after_recycle_pages",
             "Old pages recycled away that engines told to forget them still hold: counted against the "
             "capacity until they say they dropped them or detach.",
             MetricType::kGauge);
  for (uint32_t d = 0; d < s.header.device_count; ++d) {
    out.Sample("nanokv_device_held_after_recycle_pages", {{"device", Ordinal(s.devices[d].device)}},
               uint64_t{s.devices[d].held_after_recycle_pages});
  }
  TenantFamilies(out, s);
  InstanceFamilies(out, s);
}

}  // namespace nanokv::kvd
