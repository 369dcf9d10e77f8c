#include "kvctl/cleanup.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <set>

#include "base/kvd_identity.h"
#include "base/naming.h"
#include "base/run_dir.h"
#include "ipc/segment/journal_header.h"
#include "ipc/uds/channel.h"
#include "kvctl/discovery.h"
#include "kvctl/json_writer.h"

namespace nanokv::kvctl {
namespace {

// What kvd names its files in its run directory (base/naming.h), and the
// private names of a start cut short ("<name>.sock.new<pid>", ".journal.new<pid>").
constexpr std::string_view kSuffixes[] = {".sock", ".lock", ".journal", ".objects", ".keeper"};
constexpr std::string_view kPartialInfixes[] = {".sock.new", ".journal.new", ".objects.new"};

bool IsSocket(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0;
}

// A socket nothing listens on: connect is refused. A live kvd's socket
// accepts (we close at once, sending nothing; kvd sees a peer come and go).
bool SocketDead(const std::string& path) {
  auto channel = ipc::Channel::Connect(path);
  return !channel.ok() && channel.status().code() == Code::kUnavailable;
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> files;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return files;  // no run directory: nothing in it
  while (dirent* entry = readdir(handle)) files.emplace_back(entry->d_name);
  closedir(handle);
  std::sort(files.begin(), files.end());
  return files;
}

// The IPC names kvd files in `files` belong to.
std::set<std::string> NamesIn(const std::vector<std::string>& files) {
  std::set<std::string> names;
  for (std::string_view file : files) {
    for (std::string_view suffix : kSuffixes) {
      if (file.ends_with(suffix)) {
        std::string_view name = file.substr(0, file.size() - suffix.size());
        if (ipc::ValidIpcName(name)) names.emplace(name);
      }
    }
    for (std::string_view infix : kPartialInfixes) {
      size_t at = file.find(infix);
      if (at != std::string_view::npos && ipc::ValidIpcName(file.substr(0, at))) {
        names.emplace(file.substr(0, at));
      }
    }
  }
  return names;
}

std::string Seconds(uint64_t ns) { return std::to_string((ns + 999'999'999) / 1'000'000'000) + " s"; }

class Cleaner {
 public:
  Cleaner(const CleanupOptions& options, std::vector<Removal>* out)
      : options_(options), out_(out), now_(NowUnixNs()) {}

  // Unlinks `path` (unless a dry run) and records it.
  void Remove(const std::string& ipc, const std::string& kind, const std::string& path,
              const std::string& reason) {
    Removal removal{ipc, kind, path, reason, Status::OK()};
    if (!options_.dry_run && unlink(path.c_str()) != 0 && errno != ENOENT) {
      removal.status = Status::FromErrno("unlink", errno, path);
    }
    out_->push_back(std::move(removal));
  }

  // Every file of `name` in `dir`, and its stale segment if `stale` says it
  // served from there. Only while its lock there is ours to hold.
  void CleanName(const std::string& dir, const std::string& name, const Kvd* stale,
                 const std::vector<std::string>& files, const std::set<std::string>& names) {
    const std::string reason = stale != nullptr ? GoneReason(*stale)
                                                : "no kvd of this name runs from " + dir;
    std::unique_ptr<RunDirLock> lock;
    const std::string lock_path = ipc::LockPathIn(dir, name);
    auto locked = RunDirLock::TryExisting(lock_path);
    if (locked.ok()) {
      lock = std::move(locked).value();
    } else if (locked.status().code() == Code::kFailedPrecondition) {
      return;  // a kvd runs (or starts) from here under this name: not ours
    } else if (locked.status().code() != Code::kNotFound) {
      out_->push_back({name, "lock", lock_path, reason, locked.status()});
      return;  // cannot tell whether a kvd runs: touch nothing
    } else if (IsSocket(ipc::SocketPathIn(dir, name)) && !SocketDead(ipc::SocketPathIn(dir, name))) {
      return;  // no lock file, but something serves the socket
    }
    // The journal first: while it is kept, so is the stale segment, whose
    // last publish says when its kvd died (the journal's window counts from it).
    const bool journal_kept = CleanJournal(dir, name, stale);
    if (stale != nullptr && journal_kept) {
      out_->push_back({name, "segment", "/dev/shm/nanokv_" + name,
                       "kept with its journal: it says when its kvd died", Status::OK(), true});
    } else if (stale != nullptr) {
      RemoveSegment(*stale, reason);
    }
    CleanStoreFiles(dir, name, journal_kept, reason);
    const std::string socket = ipc::SocketPathIn(dir, name);
    if (IsSocket(socket) && SocketDead(socket)) Remove(name, "socket", socket, reason);
    for (const std::string& file : files) {
      for (std::string_view infix : kPartialInfixes) {
        if (file.starts_with(name + std::string(infix))) {
          Remove(name, "partial", dir + "/" + file, "left by a start that was cut short");
        }
      }
    }
    if (options_.logs) CleanLogs(dir, name, files, names, reason);
    if (lock) {
      Removal removal{name, "lock", lock_path, reason, Status::OK()};
      if (!options_.dry_run) removal.status = lock->Unlink();
      out_->push_back(std::move(removal));
    }
  }

  void RemoveSegment(const Kvd& stale, const std::string& reason) {
    Removal removal{stale.ipc_name, "segment", "/dev/shm/nanokv_" + stale.ipc_name, reason, Status::OK()};
    if (!options_.dry_run) {
      removal.status = ipc::RemoveStaleSegment(stale.ipc_name);
      // Removed by someone else meanwhile, or a new kvd took the name.
      if (removal.status.code() == Code::kNotFound ||
          removal.status.code() == Code::kFailedPrecondition) {
        return;
      }
    }
    out_->push_back(std::move(removal));
  }

  // A segment at a kvd's name whose owner is no uid kvd runs as (root, ours,
  // $NANOKV_KVD_UID): not a kvd's, whatever pid it names (a live process of
  // that uid may squat the name). Removed when named; otherwise said, and
  // left: kvctl cannot tell it from a kvd of that uid that the operator did
  // not name in NANOKV_KVD_UID.
  void JudgeUntrusted(const ipc::SegmentEntry& entry, bool named) {
    const std::string path = "/dev/shm/nanokv_" + entry.ipc_name;
    const std::string reason = "it belongs to " + DescribeUid(entry.owner_uid) + ", not to " +
                               TrustedKvdUidsText() + ": not a kvd's";
    if (!named) {
      out_->push_back({entry.ipc_name, "segment", path,
                       reason + " (`kvctl cleanup " + entry.ipc_name + "` removes it)", Status::OK(),
                       /*kept=*/true});
      return;
    }
    Removal removal{entry.ipc_name, "segment", path, reason, Status::OK()};
    if (!options_.dry_run) {
      removal.status = ipc::RemoveStaleSegment(entry.ipc_name);
      if (removal.status.code() == Code::kNotFound) return;  // gone meanwhile
    }
    out_->push_back(std::move(removal));
  }

  static std::string GoneReason(const Kvd& stale) {
    return "kvd pid " + std::to_string(stale.snapshot->segment.header.kvd_pid) + " is gone";
  }

 private:
  // A journal is the next kvd's way to take back pages engines still hold:
  // kept until the recovery window after its kvd stopped has passed. True
  // when kept.
  bool CleanJournal(const std::string& dir, const std::string& name, const Kvd* stale) {
    const std::string path = ipc::JournalPathIn(dir, name);
    if (!Exists(path)) return false;
    auto stamp = ipc::ReadJournalStamp(path);
    if (!stamp.ok()) {
      Remove(name, "journal", path, std::string(stamp.status().message()));
      return false;
    }
    // When its kvd stopped: it said so, or its stale segment's last publish
    // (kvd publishes at least once a second), or the file's last change.
    uint64_t stopped = stamp->stopped_unix_ns;
    if (stopped == 0 && stale != nullptr) stopped = stale->snapshot->segment.header.update_unix_ns;
    if (stopped == 0) stopped = stamp->modified_unix_ns;
    const uint64_t window_ns = stamp->recovery_window_ms * 1'000'000;
    if (now_ >= stopped && now_ - stopped >= window_ns) {
      Remove(name, "journal", path,
             "its kvd stopped " + Seconds(now_ - stopped) + " ago, past its recovery window");
      return false;
    }
    const uint64_t left = stopped + window_ns - std::min(now_, stopped + window_ns);
    out_->push_back({name, "journal", path,
                     "a restarted kvd may still take back its pages for " + Seconds(left) +
                         " (its recovery window)",
                     Status::OK(), /*kept=*/true});
    return true;
  }

  // The object store's journal goes with the page journal (a restarted kvd
  // reads both); a page keeper's socket stays while the keeper listens (it
  // holds the store's pages for the next kvd and exits by itself after the
  // recovery window), and goes once nothing does.
  void CleanStoreFiles(const std::string& dir, const std::string& name, bool journal_kept, const std::string& reason) {
    const std::string objects = ipc::ObjectJournalPathIn(dir, name);
    if (Exists(objects)) {
      if (journal_kept) {
        out_->push_back({name, "object journal", objects, "kept with its page journal: a restarted kvd may still "
                         "take back its objects", Status::OK(), /*kept=*/true});
      } else {
        Remove(name, "object journal", objects, reason);
      }
    }
    const std::string keeper = ipc::KeeperPathIn(dir, name);
    if (!Exists(keeper)) return;
    if (IsSocket(keeper) && !SocketDead(keeper)) {
      out_->push_back({name, "keeper", keeper, "a page keeper still holds the store's pages for the next kvd (it "
                       "exits after its recovery window)", Status::OK(), /*kept=*/true});
    } else {
      Remove(name, "keeper", keeper, reason);
    }
  }

  // "<name>.<instance>.log", the controller's; a file that a longer name of
  // this directory also claims is that name's.
  void CleanLogs(const std::string& dir, const std::string& name, const std::vector<std::string>& files,
                 const std::set<std::string>& names, const std::string& reason) {
    for (const std::string& file : files) {
      if (!file.ends_with(".log") || !file.starts_with(name + ".")) continue;
      bool longer = std::any_of(names.begin(), names.end(), [&](const std::string& other) {
        return other.size() > name.size() && file.starts_with(other + ".");
      });
      if (!longer) Remove(name, "log", dir + "/" + file, reason);
    }
  }

  const CleanupOptions& options_;
  std::vector<Removal>* out_;
  const uint64_t now_;
};

// The run directory a stale segment says its kvd served from ("" if none).
std::string RunDirOf(const Kvd& kvd) {
  const std::string_view socket = ipc::ReadString(kvd.snapshot->segment.header.socket_path);
  const size_t slash = socket.find_last_of('/');
  if (socket.empty() || socket.front() != '/' || slash == std::string_view::npos || slash == 0) return "";
  return std::string(socket.substr(0, slash));
}

}  // namespace

Result<std::vector<Removal>> Cleanup(const CleanupOptions& options) {
  std::vector<Removal> removals;
  std::vector<ipc::SegmentEntry> untrusted;
  NANOKV_ASSIGN_OR_RETURN(std::vector<Kvd> kvds, DiscoverKvds(NowUnixNs(), &untrusted));
  auto wanted = [&](const std::string& name) {
    return options.only.empty() ||
           std::find(options.only.begin(), options.only.end(), name) != options.only.end();
  };
  Cleaner cleaner(options, &removals);
  for (const ipc::SegmentEntry& entry : untrusted) {
    if (wanted(entry.ipc_name)) cleaner.JudgeUntrusted(entry, !options.only.empty());
  }
  // Run directory -> the stale kvds that served from it.
  std::map<std::string, std::map<std::string, const Kvd*>> dirs;
  dirs[ipc::RunDir()];
  for (const Kvd& kvd : kvds) {
    if (!wanted(kvd.ipc_name)) continue;
    if (kvd.state != KvdState::kStale) {
      if (!options.only.empty()) {  // named, and live, hung or unreadable: not ours to judge
        const std::string pid =
            kvd.snapshot ? " (pid " + std::to_string(kvd.snapshot->segment.header.kvd_pid) + ")" : "";
        removals.push_back({kvd.ipc_name, "segment", "/dev/shm/nanokv_" + kvd.ipc_name, "",
                            Status::FailedPrecondition("kvd '" + kvd.ipc_name + "'" + pid + " is " +
                                                       KvdStateName(kvd.state) + ": left alone")});
      }
      continue;
    }
    const std::string dir = RunDirOf(kvd);
    if (dir.empty()) {
      cleaner.RemoveSegment(kvd, Cleaner::GoneReason(kvd));  // it did not say where it served
    } else {
      dirs[dir][kvd.ipc_name] = &kvd;
    }
  }
  for (const auto& [dir, stale] : dirs) {
    const std::vector<std::string> files = FilesIn(dir);
    std::set<std::string> names = NamesIn(files);
    for (const auto& entry : stale) names.insert(entry.first);
    for (const std::string& name : names) {
      if (!wanted(name)) continue;
      auto it = stale.find(name);
      cleaner.CleanName(dir, name, it == stale.end() ? nullptr : it->second, files, names);
    }
  }
  return removals;
}

std::string CleanupReport(const std::vector<Removal>& removals, const CleanupOptions& options,
                          bool json) {
  if (json) {
    JsonWriter writer;
    writer.BeginObject().Field("dry_run", options.dry_run).Key("removed").BeginArray();
    for (const Removal& r : removals) {
      if (r.kept) continue;
      writer.BeginObject()
          .Field("ipc", r.ipc_name)
          .Field("kind", r.kind)
          .Field("path", r.path)
          .Field("reason", r.reason)
          .Field("ok", r.status.ok());
      if (!r.status.ok()) writer.Field("error", r.status.ToString());
      writer.EndObject();
    }
    writer.EndArray().Key("kept").BeginArray();
    for (const Removal& r : removals) {
      if (!r.kept) continue;
      writer.BeginObject()
          .Field("ipc", r.ipc_name)
          .Field("kind", r.kind)
          .Field("path", r.path)
          .Field("reason", r.reason)
          .EndObject();
    }
    writer.EndArray().EndObject();
    return writer.str() + "\n";
  }
  if (removals.empty()) return "nothing to clean up\n";
  std::string out;
  for (const Removal& r : removals) {
    if (r.kept) {
      out += "kept " + r.kind + " " + r.path + ": " + r.reason + "\n";
    } else if (!r.status.ok()) {
      out += "not removed: " + r.kind + " " + r.path + ": " + std::string(r.status.message()) + "\n";
    } else {
      out += std::string(options.dry_run ? "would remove " : "removed ") + r.kind + " " + r.path +
             " (" + r.reason + ")\n";
    }
  }
  return out;
}

}  // namespace nanokv::kvctl
