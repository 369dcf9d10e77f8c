#include "kvctl/cleanup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "base/naming.h"
#include "ipc/uds/channel.h"
#include "kvctl/discovery.h"
#include "kvctl/json_writer.h"

namespace nanokv::kvctl {
namespace {

constexpr std::string_view kSocketSuffix = ".sock";

bool IsSocket(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// A socket nothing listens on: connect is refused. A live kvd's socket
// accepts (we close at once; kvd sees a peer come and go).
bool SocketDead(const std::string& path) {
  auto channel = ipc::Channel::Connect(path);
  return !channel.ok() && channel.status().code() == Code::kUnavailable;
}

void RemoveSocket(const std::string& ipc_name, const std::string& path, const std::string& reason,
                  const CleanupOptions& options, std::vector<Removal>* out) {
  if (!IsSocket(path) || !SocketDead(path)) return;
  Removal removal{ipc_name, "socket", path, reason, Status::OK()};
  if (!options.dry_run && unlink(path.c_str()) != 0 && errno != ENOENT) {
    removal.status = Status::FromErrno("unlink", errno, path);
  }
  out->push_back(std::move(removal));
}

// The IPC names of the sockets in the run directory.
std::vector<std::string> SocketNames() {
  std::vector<std::string> names;
  const std::string dir = ipc::RunDir();
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return names;  // no run directory: no sockets
  while (dirent* entry = readdir(handle)) {
    std::string_view file = entry->d_name;
    if (!file.ends_with(kSocketSuffix)) continue;
    std::string_view name = file.substr(0, file.size() - kSocketSuffix.size());
    if (ipc::ValidIpcName(name)) names.emplace_back(name);
  }
  closedir(handle);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<std::vector<Removal>> Cleanup(const CleanupOptions& options) {
  std::vector<Removal> removals;
  NANOKV_ASSIGN_OR_RETURN(std::vector<Kvd> kvds, DiscoverKvds(NowUnixNs()));
  auto wanted = [&](const std::string& name) {
    return options.only.empty() ||
           std::find(options.only.begin(), options.only.end(), name) != options.only.end();
  };
  std::set<std::string> running;  // live, hung or unreadable: not ours to judge
  for (const Kvd& kvd : kvds) {
    if (kvd.state != KvdState::kStale) {
      running.insert(kvd.ipc_name);
      if (!options.only.empty() && wanted(kvd.ipc_name)) {
        const std::string pid =
            kvd.snapshot ? " (pid " + std::to_string(kvd.snapshot->segment.header.kvd_pid) + ")" : "";
        removals.push_back({kvd.ipc_name, "segment", "/dev/shm/nanokv_" + kvd.ipc_name, "",
                            Status::FailedPrecondition("kvd '" + kvd.ipc_name + "'" + pid + " is " +
                                                       KvdStateName(kvd.state) + ": left alone")});
      }
      continue;
    }
    if (!wanted(kvd.ipc_name)) continue;
    const int32_t pid = kvd.snapshot->segment.header.kvd_pid;
    const std::string reason = "kvd pid " + std::to_string(pid) + " is gone";
    // The path ipc/segment/shm_file.h names (kShmDirectory + kShmPrefix), for the report.
    Removal removal{kvd.ipc_name, "segment", "/dev/shm/nanokv_" + kvd.ipc_name, reason, Status::OK()};
    if (!options.dry_run) {
      removal.status = ipc::RemoveStaleSegment(kvd.ipc_name);
      if (removal.status.code() == Code::kNotFound) continue;  // removed by someone else meanwhile
      if (removal.status.code() == Code::kFailedPrecondition) {  // a new kvd took the name meanwhile
        running.insert(kvd.ipc_name);
        continue;
      }
    }
    removals.push_back(std::move(removal));
    RemoveSocket(kvd.ipc_name, ipc::SocketPath(kvd.ipc_name), reason, options, &removals);
  }
  // Sockets whose segment is gone (or never was): nothing listens on them.
  for (const std::string& name : SocketNames()) {
    if (running.contains(name) || !wanted(name)) continue;
    bool done = std::any_of(removals.begin(), removals.end(), [&](const Removal& r) {
      return r.kind == "socket" && r.ipc_name == name;
    });
    if (done) continue;
    RemoveSocket(name, ipc::SocketPath(name), "nothing listens on it", options, &removals);
  }
  return removals;
}

std::string CleanupReport(const std::vector<Removal>& removals, const CleanupOptions& options,
                          bool json) {
  if (json) {
    JsonWriter writer;
    writer.BeginObject().Field("dry_run", options.dry_run).Key("removed").BeginArray();
    for (const Removal& r : removals) {
      writer.BeginObject()
          .Field("ipc", r.ipc_name)
          .Field("kind", r.kind)
          .Field("path", r.path)
          .Field("reason", r.reason)
          .Field("ok", r.status.ok());
      if (!r.status.ok()) writer.Field("error", r.status.ToString());
      writer.EndObject();
    }
    writer.EndArray().EndObject();
    return writer.str() + "\n";
  }
  if (removals.empty()) return "nothing to clean up\n";
  std::string out;
  for (const Removal& r : removals) {
    if (!r.status.ok()) {
      out += "not removed: " + r.kind + " " + r.path + ": " + std::string(r.status.message()) + "\n";
    } else {
      out += std::string(options.dry_run ? "would remove " : "removed ") + r.kind + " " + r.path +
             " (" + r.reason + ")\n";
    }
  }
  return out;
}

}  // namespace nanokv::kvctl
