// kvd --role master: loads the config, serves until SIGTERM or SIGINT, then
// stops leading (every node session ends) and exits 0.
#include "master/service/master_main.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "master/config/master_flags.h"
#include "master/service/master_server.h"
#include "ops/logging.h"
#include "ops/sd_notify.h"
#include "ops/version.h"

namespace nanokv::master {

int MasterMain(int argc, char** argv) {
  CLI::App app{"kvd --role master: the nanokv cluster master. It keeps the index of every object on the "
               "nodes (kvds with `master:` in their config) and routes plans to them; engines reach it "
               "through ClusterClient, operators through `kvctl cluster`."};
  app.name("kvd --role master");
  MasterFlags flags(&app);
  app.set_version_flag("--version", ops::VersionLine("kvd --role master"),
                       "print the master's version, commit and backends, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // every usage error is 2, as kvd's
  }
  // Every line to stderr (before the config is read too), then as the config
  // says: a file besides, text or JSON lines (ops/logging.h).
  ops::LogOptions log;
  log.program = "kvd-master";
  (void)ops::SetUpLogging(log);
  auto config = flags.Load();
  if (!config.ok()) {
    spdlog::critical("master: {}", config.status().ToString());
    return 2;  // a config (file or flag) that does not load is a usage error
  }
  log.level = config->log_level;
  log.format = config->log_format == "json" ? ops::LogFormat::kJson : ops::LogFormat::kText;
  log.file = config->log_file;
  if (Status logging = ops::SetUpLogging(log); !logging.ok()) {
    spdlog::critical("master: {}", logging.ToString());
    return 1;
  }
  spdlog::info("{}", ops::VersionLine("kvd --role master"));
  // The signals are taken by sigwait below, never by a handler: block them
  // before any thread starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  auto server = MasterServer::Start(*config);
  if (!server.ok()) {
    spdlog::critical("master: {}", server.status().ToString());
    return 1;
  }
  // systemd's Type=notify: serving now (nothing when not under systemd).
  (void)ops::SdNotify("READY=1");
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  spdlog::info("master: signal {}: stopping", signal_number);
  (void)ops::SdNotify("STOPPING=1");
  (*server)->Stop();
  spdlog::info("master: stopped cleanly");
  return 0;
}

}  // namespace nanokv::master
