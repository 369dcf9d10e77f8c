// The real kvd inside the test process, for the client's tests: the host
// backend, kvd's NodeState (daemon/node/node_state.h) and its NodeServer
// (daemon/server/node_server.h), whose epoll loop runs on a thread of its own, wired
// as daemon/main.cc wires them. Nothing here is scripted: every attach, grant,
// return, share, limit, reclaim, recycle, forget and shutdown a client sees
// is kvd's own. Only the /dev/shm segment is left out (these tests do not
// read it); kvd's publish hook, which feeds the segment in main.cc, feeds
// snapshot() here instead.
//
// Normal behaviour is tested against this. misbehaving_kvd.h holds the one
// scripted peer, for the faults the real kvd never sends.
//
// Reading kvd's state. NodeState is not thread-safe and the server thread
// changes it while it serves, so a test reads node() only where the server
// cannot be touching it:
//   1. after Stop(), or
//   2. once every request of every client has returned and nothing else can
//      reach kvd: no other thread calling a client, no reclaim callback
//      running, no abandoned request, no connection opening or closing. The
//      server changes the node only while it handles a datagram or a closed
//      connection, and sends a request's reply after the change; receiving
//      that reply orders the test's read after it (TSan models the socket).
// Anything asynchronous (a connection kvd has yet to see closed) is waited
// for with WaitFor(), whose predicate sees a snapshot the server thread made
// in kvd's publish hook.
#ifndef NANOKV_TESTS_UNIT_CLIENT_IN_PROCESS_KVD_H_
#define NANOKV_TESTS_UNIT_CLIENT_IN_PROCESS_KVD_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/server/node_server.h"
#include "daemon/node/node_state.h"
#include "gpu/backend.h"
#include "nanokv/client.h"
#include "nanokv/status.h"
#include "tests/unit/client/client_test_util.h"

namespace nanokv::testing {

struct InProcessKvdOptions {
  int devices = 1;                   // simulated host devices, all served
  uint32_t pages_per_device = 16;    // each device's pool capacity (and its memory)
  uint32_t reserve_pages = 2;        // created ahead of demand, per device
  uint64_t default_limit_bytes = 0;  // 0: a tenant that asks none gets the capacity
};

// What the server thread saw at its latest publish (after each loop turn that
// changed something, at most every few ms, and once a second regardless).
struct KvdSnapshot {
  uint64_t publishes = 0;
  size_t connections = 0;  // engine connections open
  std::vector<kvd::Tenant> tenants;
  std::vector<kvd::DeviceCounts> devices;

  const kvd::Tenant* FindTenant(const std::string& name) const;
};

class InProcessKvd {
 public:
  static constexpr size_t kPageBytes = 2u << 20;

  // Builds the node, binds ipc::SocketPath(ipc_name) (so $NANOKV_RUN_DIR
  // must name an existing directory) and returns once the server serves.
  static Result<std::unique_ptr<InProcessKvd>> Start(const std::string& ipc_name,
                                                     const InProcessKvdOptions& options = {});
  // Stop(), then the node releases every page.
  ~InProcessKvd();
  InProcessKvd(const InProcessKvd&) = delete;
  InProcessKvd& operator=(const InProcessKvd&) = delete;

  // Stops kvd the way SIGTERM does: it stops accepting, sends every engine
  // the shutdown notice, detaches every tenant and removes its socket.
  // Idempotent; returns the server's Run() status.
  Status Stop();

  const std::string& ipc_name() const { return ipc_name_; }
  // The segment name kvd tells engines at attach ("nanokv_<ipc name>").
  std::string segment_name() const { return "nanokv_" + ipc_name_; }

  // kvd's state. Read it only as the header comment says (rules 1 and 2).
  const kvd::NodeState& node() const { return *node_; }

  KvdSnapshot snapshot() const;
  uint64_t publishes() const { return snapshot().publishes; }
  // Waits up to `timeout` until `done` holds for a snapshot published after
  // publish number `after`; true if one did. A snapshot can be older than the
  // last thing a client saw kvd do, so read `after` from publishes() at a
  // moment after kvd did what `done` must not overlook (e.g. after a reply
  // that proves the attach happened). The server publishes within a few ms
  // of a change and once a second regardless. Gives up once it has stopped.
  bool WaitFor(const std::function<bool(const KvdSnapshot&)>& done, uint64_t after,
               std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

 private:
  InProcessKvd(std::string ipc_name, std::unique_ptr<gpu::Backend> backend,
               std::unique_ptr<kvd::NodeState> node);
  // The server's publish hook: runs on the server thread.
  void Publish(const kvd::NodeState& node);

  const std::string ipc_name_;
  std::unique_ptr<gpu::Backend> backend_;  // must outlive node_ (its pools use it)
  std::unique_ptr<kvd::NodeState> node_;   // must outlive server_

  mutable std::mutex mu_;
  mutable std::condition_variable published_;
  KvdSnapshot snapshot_;  // guarded by mu_
  bool exited_ = false;   // guarded by mu_: Run() returned
  Status run_status_;     // guarded by mu_

  std::unique_ptr<kvd::NodeServer> server_;  // publishes into the members above
  std::thread thread_;                       // runs server_->Run()
};

// A test with its own socket directory and, after StartKvd, the real kvd.
// TearDown stops kvd and checks what must hold once every engine is gone:
// no tenant, no page held, kvd's invariants.
class InProcessKvdTest : public ::testing::Test {
 protected:
  static constexpr size_t kPage = InProcessKvd::kPageBytes;

  void TearDown() override;

  // Starts kvd_ under a fresh IPC name.
  void StartKvd(const InProcessKvdOptions& options = {});
  // Attaches to kvd_; the tenant is "test-engine" unless `options` names one.
  Result<std::unique_ptr<Client>> Attach(ClientOptions options = {});
  // StartKvd with `pages` per device on `devices` devices, then Attach; null
  // (and a failure recorded) if either fails.
  std::unique_ptr<Client> Start(uint32_t pages = 16, ClientOptions options = {}, int devices = 1);

  // kvd's view of one tenant or device (read rule 2 applies).
  const kvd::Tenant* FindTenant(const std::string& name) const;
  uint32_t UsedPages(const std::string& tenant, int device = 0) const;
  kvd::DeviceCounts Counts(int device = 0) const;
  ::testing::AssertionResult KvdInvariantsHold() const;

  ScopedRunDir run_dir_;
  std::unique_ptr<InProcessKvd> kvd_;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UNIT_CLIENT_IN_PROCESS_KVD_H_
