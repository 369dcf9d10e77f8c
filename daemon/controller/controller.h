// The controller: kvd runs the engines listed under `instances:` in its YAML,
// supervises them, restarts them per policy, and stops them when kvd stops.
//
// Each instance goes through these states (ipc::InstanceState, published as
// one segment row per instance on every change):
//
//   kStarting    waiting its start_delay; no process yet (pid 0)
//   kRunning     its process lives (pid set)
//   kRestarting  its process ended and the policy restarts it after a backoff
//                (exit_code: how the last life ended)
//   kExited      ended for good: the policy does not restart this end, or kvd
//                is stopping
//   kFailed      given up: it ended max_restarts + 1 times in a row (or could
//                not be started that often)
//
// exit_code is the process's exit status, or -N when signal N killed it.
//
// Restart policy: `never`; `on-failure` (a non-zero exit or a death by
// signal); `always` (any end). The delay before a restart starts at `backoff`
// and doubles up to 30 s. A life of at least a minute is a recovery: the delay
// and the count toward max_restarts start over. `restarts` in the row counts
// every restart.
//
// An engine's pages come back through kvd's own death handling (NodeServer
// sees its socket close or its pidfd fire), not through the controller.
//
// Reconfigure (kvd's SIGHUP reload) takes a new list: an instance not in it
// is stopped as at kvd's stop (SIGTERM, SIGKILL after its grace) and its row
// goes; one that changed beyond its `limit` is stopped so and started again
// with the new config at once; a new one starts after its start_delay. A
// change of `limit` alone restarts nothing (kvd sets the tenant's limit live;
// the next start gets the new one).
//
// One thread does everything: it waits in poll(2) on one pidfd per running
// instance and a stop eventfd, with the next start or kill deadline as its
// timeout. It never touches NodeState or the server's thread.
#ifndef NANOKV_DAEMON_CONTROLLER_CONTROLLER_H_
#define NANOKV_DAEMON_CONTROLLER_CONTROLLER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "daemon/config/config.h"
#include "daemon/controller/instance_process.h"
#include "ipc/segment/layout.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

struct ControllerOptions {
  InstanceSite site;                                   // ipc name and run dir the engines attach by
  std::chrono::milliseconds max_backoff{30000};        // the doubling stops here
  std::chrono::milliseconds stable_after{60000};       // a life this long resets backoff and count
};

class Controller {
 public:
  // Called on the controller's thread with every instance's row, in config
  // order, after each change. Must not block for long.
  using PublishRows = std::function<void(const std::vector<ipc::InstanceRow>&)>;

  Controller(std::vector<InstanceConfig> instances, ControllerOptions options, PublishRows publish);
  // Stops (as Stop) if running.
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Called once on the controller's thread when every instance has ended
  // after a stop, just before the thread returns. Set before Start.
  void SetOnStopped(std::function<void()> on_stopped) { on_stopped_ = std::move(on_stopped); }

  // Publishes the rows (all kStarting) and starts the thread, which starts
  // each instance once its start_delay has passed. kvd calls it once its
  // socket listens. Errors: eventfd or thread creation.
  Status Start();

  // Asks the thread to stop: every running instance's process group gets
  // SIGTERM, then SIGKILL after that instance's grace; pending starts are
  // dropped. Async-signal-safe (one write(2)); idempotent; returns at once.
  void RequestStop();
  // Waits for the thread (every instance ended and reaped). Idempotent.
  void Wait();
  // RequestStop, then Wait.
  void Stop();
  // Applies a new list of instances (see above) on the controller's thread,
  // soon after; a later call before then replaces this one. Thread-safe.
  void Reconfigure(std::vector<InstanceConfig> instances);

 private:
  struct Instance;

  void Loop();
  void Launch(Instance& instance);
  void Reap(Instance& instance);
  void Ended(Instance& instance, int exit_code, const std::string& how);
  void BeginStop();
  void ApplyPending();
  // SIGTERM to a running instance that is removed or replaced, then SIGKILL
  // after its grace; one not running goes (or restarts) at once.
  void Retire(Instance& instance, std::optional<InstanceConfig> replacement,
              std::chrono::steady_clock::time_point now);
  // A replaced instance, ended: the new config, started at once.
  void Restart(Instance& instance);
  void SetState(Instance& instance, ipc::InstanceState state);
  void PublishAll();

  const ControllerOptions options_;
  const PublishRows publish_;
  std::function<void()> on_stopped_;
  std::vector<Instance> instances_;  // touched by the thread only, once started
  int stop_fd_ = -1;                 // eventfd
  std::atomic<bool> stop_requested_{false};
  std::mutex pending_mu_;
  std::optional<std::vector<InstanceConfig>> pending_;  // Reconfigure's, guarded by pending_mu_
  bool stopping_ = false;            // the thread's own: BeginStop ran
  std::thread thread_;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_CONTROLLER_CONTROLLER_H_
