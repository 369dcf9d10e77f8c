// kvctl's read-only views, as tables or JSON, built from segment snapshots
// alone: `list` (a row per kvd), `devices` (a row per device), `tenants` (a
// row per tenant), `instances` (a row per engine kvd runs from its YAML;
// instances_view.cc). Pure functions of the snapshots and the time, so tests
// feed them made-up segments. The JSON shapes are documented in docs/KVCTL.md.
#ifndef NANOKV_KVCTL_VIEWS_H_
#define NANOKV_KVCTL_VIEWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kvctl/discovery.h"
#include "kvctl/figures.h"
#include "kvctl/json_writer.h"
#include "kvctl/table.h"

namespace nanokv::kvctl {

struct ViewOptions {
  bool json = false;
  bool colour = false;        // tables only
  uint64_t now_unix_ns = 0;   // ages and the hung test are against this
  bool with_ipc = false;      // devices/tenants: an IPC column (several kvds)
  SortKey sort = SortKey::kName;
  size_t width = 0;           // tables: names clipped to fit (a terminal's columns); 0: none
};

// Each returns the whole output, ending in '\n': a table (just the header
// when there are no rows) or one line of JSON.
// `skipped`: segments not read because their owner is not trusted as kvd's;
// JSON lists them ("skipped"), a table leaves them to the caller's note.
std::string ListView(const std::vector<Kvd>& kvds, const ViewOptions& options,
                     const std::vector<ipc::SegmentEntry>& skipped = {});
std::string DevicesView(const std::vector<Kvd>& kvds, const ViewOptions& options);
std::string TenantsView(const std::vector<Kvd>& kvds, const ViewOptions& options);
// Rows in kvd's order (its YAML's); options.sort does not apply.
std::string InstancesView(const std::vector<Kvd>& kvds, const ViewOptions& options);

// The JSON pieces, for documents that combine them (watch).
// {"kvds":[kvd...]}: each kvd as WriteKvdJson writes it.
// With skipped segments: "skipped":[{"ipc","owner_uid","error"}...].
void WriteListJson(JsonWriter& json, const std::vector<Kvd>& kvds,
                   const std::vector<ipc::SegmentEntry>& skipped = {});
// {"ipc":..., "state":..., ..., "devices":[...]}: a kvd, its totals, its devices.
void WriteKvdJson(JsonWriter& json, const Kvd& kvd);
// {"ipc":..., "state":..., "tenants":[...]}: one kvd's tenants.
void WriteTenantsJson(JsonWriter& json, const Kvd& kvd, SortKey sort);
// {"ipc":..., "state":..., "instances":[...]}: one kvd's instances.
void WriteInstancesJson(JsonWriter& json, const Kvd& kvd);
// How an instance's state is coloured, in the table and in top: running
// green, restarting or a non-zero exit yellow, failed or stale red.
Tint InstanceTint(const ipc::InstanceRow& row, bool kvd_alive);
// The colour of a kvd's state: live good, hung a warning, stale or unreadable bad.
Tint KvdStateTint(KvdState state);

// The fields every per-kvd object starts with ("ipc", "state", then the
// header's, or "error" for an unreadable kvd), inside an open object.
void WriteKvdHead(JsonWriter& json, const Kvd& kvd);

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_VIEWS_H_
