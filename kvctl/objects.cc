#include "kvctl/objects.h"

#include "kvctl/json_writer.h"
#include "kvctl/table.h"
#include "base/human_size.h"

namespace nanokv::kvctl {
namespace {

const char* PinName(ObjectPin pin) {
  switch (pin) {
    case ObjectPin::kSoft: return "soft";
    case ObjectPin::kHard: return "hard";
    case ObjectPin::kNone: break;
  }
  return "-";
}

std::string Seconds(uint64_t ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1fs", static_cast<double>(ms) / 1000.0);
  return text;
}

Result<std::unique_ptr<ObjectStore>> OpenStore(const std::string& ipc_name) {
  ObjectStoreOptions options;
  options.ipc_name = ipc_name;
  options.backend = "host";  // kvctl maps no pages: the backend is never used
  options.request_timeout_ms = 5000;
  return ObjectStore::Open(options);
}

// v2 slabs under the objects, a row each (nothing when none is granted):
// whose, how much of it is still unannounced, how many objects it holds,
// how long until kvd ends it.
std::string SlabsView(const ObjectStoreInfo& store) {
  Table table({{"SLAB", Align::kRight},
               {"DEVICE", Align::kRight},
               {"UID", Align::kRight},
               {"SIZE", Align::kRight},
               {"UNANNOUNCED", Align::kRight},
               {"OBJECTS", Align::kRight},
               {"TTL", Align::kRight}});
  uint32_t count = 0;
  for (const ObjectStoreDeviceInfo& d : store.devices) {
    count += d.slab_count;
    for (const ObjectStoreDeviceInfo::Slab& slab : d.slabs) {
      table.AddRow({std::to_string(slab.id), std::to_string(d.device), std::to_string(slab.uid),
                    FormatBytes(slab.payload_bytes), FormatBytes(slab.unannounced_bytes),
                    std::to_string(slab.slots_taken) + " / " + std::to_string(slab.header_slots),
                    Seconds(slab.ttl_ms)});
    }
  }
  if (count == 0) return "";
  size_t listed = 0;
  for (const ObjectStoreDeviceInfo& d : store.devices) listed += d.slabs.size();
  std::string more = listed < count ? " (" + std::to_string(count - listed) + " more not listed)" : "";
  return "\n" + table.Render(false) + "slabs: " + std::to_string(count) + more + "\n";
}

}  // namespace

std::string ObjectsView(const std::vector<ObjectEntry>& objects, const ObjectStoreInfo& store, bool json) {
  uint32_t live = 0;
  uint64_t evictions = 0;
  for (const ObjectStoreDeviceInfo& d : store.devices) {
    live += d.objects;
    evictions += d.evictions;
  }
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("store").BeginObject().Field("objects", live).Field("evictions", evictions);
    w.Key("devices").BeginArray();
    for (const ObjectStoreDeviceInfo& d : store.devices) {
      w.BeginObject()
          .Field("device", int64_t{d.device})
          .Field("store_bytes", d.store_bytes)
          .Field("used_bytes", d.used_bytes)
          .Field("free_bytes", d.store_bytes - d.used_bytes)
          .Field("objects", d.objects)
          .Field("evictions", d.evictions)
          .Field("shared_free_pages", d.shared_free_pages)
          .Field("host_bytes", d.host_bytes)
          .Field("host_used_bytes", d.host_used_bytes)
          .Field("host_objects", d.host_objects)
          .Field("demotions", d.demotions)
          .Field("promotions", d.promotions);
      w.Key("owners").BeginArray();
      for (const ObjectStoreDeviceInfo::Owner& o : d.owners) {
        w.BeginObject();
        if (o.kvd_callers) {
          w.Field("owner", "kvd");
        } else {
          w.Field("uid", o.uid);
        }
        w.Field("pages", o.pages).EndObject();
      }
      w.EndArray().Field("slab_count", d.slab_count).Key("slabs").BeginArray();
      for (const ObjectStoreDeviceInfo::Slab& slab : d.slabs) {
        w.BeginObject()
            .Field("id", slab.id)
            .Field("uid", slab.uid)
            .Field("payload_bytes", slab.payload_bytes)
            .Field("unannounced_bytes", slab.unannounced_bytes)
            .Field("header_slots", slab.header_slots)
            .Field("slots_taken", slab.slots_taken)
            .Field("ttl_ms", slab.ttl_ms)
            .EndObject();
      }
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    w.Key("objects").BeginArray();
    for (const ObjectEntry& o : objects) {
      w.BeginObject()
          .Field("key", o.key)
          .Field("bytes", o.bytes_total)
          .Field("state", ObjectStateName(o.state))
          .Field("device", int64_t{o.device})
          .Field("tier", o.host_tier ? "host" : "gpu")
          .Field("epoch", o.epoch)
          .Field("age_ms", o.age_ms)
          .Field("idle_ms", o.idle_ms)
          .Field("leases", o.leases)
          .Field("lease_ms", o.lease_ms)
          .Field("pin", PinName(o.pin))
          .EndObject();
    }
    w.EndArray().EndObject();
    return w.str() + "\n";
  }
  Table table({{"KEY"},
               {"SIZE", Align::kRight},
               {"STATE"},
               {"DEVICE", Align::kRight},
               {"TIER"},
               {"AGE", Align::kRight},
               {"IDLE", Align::kRight},
               {"LEASE"},
               {"PIN"}});
  for (const ObjectEntry& o : objects) {
    Tint tint = o.state == ObjectState::kReady ? Tint::kPlain : Tint::kWarn;
    std::string lease = o.leases == 0 ? "-"
                        : std::to_string(o.leases) + " (" +
                              (o.lease_ms == UINT64_MAX ? std::string("held") : Seconds(o.lease_ms)) + ")";
    table.AddRow({o.key, FormatBytes(o.bytes_total), Cell(ObjectStateName(o.state), tint), std::to_string(o.device),
                  o.host_tier ? "host" : "gpu", Seconds(o.age_ms), Seconds(o.idle_ms), lease, PinName(o.pin)});
  }
  // One line however many devices: "store: 3 objects, 0 evictions; device 0
  // 2.00 MiB used, 6.00 MiB free (pages: uid 1001 2, kvd 1); device 1 ...".
  std::string summary = "store: " + std::to_string(live) + " objects, " + std::to_string(evictions) + " evictions";
  for (const ObjectStoreDeviceInfo& d : store.devices) {
    summary += "; device " + std::to_string(d.device) + " " + FormatBytes(d.used_bytes) + " used, " +
               FormatBytes(d.store_bytes - d.used_bytes) + " free";
    std::string owners;
    for (const ObjectStoreDeviceInfo::Owner& o : d.owners) {
      owners += (owners.empty() ? "" : ", ") + (o.kvd_callers ? std::string("kvd") : "uid " + std::to_string(o.uid)) +
                " " + std::to_string(o.pages);
    }
    if (!owners.empty()) summary += " (pages: " + owners + ")";
    if (d.host_bytes != 0) {
      summary += ", host tier " + FormatBytes(d.host_used_bytes) + " used of " + FormatBytes(d.host_bytes) + " (" +
                 std::to_string(d.host_objects) + " objects, " + std::to_string(d.demotions) + " demoted, " +
                 std::to_string(d.promotions) + " promoted)";
    }
  }
  return table.Render(false) + summary + "\n" + SlabsView(store);
}

Result<Report> RunObjects(const std::string& ipc_name, bool json) {
  NANOKV_ASSIGN_OR_RETURN(auto store, OpenStore(ipc_name));
  NANOKV_ASSIGN_OR_RETURN(std::vector<ObjectEntry> objects, store->List());
  NANOKV_ASSIGN_OR_RETURN(ObjectStoreInfo info, store->Info());
  return Report{ObjectsView(objects, info, json), 0};
}

Result<Report> RunObjectEvict(const std::string& ipc_name, int device, uint64_t bytes, bool json) {
  NANOKV_ASSIGN_OR_RETURN(auto store, OpenStore(ipc_name));
  NANOKV_ASSIGN_OR_RETURN(uint64_t freed, store->Evict(device, bytes));
  if (json) {
    JsonWriter w;
    w.BeginObject().Field("ipc", ipc_name).Field("device", int64_t{device}).Field("freed_bytes", freed).EndObject();
    return Report{w.str() + "\n", 0};
  }
  return Report{"kvd '" + ipc_name + "': evicted " + FormatBytes(freed) + " of objects" +
                    (device >= 0 ? " on device " + std::to_string(device) : "") + "\n",
                0};
}

}  // namespace nanokv::kvctl
