#include "kvctl/cluster.h"

#include <algorithm>
#include <cstdio>

#include "base/human_size.h"
#include "kvctl/exit_codes.h"
#include "kvctl/json_writer.h"
#include "kvctl/table.h"

namespace nanokv::kvctl {
namespace {

Result<std::unique_ptr<ClusterClient>> Connect(const MasterFlags& flags,
                                               const std::vector<std::string>* masters = nullptr) {
  ClusterClientOptions options;
  options.masters = masters != nullptr ? *masters : flags.masters;
  options.token_file = flags.token_file;
  options.tls_ca = flags.tls_ca;
  options.tls_cert = flags.tls_cert;
  options.tls_key = flags.tls_key;
  options.request_timeout_ms = 5000;
  return ClusterClient::Connect(options);
}

std::string Ago(uint64_t ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1fs", static_cast<double>(ms) / 1000.0);
  return text;
}

// "n0:0,n1:1": where the copies are, nearest first.
std::string Places(const std::vector<Replica>& replicas) {
  std::string text;
  for (const Replica& r : replicas) {
    // node:device, "(host)" for a copy in the host tier under that store.
    text += (text.empty() ? "" : ",") + r.node_id + ":" + std::to_string(r.device) + (r.host_tier ? "(host)" : "");
  }
  return text;
}

}  // namespace

std::string ClusterView(const ClusterStatus& s, bool json, bool colour) {
  if (json) {
    JsonWriter w;
    w.BeginObject()
        .Field("master", s.master)
        .Field("master_id", s.master_id)
        .Field("leads", s.term != 0)
        .Field("term", s.term)
        .Field("leader_id", s.leader_id)
        .Field("leader_address", s.leader_address)
        .Field("rebuilding", s.rebuilding)
        .Field("uptime_ms", s.uptime_ms)
        .Field("objects", s.objects)
        .Field("writes_in_progress", s.writes_in_progress)
        .Field("index_bytes", s.index_bytes)
        .Key("nodes")
        .BeginArray();
    for (const ClusterNodeStatus& n : s.nodes) {
      w.BeginObject()
          .Field("node_id", n.node_id)
          .Field("state", n.state)
          .Field("data_address", n.data_address)
          .Field("data_mode", n.data_mode)
          .Field("host_id", n.host_id)
          .Field("kvd_socket", n.kvd_socket)
          .Field("path", n.path)
          .Field("peer", n.peer)
          .Field("objects", n.objects)
          .Field("heartbeat_age_ms", n.heartbeat_age_ms)
          .Field("session_age_ms", n.session_age_ms)
          .Key("devices")
          .BeginArray();
      for (const ClusterDeviceStatus& d : n.devices) {
        w.BeginObject()
            .Field("device", int64_t{d.device})
            .Field("uuid", d.uuid)
            .Field("capacity_bytes", d.capacity_bytes)
            .Field("used_bytes", d.used_bytes)
            .Field("free_bytes", d.capacity_bytes - d.used_bytes)
            .Field("host_capacity_bytes", d.host_capacity_bytes)
            .Field("host_used_bytes", d.host_used_bytes)
            .Field("objects", d.objects)
            .Field("host_objects", d.host_objects)
            .EndObject();
      }
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    return w.str() + "\n";
  }
  std::string head = "master " + Sanitize(s.master_id) + " at " + Sanitize(s.master);
  if (s.term != 0) {
    head += " leads, term " + std::to_string(s.term);
  } else {
    head += " does not lead; leader: " +
            (s.leader_id.empty() ? std::string("unknown") : Sanitize(s.leader_id) + " at " + Sanitize(s.leader_address));
  }
  head += s.rebuilding ? Paint(" (rebuilding its index)", Tint::kWarn, colour) : "";
  head += "; up " + Ago(s.uptime_ms) + "; " + std::to_string(s.objects) + " objects, " +
          std::to_string(s.writes_in_progress) + " being written, index " + FormatBytes(s.index_bytes) + "\n";
  // PATH: how a client here reaches the node's copies (nanokv/cluster_client.h).
  // HOST: the host tier under the stores (object_store.host_tier), used of its size.
  Table table({{"NODE"},
               {"STATE"},
               {"PATH"},
               {"ADDRESS"},
               {"DEVICES"},
               {"USED", Align::kRight},
               {"FREE", Align::kRight},
               {"HOST", Align::kRight},
               {"OBJECTS", Align::kRight},
               {"HEARTBEAT", Align::kRight}});
  std::vector<ClusterNodeStatus> nodes = s.nodes;
  std::sort(nodes.begin(), nodes.end(),
            [](const ClusterNodeStatus& a, const ClusterNodeStatus& b) { return a.node_id < b.node_id; });
  for (const ClusterNodeStatus& n : nodes) {
    uint64_t capacity = 0, used = 0, host_capacity = 0, host_used = 0, host_objects = 0;
    std::string devices;
    for (const ClusterDeviceStatus& d : n.devices) {
      capacity += d.capacity_bytes;
      used += d.used_bytes;
      host_capacity += d.host_capacity_bytes;
      host_used += d.host_used_bytes;
      host_objects += d.host_objects;
      devices += (devices.empty() ? "" : ",") + std::to_string(d.device) + (d.uuid.empty() ? "" : "=" + d.uuid);
    }
    Tint tint = n.state == "alive" ? Tint::kGood : n.state == "dead" ? Tint::kBad : Tint::kWarn;
    // The data path: where the node's transfer agent listens, and its mode.
    const std::string data = n.data_address.empty() ? "-"
                             : n.data_mode.empty()   ? n.data_address
                                                     : n.data_address + " (" + n.data_mode + ")";
    table.AddRow({n.node_id, Cell(n.state, tint), Sanitize(n.path), data, devices, FormatBytes(used),
                  FormatBytes(capacity - used),
                  host_capacity == 0 ? "-" : FormatBytes(host_used) + " of " + FormatBytes(host_capacity),
                  // OBJECTS: copies the index holds there, "(N host)" of them in the host tier.
                  std::to_string(n.objects) + (host_objects == 0 ? "" : " (" + std::to_string(host_objects) + " host)"),
                  n.state == "dead" ? "-" : Ago(n.heartbeat_age_ms) + " ago"});
  }
  return head + table.Render(colour);
}

std::string ClusterObjectsView(const std::vector<ObjectLocation>& objects, bool json) {
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("objects").BeginArray();
    for (const ObjectLocation& o : objects) {
      w.BeginObject().Field("key", o.key).Field("bytes", o.bytes_total).Key("replicas").BeginArray();
      for (const Replica& r : o.replicas) {
        w.BeginObject()
            .Field("node_id", r.node_id)
            .Field("data_address", r.data_address)
            .Field("device", int64_t{r.device})
            .Field("device_uuid", r.device_uuid)
            .Field("epoch", r.epoch)
            .Field("tier", r.host_tier ? "host" : "gpu")
            .EndObject();
      }
      w.EndArray().EndObject();
    }
    w.EndArray().EndObject();
    return w.str() + "\n";
  }
  Table table({{"KEY"}, {"SIZE", Align::kRight}, {"COPIES", Align::kRight}, {"WHERE"}});
  for (const ObjectLocation& o : objects) {
    table.AddRow({o.key, FormatBytes(o.bytes_total), std::to_string(o.replicas.size()), Places(o.replicas)});
  }
  return table.Render(false);
}

Result<Report> RunCluster(const MasterFlags& flags, bool json, bool colour) {
  NANOKV_ASSIGN_OR_RETURN(auto client, Connect(flags));
  NANOKV_ASSIGN_OR_RETURN(ClusterStatus status, client->Cluster());
  if (status.term == 0 && !status.leader_address.empty() && status.leader_address != status.master) {
    // Any master answers, but only the leader knows the nodes: ask it, and
    // fall back on what the follower said if the leader does not answer.
    const std::vector<std::string> leader = {status.leader_address};
    auto leader_client = Connect(flags, &leader);
    if (leader_client.ok()) {
      auto led = (*leader_client)->Cluster();
      if (led.ok() && led->term != 0) {
        std::string via = json ? "" : "(asked " + Sanitize(status.master_id) + " at " + Sanitize(status.master) +
                                         ", which does not lead and points here)\n";
        return Report{via + ClusterView(*led, json, colour), 0};
      }
    }
  }
  return Report{ClusterView(status, json, colour), 0};
}

Result<Report> RunClusterObjects(const MasterFlags& flags, bool json) {
  NANOKV_ASSIGN_OR_RETURN(auto client, Connect(flags));
  NANOKV_ASSIGN_OR_RETURN(std::vector<ObjectLocation> objects, client->ListObjects());
  std::sort(objects.begin(), objects.end(),
            [](const ObjectLocation& a, const ObjectLocation& b) { return a.key < b.key; });
  return Report{ClusterObjectsView(objects, json), 0};
}

Result<Report> RunClusterEvict(const MasterFlags& flags, const std::vector<std::string>& keys, bool json) {
  NANOKV_ASSIGN_OR_RETURN(auto client, Connect(flags));
  std::vector<Status> results = client->BatchRemove(keys);
  Report report;
  JsonWriter w;
  w.BeginObject().Key("evicted").BeginArray();
  for (size_t i = 0; i < keys.size(); ++i) {
    const Status& s = results[i];
    if (!s.ok() && report.exit_code == 0) report.exit_code = ExitCodeFor(s);
    w.BeginObject().Field("key", keys[i]).Field("ok", s.ok());
    if (!s.ok()) w.Field("error", s.ToString());
    w.EndObject();
    report.text += s.ok() ? "evicted '" + Sanitize(keys[i]) + "' from every node that held it\n"
                          : "kvctl: '" + Sanitize(keys[i]) + "': " + s.ToString() + "\n";
  }
  w.EndArray().EndObject();
  if (json) report.text = w.str() + "\n";
  return report;
}

}  // namespace nanokv::kvctl
