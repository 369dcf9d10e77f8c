#include "kvctl/views.h"

#include "kvctl/table.h"
#include "base/human_size.h"

namespace nanokv::kvctl {
namespace {

Tint TenantTint(const ipc::TenantRow& row, bool kvd_alive) {
  if (!kvd_alive) return Tint::kBad;
  if (TenantReclaiming(row)) return Tint::kWarn;
  if (row.state == static_cast<uint32_t>(ipc::TenantState::kAttached)) return Tint::kGood;
  return Tint::kDim;
}

void WriteDeviceJson(JsonWriter& json, const ipc::DeviceRow& row) {
  json.BeginObject()
      .Field("device", row.device)
      .Field("name", ipc::ReadString(row.name))
      .Field("page_bytes", row.page_bytes)
      .Field("device_bytes", row.device_bytes)
      .Field("capacity_pages", row.capacity_pages)
      .Field("created_pages", row.created_pages)
      .Field("free_pages", row.free_pages)
      .Field("granted_pages", row.granted_pages)
      .Field("reserve_pages", row.reserve_pages)
      .Field("object_pages", row.object_pages)
      .Field("held_after_recycle_pages", row.held_after_recycle_pages)
      .Field("capacity_bytes", DeviceCapacityBytes(row))
      .Field("used_bytes", DeviceUsedBytes(row));
  json.Key("used_pct").Double(100.0 * Share(DeviceUsedBytes(row), DeviceCapacityBytes(row)));
  json.EndObject();
}

}  // namespace

Tint KvdStateTint(KvdState state) {
  switch (state) {
    case KvdState::kLive:
      return Tint::kGood;
    case KvdState::kHung:
      return Tint::kWarn;
    case KvdState::kStale:
    case KvdState::kUnreadable:
      return Tint::kBad;
  }
  return Tint::kPlain;
}

void WriteKvdHead(JsonWriter& json, const Kvd& kvd) {
  json.Field("ipc", kvd.ipc_name).Field("state", KvdStateName(kvd.state));
  if (!kvd.snapshot) {
    json.Field("error", kvd.error.ToString());
    return;
  }
  const ipc::SegmentHeader& header = kvd.snapshot->segment.header;
  json.Field("pid", header.kvd_pid)
      .Field("backend", ipc::ReadString(header.backend))
      .Field("page_bytes", header.page_bytes)
      .Field("start_unix_ns", header.start_unix_ns)
      .Field("updated_unix_ns", header.update_unix_ns)
      .Field("publish_count", header.publish_count);
}

void WriteKvdJson(JsonWriter& json, const Kvd& kvd) {
  json.BeginObject();
  WriteKvdHead(json, kvd);
  if (kvd.snapshot) {
    const ipc::Segment& segment = kvd.snapshot->segment;
    json.Field("capacity_bytes", CapacityBytes(segment)).Field("used_bytes", UsedBytes(segment));
    json.Key("used_pct").Double(100.0 * Share(UsedBytes(segment), CapacityBytes(segment)));
    json.Field("tenants", segment.header.tenant_count);
    json.Key("tenant_table_full").Bool(segment.header.tenant_count >= ipc::kMaxTenants);
    json.Key("devices").BeginArray();
    for (uint32_t d = 0; d < segment.header.device_count; ++d) WriteDeviceJson(json, segment.devices[d]);
    json.EndArray();
  }
  json.EndObject();
}

namespace {

void WriteTenantJson(JsonWriter& json, const ipc::Segment& segment, const ipc::TenantRow& row,
                     bool kvd_alive) {
  json.BeginObject()
      .Field("name", ipc::ReadString(row.name))
      .Field("id", row.id)
      .Field("pid", row.pid)
      .Field("uid", row.uid)
      .Field("group", ipc::ReadString(row.group))
      .Field("state", TenantStateName(row, kvd_alive))
      .Field("limit_bytes", row.limit_bytes)
      .Field("used_bytes", row.used_bytes)
      .Field("reserve_bytes", row.reserve_bytes);
  json.Key("used_pct").Double(100.0 * Share(row.used_bytes, row.limit_bytes));
  json.Key("devices").BeginArray();
  for (uint32_t d = 0; d < segment.header.device_count; ++d) {
    json.BeginObject()
        .Field("device", segment.devices[d].device)
        .Field("used_pages", row.used_pages[d])
        .Field("used_bytes", uint64_t{row.used_pages[d]} * segment.devices[d].page_bytes)
        .EndObject();
  }
  json.EndArray();
  json.Field("attach_unix_ns", row.attach_unix_ns)
      .Field("last_activity_unix_ns", row.last_activity_unix_ns)
      .EndObject();
}

}  // namespace

void WriteListJson(JsonWriter& json, const std::vector<Kvd>& kvds,
                   const std::vector<ipc::SegmentEntry>& skipped) {
  json.BeginObject().Key("kvds").BeginArray();
  for (const Kvd& kvd : kvds) WriteKvdJson(json, kvd);
  json.EndArray();
  if (!skipped.empty()) {
    json.Key("skipped").BeginArray();
    for (const ipc::SegmentEntry& entry : skipped) {
      json.BeginObject()
          .Field("ipc", entry.ipc_name)
          .Field("owner_uid", static_cast<uint64_t>(entry.owner_uid))
          .Field("error", entry.why.ToString())
          .EndObject();
    }
    json.EndArray();
  }
  json.EndObject();
}

void WriteTenantsJson(JsonWriter& json, const Kvd& kvd, SortKey sort) {
  json.BeginObject();
  WriteKvdHead(json, kvd);
  json.Key("tenants").BeginArray();
  if (kvd.snapshot) {
    const ipc::Segment& segment = kvd.snapshot->segment;
    for (const ipc::TenantRow* row : SortedTenants(segment, sort)) {
      WriteTenantJson(json, segment, *row, kvd.snapshot->kvd_alive);
    }
  }
  json.EndArray().EndObject();
}

std::string ListView(const std::vector<Kvd>& kvds, const ViewOptions& options,
                     const std::vector<ipc::SegmentEntry>& skipped) {
  if (options.json) {
    JsonWriter json;
    WriteListJson(json, kvds, skipped);
    return json.str() + "\n";
  }
  Table table({{"IPC", Align::kLeft, true}, {"PID", Align::kRight}, {"BACKEND"}, {"DEVICES"}, {"CAPACITY", Align::kRight},
               {"USED", Align::kRight}, {"USE%", Align::kRight}, {"TENANTS", Align::kRight},
               {"STATE"}, {"UPDATED"}});
  for (const Kvd& kvd : kvds) {
    Cell state(KvdStateName(kvd.state), KvdStateTint(kvd.state));
    if (!kvd.snapshot) {
      table.AddRow({kvd.ipc_name, "-", "-", "-", "-", "-", "-", "-", state, "-"});
      continue;
    }
    const ipc::Segment& segment = kvd.snapshot->segment;
    const uint64_t capacity = CapacityBytes(segment), used = UsedBytes(segment);
    table.AddRow({kvd.ipc_name, std::to_string(segment.header.kvd_pid),
                  std::string(ipc::ReadString(segment.header.backend)), DeviceList(segment),
                  FormatBytes(capacity), FormatBytes(used),
                  Cell(FormatPercent(used, capacity), TintForShare(Share(used, capacity))),
                  // The segment's table holds no more: the next attach is refused.
                  segment.header.tenant_count >= ipc::kMaxTenants
                      ? Cell(std::to_string(segment.header.tenant_count) + " (full)", Tint::kWarn)
                      : Cell(std::to_string(segment.header.tenant_count)),
                  state,
                  FormatAge(segment.header.update_unix_ns, options.now_unix_ns)});
  }
  return table.Render(options.colour, options.width);
}

std::string DevicesView(const std::vector<Kvd>& kvds, const ViewOptions& options) {
  if (options.json) {
    JsonWriter json;
    json.BeginObject().Key("kvds").BeginArray();
    for (const Kvd& kvd : kvds) {
      json.BeginObject();
      WriteKvdHead(json, kvd);
      json.Key("devices").BeginArray();
      if (kvd.snapshot) {
        const ipc::Segment& segment = kvd.snapshot->segment;
        for (uint32_t d = 0; d < segment.header.device_count; ++d) WriteDeviceJson(json, segment.devices[d]);
      }
      json.EndArray().EndObject();
    }
    json.EndArray().EndObject();
    return json.str() + "\n";
  }
  std::vector<Column> columns = {{"DEV", Align::kRight},      {"NAME", Align::kLeft, true},
                                 {"PAGE", Align::kRight},     {"CAPACITY", Align::kRight},
                                 {"USED", Align::kRight},     {"FREE", Align::kRight},
                                 {"CREATED", Align::kRight},  {"RESERVE", Align::kRight},
                                 {"HELD-AFTER-RECYCLE", Align::kRight}, {"USE%", Align::kRight}};
  if (options.with_ipc) columns.insert(columns.begin(), Column{"IPC", Align::kLeft, true});
  Table table(columns);
  for (const Kvd& kvd : kvds) {
    if (!kvd.snapshot) continue;
    const ipc::Segment& segment = kvd.snapshot->segment;
    for (uint32_t d = 0; d < segment.header.device_count; ++d) {
      const ipc::DeviceRow& row = segment.devices[d];
      const uint64_t capacity = DeviceCapacityBytes(row), used = DeviceUsedBytes(row);
      std::vector<Cell> cells = {std::to_string(row.device),
                                 std::string(ipc::ReadString(row.name)),
                                 FormatBytes(row.page_bytes),
                                 FormatBytes(capacity),
                                 FormatBytes(used),
                                 FormatBytes(capacity > used ? capacity - used : 0),
                                 FormatBytes(row.created_pages * row.page_bytes),
                                 FormatBytes(row.reserve_pages * row.page_bytes),
                                 FormatBytes(uint64_t{row.held_after_recycle_pages} * row.page_bytes),
                                 Cell(FormatPercent(used, capacity), TintForShare(Share(used, capacity)))};
      if (options.with_ipc) cells.insert(cells.begin(), Cell(kvd.ipc_name));
      table.AddRow(std::move(cells));
    }
  }
  return table.Render(options.colour, options.width);
}

std::string TenantsView(const std::vector<Kvd>& kvds, const ViewOptions& options) {
  if (options.json) {
    JsonWriter json;
    if (kvds.size() == 1 && !options.with_ipc) {
      WriteTenantsJson(json, kvds[0], options.sort);
    } else {
      json.BeginObject().Key("kvds").BeginArray();
      for (const Kvd& kvd : kvds) WriteTenantsJson(json, kvd, options.sort);
      json.EndArray().EndObject();
    }
    return json.str() + "\n";
  }
  // RESERVE (of USED, what engines keep mapped ahead of need) only where
  // some engine keeps one: most do not, and an 80-column screen has no
  // room to spare.
  bool any_reserve = false;
  for (const Kvd& kvd : kvds) {
    if (!kvd.snapshot) continue;
    const ipc::Segment& segment = kvd.snapshot->segment;
    for (uint32_t i = 0; i < segment.header.tenant_count; ++i) {
      any_reserve = any_reserve || segment.tenants[i].reserve_bytes != 0;
    }
  }
  std::vector<Column> columns = {{"TENANT", Align::kLeft, true}, {"PID", Align::kRight}, {"GROUP", Align::kLeft, true},
                                 {"DEVICE"}, {"LIMIT", Align::kRight}, {"USED", Align::kRight},
                                 {"USE%", Align::kRight}, {"STATE"}, {"ACTIVE"}};
  const size_t reserve_column = 6;  // after USED
  if (any_reserve) columns.insert(columns.begin() + reserve_column, Column{"RESERVE", Align::kRight});
  if (options.with_ipc) columns.insert(columns.begin(), Column{"IPC", Align::kLeft, true});
  Table table(columns);
  for (const Kvd& kvd : kvds) {
    if (!kvd.snapshot) continue;
    const ipc::Segment& segment = kvd.snapshot->segment;
    const bool alive = kvd.snapshot->kvd_alive;
    for (const ipc::TenantRow* row : SortedTenants(segment, options.sort)) {
      std::vector<Cell> cells = {
          std::string(ipc::ReadString(row->name)),
          std::to_string(row->pid),
          std::string(ipc::ReadString(row->group)),
          TenantDevices(segment, *row),
          FormatBytes(row->limit_bytes),
          FormatBytes(row->used_bytes),
          Cell(FormatPercent(row->used_bytes, row->limit_bytes),
               TintForShare(Share(row->used_bytes, row->limit_bytes))),
          Cell(TenantStateName(*row, alive), TenantTint(*row, alive)),
          FormatAge(row->last_activity_unix_ns, options.now_unix_ns)};
      if (any_reserve) cells.insert(cells.begin() + reserve_column, FormatBytes(row->reserve_bytes));
      if (options.with_ipc) cells.insert(cells.begin(), Cell(kvd.ipc_name));
      table.AddRow(std::move(cells));
    }
  }
  return table.Render(options.colour, options.width);
}

}  // namespace nanokv::kvctl
