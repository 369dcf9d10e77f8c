// kvd's node role (the default; entry/kvd_main.cc dispatches on --role): the per-node daemon. Owns the GPU memory named in its config as pools
// of physical pages, serves engines on a Unix socket, publishes its state in
// /dev/shm, runs the engines its config lists (the controller), and gives
// back everything on SIGTERM/SIGINT: the engines it runs are stopped first
// (their pages come back while the server still runs), then the server.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "daemon/node_main.h"
#include "daemon/reload.h"
#include "daemon/store_restart.h"
#include "base/clocks.h"

#include "base/naming.h"
#include "base/open_file_limit.h"
#include "base/run_dir.h"
#include "daemon/cluster/node_agent.h"
#include "daemon/config/config.h"
#include "daemon/config/kvd_flags.h"
#include "daemon/config/observability_keys.h"
#include "daemon/controller/controller.h"
#include "daemon/node/node_state.h"
#include "daemon/node/page_journal.h"
#include "daemon/node/segment_publisher.h"
#include "daemon/objects/object_index.h"
#include "daemon/objects/tier_worker.h"
#include "daemon/server/fd_budget.h"
#include "daemon/server/kvd_metrics.h"
#include "daemon/server/limits_check.h"
#include "daemon/server/node_server.h"
#include "daemon/transfer/transfer_agent.h"
#include "gpu/mps.h"
#include "ipc/uds/channel.h"
#include "ops/http_server.h"
#include "ops/metrics.h"
#include "ops/sd_notify.h"
#include "ops/version.h"

namespace nanokv::kvd {
namespace {

// For the signal handler only. With a controller, a signal stops it, and it
// stops the server once its instances have ended; without one, the server.
NodeServer* g_server = nullptr;
Controller* g_controller = nullptr;

void OnSignal(int) {
  if (g_controller != nullptr) {
    g_controller->RequestStop();
  } else if (g_server != nullptr) {
    g_server->Stop();
  }
}

int Fail(const Status& status) {
  spdlog::critical("kvd: {}", status.ToString());
  return 1;
}

// The journal at a start that fails after it was made: kept if it records
// pages engines still hold (the previous kvd's, held back for them), so the
// next start can still hand them back; else removed: nothing left behind.
class JournalOnFailure {
 public:
  JournalOnFailure(PageJournal& journal, NodeState& node) : journal_(journal), node_(node) {}
  ~JournalOnFailure() {
    if (disarmed_) return;
    node_.SetJournal(nullptr);
    if (node_.HoldsPages()) {
      journal_.MarkStopped();
      spdlog::info("kvd: the page journal stays: it holds pages engines still hold");
    } else {
      journal_.Remove();
    }
  }
  void Disarm() { disarmed_ = true; }

 private:
  PageJournal& journal_;
  NodeState& node_;
  bool disarmed_ = false;
};

// Every instance's device must be one this kvd serves.
Status CheckInstanceDevices(const KvdConfig& config, const NodeState& node) {
  for (size_t i = 0; i < config.instances.size(); ++i) {
    const InstanceConfig& instance = config.instances[i];
    if (!instance.device) continue;
    bool served = false;
    for (size_t d = 0; d < node.device_count(); ++d) served |= node.device_ordinal(d) == *instance.device;
    if (!served) {
      return Status::InvalidArgument(instance.where + ": instances[" + std::to_string(i) +
                                     "].device: device " + std::to_string(*instance.device) +
                                     " is not one this kvd serves");
    }
  }
  return Status::OK();
}

Result<NodeOptions> PoolOptions(const KvdConfig& config, gpu::Backend& backend) {
  NodeOptions options;
  NANOKV_ASSIGN_OR_RETURN(std::vector<int> devices, ServedDevices(config, backend));
  for (int device : devices) {
    // The pool would refuse it too, without naming the key.
    NANOKV_ASSIGN_OR_RETURN(gpu::DeviceInfo info, backend.GetDeviceInfo(device));
    if (info.granularity != 0 && config.page_bytes % info.granularity != 0) {
      return Status::InvalidArgument(config.Origin("page_size") + ": " + std::to_string(config.page_bytes) +
                                     " bytes is not a multiple of device " + std::to_string(device) +
                                     "'s granularity, " + std::to_string(info.granularity) + " bytes");
    }
    PagePoolConfig pool;
    pool.device = device;
    pool.page_bytes = config.page_bytes;
    pool.reserve_pages = config.reserve_pages;
    if (config.capacity.is_fraction()) {
      pool.gpu_utilization = config.capacity.fraction;
    } else {
      pool.capacity_bytes = config.capacity.bytes;
    }
    options.pools.push_back(pool);
  }
  options.default_limit_bytes = config.default_limit.bytes;
  options.default_limit_fraction = config.default_limit.fraction;
  options.limit_ceiling_bytes = config.limit_ceiling.bytes;
  options.limit_ceiling_fraction = config.limit_ceiling.fraction;
  return options;
}

gpu::HostBackendOptions HostOptionsOf(const KvdConfig& config) {
  gpu::HostBackendOptions host = gpu::HostOptionsFromEnvironment();
  host.devices = config.host_devices;
  if (config.host_device_bytes != 0) host.device_bytes = config.host_device_bytes;
  return host;
}

// Whether kvd's CUDA work goes through the MPS server (gpu/mps.h): it
// changes what a GPU step on a request's path costs (docs/OPERATIONS.md,
// "MPS"). The host backend has no GPU context: nothing to say.
void LogMps(const gpu::Backend& backend) {
  if (backend.name() != "cuda") return;
  spdlog::info("kvd: {}", gpu::DescribeMps(gpu::DetectMps(std::getenv("CUDA_MPS_PIPE_DIRECTORY"))));
}

// kvd --check-limits: the report on stdout, nothing made, nothing served.
int CheckLimits(const KvdConfig& config, bool json) {
  auto backend = gpu::OpenBackend(config.backend, HostOptionsOf(config));
  if (!backend.ok()) return Fail(backend.status());
  LogMps(**backend);
  auto need = NeedsFor(config, **backend, CountOpenFds());
  if (!need.ok()) return Fail(need.status());
  const MachineLimits machine = ReadMachineLimits();
  const LimitsVerdict verdict = Judge(*need, machine);
  const std::string report = json ? LimitsReportJson(*need, machine, verdict) : LimitsReport(*need, machine, verdict);
  std::fputs(report.c_str(), stdout);
  return verdict.ok() ? 0 : kLimitsDoNotSuffice;
}

int Main(int argc, char** argv) {
  CLI::App app{"kvd: the nanokv node daemon. It owns GPU memory as physical pages and shares "
               "them with engine processes (ENABLE_NANOKV=1 NANOKV_IPC_NAME=<name>). "
               "kvd --role master --help: the cluster master."};
  // Before any thread: every thread inherits the block, and only the
  // reloader's sigwaitinfo takes SIGHUP (daemon/reload.h).
  BlockReloadSignal();
  // SIGTERM/SIGINT wait, blocked, until their handler is in place (below):
  // one sent while kvd starts (its socket may already accept) then stops it
  // cleanly once it is up, instead of killing it with nothing cleaned up.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  KvdFlags flags(&app);
  app.set_version_flag("--version", ops::VersionLine("kvd"), "print kvd's version, commit and backends, and exit");
  bool check_limits = false, json = false;
  CLI::Option* check_option = app.add_flag(
      "--check-limits", check_limits,
      "say the fds, memory and devices kvd needs at full use for this config and flags, whether this "
      "machine's limits allow them and the LimitNOFILE= to set if not; exit 0 if they do, 3 if not");
  app.add_flag("--json", json, "with --check-limits: the report as one JSON object")->needs(check_option);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (104, 105, 109, 114...) are its error kinds, not
    // kvd's: every usage error is 2 (docs/OPERATIONS.md, "Exit codes").
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Every line to stderr (before the config is read too), and as the config
  // says: a file besides, text or JSON lines (ops/logging.h).
  (void)ops::SetUpLogging({});
  auto loaded = flags.Load();
  if (!loaded.ok()) {
    Fail(loaded.status());
    return 2;  // a config (file or flag) that does not load is a usage error
  }
  const KvdConfig& config = *loaded;
  Status logging = ops::SetUpLogging(LogOptionsOf(config));
  if (!logging.ok()) return Fail(logging);
  spdlog::info("{}", ops::VersionLine("kvd"));
  if (check_limits) return CheckLimits(config, json);

  // /metrics, when a port is configured: bound first, so a port in use stops
  // kvd before it made anything. Its own thread renders `registry`; kvd's
  // series join it once the node exists. Declared before everything the
  // render reads, so the server (and its thread) goes first at the end.
  ops::Registry registry;
  std::unique_ptr<KvdMetrics> metrics;
  std::unique_ptr<ops::MetricsServer> metrics_server;
  if (config.metrics_port) {
    auto started = ops::MetricsServer::Start(MetricsOptionsOf(config), [&registry] { return registry.Render(); });
    if (!started.ok()) return Fail(started.status());
    metrics_server = std::move(started).value();
  }
  // Every page kvd creates keeps an exported fd open (daemon/server/fd_budget.h).
  OpenFileLimit files = RaiseOpenFileLimit();
  if (files.after != files.before) {
    spdlog::debug("kvd: open-file limit raised from {} to {}", files.before, files.after);
  }

  // kvd's own directory first, and the lock that makes this kvd the only one
  // serving its IPC name from it: nothing else is touched before both hold
  // (base/run_dir.h, docs/ARCHITECTURE.md "Security").
  const std::string run_dir = config.run_dir.empty() ? ipc::RunDir() : config.run_dir;
  Status owned = PrepareRunDirectory(run_dir);
  if (!owned.ok()) return Fail(owned);
  auto lock = RunDirLock::Acquire(ipc::LockPathIn(run_dir, config.ipc_name));
  if (!lock.ok()) {
    return Fail(Status(lock.status().code(), "IPC name " + config.ipc_name + " in " + run_dir +
                                                 ": " + std::string(lock.status().message())));
  }
  const std::string socket_path = ipc::SocketPathIn(run_dir, config.ipc_name);

  auto backend = gpu::OpenBackend(config.backend, HostOptionsOf(config));
  if (!backend.ok()) return Fail(backend.status());
  spdlog::info("kvd: backend {} with {} device(s)", (*backend)->name(), (*backend)->device_count());
  LogMps(**backend);

  auto options = PoolOptions(config, **backend);
  if (!options.ok()) return Fail(options.status());

  // The segment first: creating it proves no live kvd serves this IPC name,
  // so a page journal found now is a dead kvd's, and its engines' pages are
  // held back for them (kvd restart, docs/ARCHITECTURE.md).
  ipc::SegmentOptions segment;
  segment.ipc_name = config.ipc_name;
  segment.mode = config.segment_mode;
  segment.gid = config.group;
  segment.backend = std::string((*backend)->name());
  segment.page_bytes = config.page_bytes;
  segment.socket_path = socket_path;
  auto writer = ipc::SegmentWriter::Create(segment);
  if (!writer.ok()) return Fail(writer.status());
  const std::string journal_path = ipc::JournalPathIn(run_dir, config.ipc_name);
  options->recovery = PageJournal::TakeOver(journal_path);
  if (options->recovery) {
    spdlog::info("kvd: the previous kvd of '{}' left a page journal: {} pages held (engines', the object store's)",
                 config.ipc_name, options->recovery->page_count());
  }
  // The object store's objects come back from a crash:
  // the dead kvd's object journal and the pages its keeper held.
  StoreRestart store_restart =
      TakeOverStore(run_dir, config.ipc_name, config.object_store.enabled(), &options->recovery);
  const uint64_t fds_before_pages = CountOpenFds();
  auto node = NodeState::Create(**backend, *options);
  if (!node.ok()) return Fail(node.status());
  // What one page costs in fds at rest on this backend, from the pages
  // created so far, less the exports kept for their first grant (the pool's
  // refill thread may add one between the reads: rounded). Host: 1 (the
  // memfd); cuda and hip: 0 (a driver handle).
  uint64_t first_pages = 0;
  for (const DeviceCounts& c : (*node)->Counts()) first_pages += c.created_pages;
  const uint64_t fds_after_pages = CountOpenFds();
  const uint64_t kept_fds = (*node)->KeptFds();
  const uint64_t page_fds = fds_after_pages > fds_before_pages + kept_fds ? fds_after_pages - fds_before_pages - kept_fds : 0;
  const uint64_t fds_per_page = first_pages > 0 ? (page_fds + first_pages / 2) / first_pages : 0;
  Status devices_ok = CheckInstanceDevices(config, **node);
  if (!devices_ok.ok()) return Fail(devices_ok);
  std::vector<JournalDevice> journal_devices;
  for (const DeviceCounts& c : (*node)->Counts()) {
    journal_devices.push_back({c.device, static_cast<uint32_t>(c.capacity_pages)});
  }
  auto journal = PageJournal::Create(journal_path, config.page_bytes, journal_devices,
                                     static_cast<uint64_t>(config.recovery_window.count()));
  if (!journal.ok()) return Fail(journal.status());
  (*node)->SetJournal(journal->get());
  // Whole now: it replaces the previous kvd's (whose pages it records too).
  JournalOnFailure journal_on_failure(**journal, **node);
  Status installed = (*journal)->Install();
  if (!installed.ok()) return Fail(installed);
  // The object store's share of each device, held by kvd itself
  // (daemon/objects/object_index.h); destroyed before the node, after the server.
  std::unique_ptr<ObjectIndex> objects;
  std::unique_ptr<PageKeeper, KeeperStop> keeper;  // goes after the server, before the store
  std::unique_ptr<TierWorker> tier_worker;         // goes before the store it moves objects of
  if (config.object_store.enabled()) {
    // The store's refusals are about a size asked: the host tier's name
    // their key, the rest are the store's own (too small, over the capacity).
    auto refused = [&](const Status& why) {
      constexpr std::string_view kHostTier = "object_store.host_tier: ";
      std::string_view message = why.message();
      if (message.starts_with(kHostTier)) message.remove_prefix(kHostTier.size());
      const bool host =
          message.size() != why.message().size() || message.find("object_store.host_tier") != std::string_view::npos;
      return Fail(Status(why.code(), config.Origin(host ? "object_store.host_tier" : "object_store.size") + ": " +
                                         std::string(message)));
    };
    Status host_tier = CheckHostTier(config.object_store, (*backend)->device_count());
    if (!host_tier.ok()) return refused(host_tier);
    auto store = ObjectIndex::Create(**backend, **node, config.object_store, &store_restart, SteadyNowNs());
    if (!store.ok()) return refused(store.status());
    objects = std::move(store).value();
    if (objects->has_host_tier()) tier_worker = TierWorker::Start(*objects);
    keeper = KeepStore(*objects, **node, run_dir, config.ipc_name,
                       static_cast<uint32_t>(config.recovery_window.count()));
  }
  SegmentPublisher publisher(std::move(*writer), **backend, **node);
  // The first publish has the devices: the controller's instance rows (it
  // exists from here, instances or not) must never be the first a reader sees.
  publisher.Publish(**node);

  auto listener = ipc::Listener::Bind(socket_path, config.socket_mode, config.group);
  if (!listener.ok()) return Fail(listener.status());

  ServerOptions server_options;
  server_options.allowed_uids = config.allowed_uids;
  server_options.allowed_gids = config.allowed_gids;
  server_options.groups = config.groups;
  server_options.segment_name = "nanokv_" + config.ipc_name;
  server_options.backend_name = std::string((*backend)->name());
  for (int device = 0; device < (*backend)->device_count(); ++device) {
    auto uuid = (*backend)->GetDeviceUuid(device);
    server_options.device_uuids.push_back(uuid.ok() ? *uuid : std::string());
  }
  server_options.check_invariants = config.check_invariants;
  server_options.recovery_window_ms = static_cast<uint32_t>(config.recovery_window.count());
  // Measured now, with the reserve pages and the store's share created.
  uint64_t pages_to_come = 0;
  for (const DeviceCounts& c : (*node)->Counts()) pages_to_come += c.capacity_pages - c.created_pages;
  FdBudget budget = MeasureFdBudget(pages_to_come, fds_per_page);
  server_options.max_connections = ConnectionLimit(budget, config.max_connections);
  server_options.max_connections_per_process = config.max_connections_per_process;
  server_options.busy_poll_us = config.busy_poll_us;
  uint64_t wanted = config.max_connections != 0 ? config.max_connections : kDefaultMaxConnections;
  if (budget.connections() < wanted) {
    spdlog::warn("kvd: {}; serving at most {} connections: raise kvd's open-file limit "
                 "(ulimit -n, systemd LimitNOFILE=)", budget.ToString(), server_options.max_connections);
  } else {
    spdlog::info("kvd: {}; serving at most {} connections, {} per process", budget.ToString(),
                 server_options.max_connections, server_options.max_connections_per_process);
  }
  // The same verdict as kvd --check-limits, in one line (the fds per page as measured).
  auto need = NeedsFor(config, **backend, fds_before_pages);
  if (need.ok()) {
    need->fds_per_page = fds_per_page;
    const MachineLimits machine = ReadMachineLimits();
    const LimitsVerdict verdict = Judge(*need, machine);
    if (verdict.ok()) {
      spdlog::info("kvd: {}", LimitsLogLine(*need, machine, verdict));
    } else {
      spdlog::warn("kvd: {}", LimitsLogLine(*need, machine, verdict));
    }
  }
  NodeServer server(**node, std::move(*listener), server_options);
  server.SetObjectStore(objects.get());
  if (metrics_server) {
    std::vector<int> ordinals;
    for (size_t d = 0; d < (*node)->device_count(); ++d) ordinals.push_back((*node)->device_ordinal(d));
    metrics = std::make_unique<KvdMetrics>(registry, config.ipc_name, ordinals, objects != nullptr,
                                           objects != nullptr && objects->has_host_tier());
    server.SetMetrics(metrics.get());
  }
  server.SetPublisher([&](const NodeState& n) {
    publisher.Publish(n);
    if (metrics) {  // what /metrics reads that the segment does not hold
      metrics->PublishServer(server.connection_count(), server.shed_connections(), (*backend)->device_work_calls());
      if (objects) metrics->PublishObjects(objects->Stats());
      if (objects) metrics->PublishSlabs(objects->slab_counters());
    }
  });
  // With `master:`, the node's session with the cluster master
  // (daemon/cluster/node_agent.h); it goes before the store it reports on.
  // With a data_address, the transfer agent too (daemon/transfer/): the
  // node agent tells the master the address it bound.
  MasterLinkConfig link = config.master;
  std::unique_ptr<TransferAgent> transfer;
  std::unique_ptr<NodeAgent> agent;
  if (config.master.enabled()) {
    auto transfer_started = StartTransferAgent(*objects, **backend, &link);
    if (!transfer_started.ok()) return Fail(transfer_started.status());
    transfer = std::move(transfer_started).value();
    auto started = NodeAgent::Start(
        *objects, NodeAgentOptions{link, server_options.device_uuids, transfer ? transfer->mode() : "", socket_path});
    if (!started.ok()) return Fail(started.status());
    agent = std::move(started).value();
  }

  // The controller, when the config lists instances. It starts them only
  // once the socket listens (Bind above listens; the server accepts what
  // queued once Run starts) and has its own thread: the server's is never
  // blocked by a start, a wait or a stop.
  // Also with no instance: a SIGHUP may add some.
  ControllerOptions controller_options;
  controller_options.site = InstanceSite{config.ipc_name, run_dir};
  auto controller = std::make_unique<Controller>(
      config.instances, controller_options,
      [&publisher](const std::vector<ipc::InstanceRow>& rows) { publisher.PublishInstances(rows); });
  controller->SetOnStopped([&server] { server.Stop(); });

  g_server = &server;
  g_controller = controller.get();
  struct sigaction action{};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // This thread takes them from now on; the threads started so far keep
  // them blocked, so the handler always runs here.
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  for (const DeviceCounts& c : (*node)->Counts()) {
    spdlog::info("kvd: device {}: {} pages of {} bytes ({} created ahead)", c.device,
                 c.capacity_pages, (*node)->page_bytes(), c.created_pages);
  }
  spdlog::info("kvd: ready: ipc name '{}', socket {}, segment /dev/shm/nanokv_{}", config.ipc_name,
               socket_path, config.ipc_name);
  if (metrics_server) spdlog::info("kvd: metrics at {}", metrics_server->url());
  // systemd's Type=notify: ready once the socket accepts (no-op elsewhere).
  Status notified = ops::SdNotify("READY=1\nSTATUS=serving " + socket_path);
  if (!notified.ok()) spdlog::warn("kvd: sd_notify: {}", notified.ToString());
  Status started = controller->Start();
  if (!started.ok()) {
    g_controller = nullptr;
    g_server = nullptr;
    publisher.Remove();
    return Fail(started);
  }
  if (!config.instances.empty()) spdlog::info("kvd: controller: {} instance(s)", config.instances.size());
  Reloader reloader(flags, config, server, *controller);
  reloader.Start();
  journal_on_failure.Disarm();  // from here the stop below decides
  Status ran = server.Run();
  reloader.Stop();  // before what it posts to and reconfigures goes
  (void)ops::SdNotify("STOPPING=1");
  // Stopped by the controller after its instances ended, or the server
  // failed by itself: then the instances are stopped now (a no-op otherwise).
  controller->Stop();
  g_controller = nullptr;
  g_server = nullptr;
  publisher.Remove();
  // Engines keep the pages they mapped past kvd's stop; the journal lets
  // the next kvd take them back. With nothing held it has nothing to say.
  (*node)->SetJournal(nullptr);
  if (server.pages_held_at_stop()) {
    (*journal)->MarkStopped();
    spdlog::info("kvd: engines still hold pages: the page journal {} stays for the next kvd",
                 journal_path);
  } else {
    (*journal)->Remove();
  }
  if (!ran.ok()) return Fail(ran);
  spdlog::info("kvd: stopped cleanly");
  return 0;
}

}  // namespace

int NodeMain(int argc, char** argv) { return Main(argc, argv); }

}  // namespace nanokv::kvd
