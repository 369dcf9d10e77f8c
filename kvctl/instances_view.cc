// `kvctl instances`: a row per engine instance kvd runs from its YAML, as its
// controller last published it (name, pid, state, how it ended, restarts,
// since when). Declared in views.h with the other views.
#include "kvctl/views.h"

namespace nanokv::kvctl {

Tint InstanceTint(const ipc::InstanceRow& row, bool kvd_alive) {
  const std::string state = InstanceStateName(row, kvd_alive);
  if (state == "running") return Tint::kGood;
  if (state == "restarting") return Tint::kWarn;
  if (state == "exited") return row.exit_code == 0 ? Tint::kDim : Tint::kWarn;
  if (state == "failed" || state == "stale") return Tint::kBad;
  return Tint::kPlain;  // starting
}

namespace {

void WriteInstanceJson(JsonWriter& json, const ipc::InstanceRow& row, bool kvd_alive) {
  json.BeginObject()
      .Field("name", ipc::ReadString(row.name))
      .Field("pid", row.pid)
      .Field("state", InstanceStateName(row, kvd_alive));
  // How its last life ended: null while it has not ended yet.
  json.Key("exit_code");
  if (InstanceHasEnded(row)) {
    json.Int(row.exit_code);
  } else {
    json.Null();
  }
  json.Key("signal");
  if (InstanceHasEnded(row) && row.exit_code < 0) {
    json.String(SignalName(-row.exit_code));
  } else {
    json.Null();
  }
  json.Field("restarts", row.restarts).Field("since_unix_ns", row.since_unix_ns).EndObject();
}

}  // namespace

void WriteInstancesJson(JsonWriter& json, const Kvd& kvd) {
  json.BeginObject();
  WriteKvdHead(json, kvd);
  json.Key("instances").BeginArray();
  if (kvd.snapshot) {
    const ipc::Segment& segment = kvd.snapshot->segment;
    for (uint32_t i = 0; i < segment.header.instance_count; ++i) {
      WriteInstanceJson(json, segment.instances[i], kvd.snapshot->kvd_alive);
    }
  }
  json.EndArray().EndObject();
}

std::string InstancesView(const std::vector<Kvd>& kvds, const ViewOptions& options) {
  if (options.json) {
    JsonWriter json;
    if (kvds.size() == 1 && !options.with_ipc) {
      WriteInstancesJson(json, kvds[0]);
    } else {
      json.BeginObject().Key("kvds").BeginArray();
      for (const Kvd& kvd : kvds) WriteInstancesJson(json, kvd);
      json.EndArray().EndObject();
    }
    return json.str() + "\n";
  }
  std::vector<Column> columns = {{"NAME"}, {"PID", Align::kRight}, {"STATE"}, {"RESTARTS", Align::kRight},
                                 {"SINCE"}};
  if (options.with_ipc) columns.insert(columns.begin(), Column{"IPC", Align::kLeft, true});
  Table table(columns);
  for (const Kvd& kvd : kvds) {
    if (!kvd.snapshot) continue;
    const ipc::Segment& segment = kvd.snapshot->segment;
    const bool alive = kvd.snapshot->kvd_alive;
    for (uint32_t i = 0; i < segment.header.instance_count; ++i) {
      const ipc::InstanceRow& row = segment.instances[i];
      std::vector<Cell> cells = {std::string(ipc::ReadString(row.name)),
                                 row.pid > 0 ? std::to_string(row.pid) : "-",
                                 Cell(InstanceStateText(row, alive), InstanceTint(row, alive)),
                                 std::to_string(row.restarts), FormatAge(row.since_unix_ns, options.now_unix_ns)};
      if (options.with_ipc) cells.insert(cells.begin(), Cell(kvd.ipc_name));
      table.AddRow(std::move(cells));
    }
  }
  return table.Render(options.colour, options.width);
}

}  // namespace nanokv::kvctl
