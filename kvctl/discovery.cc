#include "kvctl/discovery.h"

#include <chrono>
#include <cstdlib>

#include "base/naming.h"

namespace nanokv::kvctl {
namespace {

std::string Names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

const char* KvdStateName(KvdState state) {
  switch (state) {
    case KvdState::kLive: return "live";
    case KvdState::kHung: return "hung";
    case KvdState::kStale: return "stale";
    case KvdState::kUnreadable: return "unreadable";
  }
  return "?";
}

uint64_t NowUnixNs() {
  using namespace std::chrono;
  return static_cast<uint64_t>(
      duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
}

KvdState StateOf(const ipc::Snapshot& snapshot, uint64_t now_unix_ns) {
  if (!snapshot.kvd_alive) return KvdState::kStale;
  const uint64_t updated = snapshot.segment.header.update_unix_ns;
  if (updated != 0 && now_unix_ns > updated && now_unix_ns - updated > kHungAfterNs) {
    return KvdState::kHung;
  }
  return KvdState::kLive;
}

uint64_t CapacityBytes(const ipc::Segment& segment) {
  uint64_t total = 0;
  for (uint32_t d = 0; d < segment.header.device_count; ++d) {
    total += segment.devices[d].capacity_pages * segment.devices[d].page_bytes;
  }
  return total;
}

uint64_t UsedBytes(const ipc::Segment& segment) {
  uint64_t total = 0;
  for (uint32_t d = 0; d < segment.header.device_count; ++d) {
    const ipc::DeviceRow& row = segment.devices[d];
    total += (row.granted_pages + row.object_pages + row.held_after_recycle_pages) * row.page_bytes;
  }
  return total;
}

Result<Kvd> ReadKvd(std::string_view ipc_name, uint64_t now_unix_ns) {
  if (!ipc::ValidIpcName(ipc_name)) {
    return Status::InvalidArgument("'" + std::string(ipc_name) +
                                   "' is not an IPC name (1-48 of [A-Za-z0-9_.-], no leading '.')");
  }
  Kvd kvd;
  kvd.ipc_name = std::string(ipc_name);
  auto snapshot = ipc::ReadSegment(ipc_name);
  if (snapshot.ok()) {
    kvd.state = StateOf(*snapshot, now_unix_ns);
    kvd.snapshot = std::move(snapshot).value();
    return kvd;
  }
  if (snapshot.status().code() == Code::kNotFound) {
    auto entries = ipc::ListSegments();
    std::vector<std::string> names;
    if (entries.ok()) {
      for (const ipc::SegmentEntry& entry : *entries) {
        if (entry.kind != ipc::SegmentEntry::Kind::kUntrusted) names.push_back(entry.ipc_name);
      }
    }
    std::string known = !names.empty() ? "; kvds on this node: " + Names(names)
                                       : "; no kvd runs on this node";
    return Status::NotFound("no kvd named '" + std::string(ipc_name) + "'" + known);
  }
  if (snapshot.status().code() == Code::kPermissionDenied) {
    // Not ours to read (its mode), or not a kvd's (its owner): said as such,
    // and a command on it exits with the permission code.
    kvd.error = snapshot.status();
    return kvd;
  }
  if (snapshot.status().code() == Code::kInvalidArgument) {
    // Named right, but what is there is not a segment we can read: an error
    // about the segment, not about the command line.
    return Status::FailedPrecondition(snapshot.status().ToString());
  }
  kvd.error = snapshot.status();
  return kvd;
}

Result<std::vector<Kvd>> DiscoverKvds(uint64_t now_unix_ns,
                                      std::vector<ipc::SegmentEntry>* skipped) {
  NANOKV_ASSIGN_OR_RETURN(std::vector<ipc::SegmentEntry> entries, ipc::ListSegments());
  std::vector<Kvd> kvds;
  for (ipc::SegmentEntry& entry : entries) {
    if (entry.kind == ipc::SegmentEntry::Kind::kUntrusted) {
      if (skipped != nullptr) skipped->push_back(std::move(entry));
      continue;
    }
    if (entry.kind == ipc::SegmentEntry::Kind::kUnreadable) {
      Kvd unreadable;
      unreadable.ipc_name = entry.ipc_name;
      unreadable.error = entry.why;
      kvds.push_back(std::move(unreadable));
      continue;
    }
    auto kvd = ReadKvd(entry.ipc_name, now_unix_ns);
    if (kvd.ok()) {
      kvds.push_back(std::move(kvd).value());
    } else if (kvd.status().code() != Code::kNotFound) {  // not gone since the listing
      Kvd unreadable;
      unreadable.ipc_name = entry.ipc_name;
      unreadable.error = kvd.status();
      kvds.push_back(std::move(unreadable));
    }
  }
  return kvds;
}

Result<std::string> ResolveIpcName(std::string_view given) {
  if (!given.empty()) return std::string(given);
  for (const char* variable : {"NANOKV_IPC_NAME", "KVCACHED_IPC_NAME"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') return std::string(value);
  }
  NANOKV_ASSIGN_OR_RETURN(std::vector<Kvd> kvds, DiscoverKvds(NowUnixNs()));
  std::vector<std::string> live, others;
  for (const Kvd& kvd : kvds) {
    (kvd.state == KvdState::kLive || kvd.state == KvdState::kHung ? live : others)
        .push_back(kvd.ipc_name);
  }
  if (live.size() == 1) return live[0];
  if (live.empty()) {
    return Status::Unavailable(
        "no kvd is running on this node" +
        (others.empty() ? std::string() : " (stale: " + Names(others) + "; `kvctl cleanup` removes them)"));
  }
  return Status::InvalidArgument("several kvds run on this node (" + Names(live) +
                                 "): name one, or set NANOKV_IPC_NAME");
}

Status RequireRunning(const Kvd& kvd) {
  switch (kvd.state) {
    case KvdState::kLive:
    case KvdState::kHung:
      return Status::OK();
    case KvdState::kStale:
      return Status::Unavailable("kvd '" + kvd.ipc_name + "' (pid " +
                                 std::to_string(kvd.snapshot->segment.header.kvd_pid) +
                                 ") is not running: its segment is stale (`kvctl cleanup` removes it)");
    case KvdState::kUnreadable:
      break;
  }
  // Keep the cause's code: a segment we may not read is a permission matter
  // (exit 5), not a kvd that is not running.
  const Code code = kvd.error.code() == Code::kPermissionDenied ? Code::kPermissionDenied
                                                                : Code::kUnavailable;
  return Status(code, "kvd '" + kvd.ipc_name + "': " + std::string(kvd.error.message()));
}

}  // namespace nanokv::kvctl
