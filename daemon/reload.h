// kvd's SIGHUP: read the config again (the file, then the flags over it, as
// at start) and apply what can change live (config_diff.h): log_level,
// default_limit, the instances, an instance's limit. The rest is logged as
// needing a restart and kept as it was. A config that does not load changes
// nothing (logged). SIGTERM and SIGINT are not touched.
//
// One thread waits for SIGHUP with sigwaitinfo: kvd blocks SIGHUP before any
// thread starts (BlockReloadSignal), so every thread inherits the block and
// only this one takes it; engines kvd spawns get an empty mask.
#ifndef NANOKV_DAEMON_RELOAD_H_
#define NANOKV_DAEMON_RELOAD_H_

#include <pthread.h>

#include <atomic>
#include <thread>

#include "daemon/config/config.h"
#include "daemon/config/kvd_flags.h"
#include "daemon/controller/controller.h"
#include "daemon/server/node_server.h"

namespace nanokv::kvd {

// Blocks SIGHUP in the calling thread (and every thread it starts later).
void BlockReloadSignal();

class Reloader {
 public:
  // Each argument must outlive the Reloader (Stop joins its thread).
  Reloader(const KvdFlags& flags, KvdConfig running, NodeServer& server, Controller& controller);
  ~Reloader();
  Reloader(const Reloader&) = delete;
  Reloader& operator=(const Reloader&) = delete;

  void Start();
  // Ends the thread (a reload under way finishes first). Idempotent.
  void Stop();

 private:
  void Loop();
  void Reload();

  const KvdFlags& flags_;
  KvdConfig running_;  // what kvd runs on: the start's config with every live change applied
  NodeServer& server_;
  Controller& controller_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_RELOAD_H_
