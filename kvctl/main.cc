// kvctl: see and steer the kvds on this node. Views read the /dev/shm
// segments (they work while a kvd is busy or hung); commands go through kvd's
// socket. Run as `kvtop`, it is `kvctl top`. docs/KVCTL.md is the user guide.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "base/naming.h"
#include "kvctl/cleanup.h"
#include "kvctl/cluster.h"
#include "kvctl/commands.h"
#include "kvctl/discovery.h"
#include "kvctl/exit_codes.h"
#include "kvctl/objects.h"
#include "kvctl/json_writer.h"
#include "kvctl/top.h"
#include "kvctl/usage.h"
#include "kvctl/views.h"
#include "kvctl/watch.h"
#include "ops/version.h"
#include "base/human_size.h"

namespace nanokv::kvctl {
namespace {

// Every value the command line sets.
struct Flags {
  // Global.
  bool json = false;
  std::string colour = "auto";
  std::string run_dir;
  bool verbose = false;
  // Per command.
  std::string ipc;
  std::vector<std::string> positionals;  // limit: [IPC] TENANT SIZE; evict: [IPC] TENANT
  std::vector<std::string> cleanup_names;
  std::vector<std::string> list_names;  // list: only these kvds
  std::string sort = "name";
  std::string top_sort = "used";
  std::string bytes;
  bool all = false;
  bool objects = false;   // evict: the object store, not a tenant
  int device = -1;        // evict --objects: one device (-1: all)
  bool dry_run = false;
  bool logs = false;      // cleanup: instance logs too
  bool once = false;
  bool wait = false;
  double interval = 2.0;
  double top_interval = 1.0;
  double timeout = 10.0;
  int count = 0;
  // The cluster master (kvctl cluster, objects --cluster, evict --cluster).
  bool cluster = false;
  MasterFlags master;
};

struct Commands {
  CLI::App* list;
  CLI::App* devices;
  CLI::App* tenants;
  CLI::App* instances;
  CLI::App* watch;
  CLI::App* top;
  CLI::App* limit;
  CLI::App* evict;
  CLI::App* objects;
  CLI::App* cleanup;
  CLI::App* cluster;
};

// Under --json an error is a JSON document on stdout too, so a script that
// parses stdout always gets JSON; set once the command line is read.
bool errors_as_json = false;

// Says why a command failed, and returns `code`: on stderr, and under --json
// as {"error": ..., "code": <exit code>, "status": <kvd's code name>} on stdout.
int SayError(const std::string& text, int code, const char* status_name) {
  if (errors_as_json) {
    JsonWriter json;
    json.BeginObject().Field("error", text).Field("code", int64_t{code}).Field("status", status_name).EndObject();
    std::printf("%s\n", json.str().c_str());
    std::fflush(stdout);
  }
  std::fprintf(stderr, "kvctl: %s\n", text.c_str());
  return code;
}

int Fail(const Status& status, int code) {
  std::string text;
  for (std::string_view part : {status.call(), status.error_name(), status.message()}) {
    if (!part.empty()) text += (text.empty() ? "" : ": ") + std::string(part);
  }
  return SayError(text, code, CodeName(status.code()));
}

int Fail(const Status& status) { return Fail(status, ExitCodeFor(status)); }

int Usage(const std::string& message) {
  SayError(message, kExitUsage, "InvalidArgument");
  if (!errors_as_json) std::fprintf(stderr, "Run with --help for more information.\n");
  return kExitUsage;
}

ColourMode ParseColour(const std::string& text) {
  if (text == "always") return ColourMode::kAlways;
  if (text == "never") return ColourMode::kNever;
  return ColourMode::kAuto;
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

void Print(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

ViewOptions MakeViewOptions(const Flags& flags) {
  ViewOptions view;
  view.json = flags.json;
  view.colour = !flags.json && UseColour(ParseColour(flags.colour), STDOUT_FILENO);
  view.now_unix_ns = NowUnixNs();
  // On a terminal, tables fit its width (names clip, figures stay whole);
  // piped or in a file, nothing is cut.
  winsize ws{};
  if (!flags.json && isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    view.width = ws.ws_col;
  }
  return view;
}

// The kvds a per-kvd view shows: all with --all, else the one meant.
Result<std::vector<Kvd>> ViewKvds(const std::string& ipc, bool all, const ViewOptions& view) {
  if (all) return DiscoverKvds(view.now_unix_ns);
  NANOKV_ASSIGN_OR_RETURN(std::string name, ResolveIpcName(ipc));
  NANOKV_ASSIGN_OR_RETURN(Kvd kvd, ReadKvd(name, view.now_unix_ns));
  if (kvd.state == KvdState::kUnreadable) return RequireRunning(kvd);
  if (kvd.state == KvdState::kStale && !view.json) {
    const std::string why(RequireRunning(kvd).message());
    std::fprintf(stderr, "kvctl: %s; these are the last figures it published\n", why.c_str());
  }
  return std::vector<Kvd>{std::move(kvd)};
}

Commands Define(CLI::App& app, Flags& f) {
  auto usage = std::make_shared<UsageFormatter>();
  app.formatter(usage);  // before the subcommands: each inherits it
  app.footer(std::string(kExitCodesHelp) +
             "\n\nIPC defaults to $NANOKV_IPC_NAME, else the only live kvd. Sizes: 512M, 2G, "
             "1.5GiB, 30% (of the kvd's capacity).\nSee docs/KVCTL.md.");
  app.require_subcommand(1);
  app.fallthrough();  // global options after the subcommand too
  app.add_flag("--json", f.json, "JSON output (one document per line)");
  app.add_option("--color,--colour", f.colour, "auto (a terminal, NO_COLOR unset), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--run-dir", f.run_dir,
                 "kvd's run directory (default: where each kvd's segment says it listens; "
                 "$NANOKV_RUN_DIR overrides)");
  app.add_flag("-v,--verbose", f.verbose, "log diagnostics to stderr");
  app.add_option("--master", f.master.masters, "cluster master host:port (repeat, or a,b; default $NANOKV_MASTERS)")
      ->delimiter(',');
  app.add_option("--token-file", f.master.token_file, "the cluster's token file (default $NANOKV_TOKEN_FILE)");
  app.add_option("--tls-ca", f.master.tls_ca, "speak TLS to the master: the CA its certificate chains to");
  app.add_option("--tls-cert", f.master.tls_cert, "with --tls-ca: present this client certificate");
  app.add_option("--tls-key", f.master.tls_key, "with --tls-cert: its key");
  const auto seconds = CLI::Range(0.1, 86400.0);
  const auto timeout = CLI::Range(0.0, 86400.0);
  const std::string sort_keys = "name, used, share, limit, pid, activity";

  Commands c;
  c.list = app.add_subcommand("list",
                              "a row per kvd on this node (or per kvd named): devices, capacity, use, "
                              "tenants, state");
  c.list->add_option("ipc", f.list_names, "only these kvds, in this order (default: every kvd)");
  c.devices = app.add_subcommand("devices", "a row per device of a kvd (or of every kvd with --all)");
  c.devices->add_option("ipc", f.ipc, "IPC name of the kvd");
  c.devices->add_flag("-a,--all", f.all, "every kvd on the node");
  c.tenants = app.add_subcommand("tenants", "a row per tenant of a kvd (or of every kvd with --all)");
  c.tenants->add_option("ipc", f.ipc, "IPC name of the kvd");
  c.tenants->add_flag("-a,--all", f.all, "every kvd on the node");
  c.tenants->add_option("--sort", f.sort, sort_keys)->capture_default_str();
  c.instances = app.add_subcommand("instances", "a row per engine kvd runs from its YAML (every kvd's with --all)");
  c.instances->add_option("ipc", f.ipc, "IPC name of the kvd");
  c.instances->add_flag("-a,--all", f.all, "every kvd on the node");
  c.watch = app.add_subcommand("watch", "list, tenants and instances, refreshed (of one kvd, or all)");
  c.watch->add_option("ipc", f.ipc, "IPC name of the kvd (default: every kvd)");
  c.watch->add_option("-n,--interval", f.interval, "seconds between refreshes")
      ->capture_default_str()
      ->check(seconds);
  c.watch->add_option("--count", f.count, "stop after this many refreshes (0: never)")
      ->check(CLI::NonNegativeNumber);
  c.watch->add_option("--sort", f.sort, "tenant order: " + sort_keys)->capture_default_str();
  c.top = app.add_subcommand("top",
                             "live full-screen view: a bar per device and per tenant, and the instances (q quits)");
  c.top->add_option("ipc", f.ipc, "IPC name of the kvd (n/p switch kvds)");
  c.top->add_option("-n,--interval", f.top_interval, "seconds between refreshes")
      ->capture_default_str()
      ->check(seconds);
  c.top->add_option("--sort", f.top_sort, sort_keys + " (s cycles)")->capture_default_str();
  c.top->add_flag("--once", f.once, "print one frame and exit (no full screen)");
  c.limit = app.add_subcommand("limit", "set a tenant's limit: limit [IPC] TENANT SIZE|PCT%");
  c.limit->add_option("IPC-TENANT-SIZE", f.positionals, "[IPC] TENANT SIZE (512M, 2G, 1.5GiB, 30%)")
      ->required()
      ->expected(2, 3);
  c.limit->add_flag("--wait", f.wait, "wait until the tenant is under its new limit");
  c.limit->add_option("--timeout", f.timeout, "seconds --wait waits")->capture_default_str()->check(timeout);
  c.evict = app.add_subcommand("evict", "ask a tenant to give pages back: evict [IPC] TENANT [--bytes N]");
  c.evict->add_option("IPC-TENANT", f.positionals, "[IPC] TENANT, or [IPC] with --objects, or KEY... with --cluster")
      ->expected(0, 1 << 20);
  c.evict->add_flag("--cluster", f.cluster, "remove the KEYs from every node of the cluster (through the master)");
  c.evict->add_flag("--objects", f.objects, "evict objects of kvd's object store instead (by its policy)");
  c.evict->add_option("--device", f.device, "with --objects: only this device");
  c.evict->add_option("--bytes", f.bytes, "how much (e.g. 512M); default: all it holds");
  c.evict->add_option("--timeout", f.timeout, "seconds to wait for the pages")
      ->capture_default_str()
      ->check(timeout);
  c.objects =
      app.add_subcommand("objects", "a row per object of a kvd's object store, then its v2 slabs: objects [IPC]");
  c.objects->add_option("ipc", f.ipc, "kvd IPC name");
  c.objects->add_flag("--cluster", f.cluster, "every object of the cluster and where its copies are (the master's index)");
  c.cluster = app.add_subcommand("cluster", "the cluster master: who leads, the term, every node and its store");
  c.cleanup = app.add_subcommand(
      "cleanup", "remove what dead kvds left: segments, sockets, locks, journals past their recovery window");
  c.cleanup->add_option("ipc", f.cleanup_names, "only these IPC names (default: every dead kvd)");
  c.cleanup->add_flag("--dry-run", f.dry_run, "say what would be removed, remove nothing");
  c.cleanup->add_flag("--logs", f.logs, "also the logs of their instances");
  usage->Set(c.list, "[IPC...]");
  usage->Set(c.devices, "[IPC | --all]");
  usage->Set(c.tenants, "[IPC | --all]");
  usage->Set(c.instances, "[IPC | --all]");
  usage->Set(c.watch, "[IPC]");
  usage->Set(c.top, "[IPC]");
  usage->Set(c.limit, "[IPC] TENANT SIZE|PCT%");
  usage->Set(c.evict, "[IPC] TENANT | --objects [IPC] | --cluster KEY...");
  usage->Set(c.objects, "[IPC] | --cluster");
  usage->Set(c.cluster, "");
  usage->Set(c.cleanup, "[IPC...]");
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  return c;
}

// The kvds `list` shows: those named, in the order named (as kvcached's
// `kvctl list [IPC...]`), else every kvd on the node. A name that is no kvd's
// fails the command (exit 3), naming the kvds there are.
Result<std::vector<Kvd>> ListKvds(const std::vector<std::string>& names, uint64_t now_unix_ns,
                                  std::vector<ipc::SegmentEntry>* skipped) {
  if (names.empty()) return DiscoverKvds(now_unix_ns, skipped);
  std::vector<Kvd> kvds;
  for (const std::string& name : names) {
    if (std::any_of(kvds.begin(), kvds.end(), [&](const Kvd& kvd) { return kvd.ipc_name == name; })) continue;
    NANOKV_ASSIGN_OR_RETURN(Kvd kvd, ReadKvd(name, now_unix_ns));
    kvds.push_back(std::move(kvd));
  }
  return kvds;
}

int RunViews(const Flags& f, const Commands& c) {
  ViewOptions view = MakeViewOptions(f);
  if (c.list->parsed()) {
    std::vector<ipc::SegmentEntry> skipped;
    auto kvds = ListKvds(f.list_names, view.now_unix_ns, &skipped);
    if (!kvds.ok()) return Fail(kvds.status());
    Print(ListView(*kvds, view, skipped));
    if (!f.json) {
      // Said, not silently dropped: why a row is unreadable, what was skipped.
      for (const Kvd& kvd : *kvds) {
        if (kvd.state == KvdState::kUnreadable) {
          std::fprintf(stderr, "kvctl: kvd '%s' is unreadable: %s\n", kvd.ipc_name.c_str(),
                       std::string(kvd.error.message()).c_str());
        }
      }
      for (const ipc::SegmentEntry& entry : skipped) {
        std::fprintf(stderr, "kvctl: skipped %s\n", std::string(entry.why.message()).c_str());
      }
    }
    return kExitOk;
  }
  view.with_ipc = f.all;
  auto sort = ParseSortKey(f.sort);
  if (!sort.ok()) return Usage(std::string(sort.status().message()));
  view.sort = *sort;
  auto kvds = ViewKvds(f.ipc, f.all, view);
  if (!kvds.ok()) return Fail(kvds.status());
  if (c.devices->parsed()) {
    Print(DevicesView(*kvds, view));
  } else if (c.instances->parsed()) {
    Print(InstancesView(*kvds, view));
  } else {
    Print(TenantsView(*kvds, view));
  }
  return kExitOk;
}

int RunWatchCommand(const Flags& f) {
  WatchOptions options;
  options.ipc_name = f.ipc;
  options.interval = Millis(f.interval);
  options.count = f.count;
  options.json = f.json;
  options.colour = f.json ? ColourMode::kNever : ParseColour(f.colour);
  auto sort = ParseSortKey(f.sort);
  if (!sort.ok()) return Usage(std::string(sort.status().message()));
  options.sort = *sort;
  Status watched = RunWatch(options);
  return watched.ok() ? kExitOk : Fail(watched);
}

int RunTopCommand(const Flags& f) {
  if (f.json) return Usage("top has no --json: use `kvctl watch --json` or `kvctl tenants --json`");
  TopOptions options;
  options.ipc_name = f.ipc;
  options.interval = Millis(f.top_interval);
  options.colour = ParseColour(f.colour);
  options.once = f.once;
  auto sort = ParseSortKey(f.top_sort);
  if (!sort.ok()) return Usage(std::string(sort.status().message()));
  options.sort = *sort;
  Status ran = RunTop(options);
  if (ran.code() == Code::kFailedPrecondition) return Usage(std::string(ran.message()));  // no terminal
  return ran.ok() ? kExitOk : Fail(ran);
}

int PrintReport(const Result<Report>& report) {
  if (!report.ok()) return Fail(report.status());
  Print(report->text);
  return report->exit_code;
}

// The object store's commands: kvd answers kFailedPrecondition when it runs
// no store, which is "not enabled", not "not running".
int PrintObjectReport(const Result<Report>& report) {
  if (!report.ok() && report.status().code() == Code::kFailedPrecondition) {
    return Fail(report.status(), kExitNotEnabled);
  }
  return PrintReport(report);
}

int RunObjectEvictCommand(const Flags& f);

int RunChangeCommand(const Flags& f, const Commands& c) {
  CommandOptions command;
  command.json = f.json;
  command.timeout = Millis(f.timeout);
  command.wait = f.wait;
  const std::vector<std::string>& args = f.positionals;
  if (c.limit->parsed()) {
    const bool named = args.size() == 3;
    auto size = ParseSizeOrShare(args.back());
    if (!size.ok()) return Usage(std::string(size.status().message()));
    auto name = ResolveIpcName(named ? args[0] : "");
    if (!name.ok()) return Fail(name.status());
    return PrintReport(RunLimit(*name, args[named ? 1 : 0], *size, command));
  }
  if (f.cluster) {
    if (args.empty()) return Usage("evict --cluster needs the KEYs to remove");
    return PrintReport(RunClusterEvict(f.master, args, f.json));
  }
  if (f.objects) return RunObjectEvictCommand(f);
  if (args.empty()) return Usage("evict needs a TENANT (or --objects)");
  if (args.size() > 2) return Usage("evict takes [IPC] TENANT");
  const bool named = args.size() == 2;
  uint64_t bytes = 0;  // all it holds
  if (!f.bytes.empty()) {
    auto parsed = ParseBytes(f.bytes);
    if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
    if (*parsed == 0) return Usage("--bytes 0: leave --bytes out to evict all a tenant holds");
    bytes = *parsed;
  }
  auto name = ResolveIpcName(named ? args[0] : "");
  if (!name.ok()) return Fail(name.status());
  return PrintReport(RunEvict(*name, args[named ? 1 : 0], bytes, command));
}

int RunObjectEvictCommand(const Flags& f) {
  if (f.positionals.size() > 1) return Usage("evict --objects takes at most an IPC name");
  uint64_t bytes = 0;  // down to the store's low watermark
  if (!f.bytes.empty()) {
    auto parsed = ParseBytes(f.bytes);
    if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
    bytes = *parsed;
  }
  auto name = ResolveIpcName(f.positionals.empty() ? "" : f.positionals[0]);
  if (!name.ok()) return Fail(name.status());
  return PrintObjectReport(RunObjectEvict(*name, f.device, bytes, f.json));
}

int RunObjectsCommand(const Flags& f) {
  if (f.cluster) {
    if (!f.ipc.empty()) return Usage("objects --cluster takes no IPC name: it asks the master");
    return PrintReport(RunClusterObjects(f.master, f.json));
  }
  auto name = ResolveIpcName(f.ipc);
  if (!name.ok()) return Fail(name.status());
  return PrintObjectReport(RunObjects(*name, f.json));
}

int RunCleanupCommand(const Flags& f) {
  CleanupOptions options;
  options.dry_run = f.dry_run;
  options.logs = f.logs;
  for (const std::string& name : f.cleanup_names) {
    if (!ipc::ValidIpcName(name)) return Usage("'" + name + "' is not an IPC name");
  }
  options.only = f.cleanup_names;
  auto removals = Cleanup(options);
  if (!removals.ok()) return Fail(removals.status());
  Print(CleanupReport(*removals, options, f.json));
  for (const Removal& removal : *removals) {
    if (!removal.status.ok()) return ExitCodeFor(removal.status);
  }
  return kExitOk;
}

int Main(int argc, char** argv) {
  // Run as kvtop: kvctl top.
  std::vector<std::string> args(argv, argv + argc);
  const std::string program = args[0].substr(args[0].find_last_of('/') + 1);
  if (program == "kvtop") args.insert(args.begin() + 1, "top");

  // Diagnostics go to stderr, never into a table or a JSON document.
  spdlog::set_default_logger(spdlog::stderr_color_mt("kvctl"));
  spdlog::set_level(spdlog::level::warn);

  CLI::App app{"kvctl: see and steer the nanokv daemons (kvd) on this node.\n"
               "Views read kvd's /dev/shm segment and work while kvd is busy or hung;\n"
               "limit and evict go through kvd's socket (root or kvd's user only).",
               "kvctl"};
  Flags flags;
  Commands commands = Define(app, flags);
  app.set_version_flag("--version", ops::VersionLine("kvctl"), "print kvctl's version, commit and backends, and exit");
  std::vector<const char*> raw;
  for (const std::string& arg : args) raw.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(raw.size()), raw.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && std::find(args.begin(), args.end(), "--json") != args.end()) {
      errors_as_json = true;
      return Usage(e.what());
    }
    int code = app.exit(e);  // prints the help, or the error
    return code == 0 ? kExitOk : kExitUsage;
  }
  errors_as_json = flags.json;
  if (flags.verbose) spdlog::set_level(spdlog::level::debug);
  if (!flags.run_dir.empty()) setenv("NANOKV_RUN_DIR", flags.run_dir.c_str(), 1);

  if (commands.list->parsed() || commands.devices->parsed() || commands.tenants->parsed() ||
      commands.instances->parsed()) {
    return RunViews(flags, commands);
  }
  if (commands.watch->parsed()) return RunWatchCommand(flags);
  if (commands.top->parsed()) return RunTopCommand(flags);
  if (commands.limit->parsed() || commands.evict->parsed()) return RunChangeCommand(flags, commands);
  if (commands.cleanup->parsed()) return RunCleanupCommand(flags);
  if (commands.objects->parsed()) return RunObjectsCommand(flags);
  if (commands.cluster->parsed()) {
    return PrintReport(RunCluster(flags.master, flags.json, MakeViewOptions(flags).colour));
  }
  return Usage("no command");
}

}  // namespace
}  // namespace nanokv::kvctl

int main(int argc, char** argv) { return nanokv::kvctl::Main(argc, argv); }
