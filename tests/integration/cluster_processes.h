// A cluster on one machine, every part a real process: a master (kvd --role
// master on a loopback port) and kvds with `master:` in their configs, each
// its own IPC name, node id (n0, n1, ...) and object store, all under the
// test's directory. Processes only: nothing of nanokv is linked, so a test of
// the C ABI (libnanokv.so alone) stands on it too; cluster_fixture.h adds
// ClusterClients. The test leaves nothing behind (process_util.h).
#ifndef NANOKV_TESTS_INTEGRATION_CLUSTER_PROCESSES_H_
#define NANOKV_TESTS_INTEGRATION_CLUSTER_PROCESSES_H_

#include <signal.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/process_util.h"

namespace nanokv::testing {

class ClusterProcesses : public ::testing::Test {
 protected:
  static constexpr size_t kPage = 2u << 20;

  struct Node {
    std::string id;
    std::string ipc;
    std::string config;
    Process process;
  };

  void SetUp() override {
    static int counter = 0;
    ipc_ = "cl_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    setenv("NANOKV_RUN_DIR", dir_.path().c_str(), 1);
    // The data path between nodes over loopback TCP, kvds and clients alike
    // (inherited): UCX would otherwise pick shared memory or CMA between two
    // processes of one machine, which a container may refuse (ptrace scope)
    // and which nodes on separate hosts never use.
    setenv("UCX_TLS", "tcp", 0);
  }

  void TearDown() override {
    for (Node& node : nodes_) {
      if (node.process.started() && node.process.Running()) {
        node.process.Signal(SIGCONT);
        node.process.Signal(SIGTERM);
        node.process.Wait(std::chrono::seconds(20));
      }
    }
    if (master_.started() && master_.Running()) {
      master_.Signal(SIGTERM);
      auto code = master_.Wait(std::chrono::seconds(20));
      EXPECT_TRUE(code.has_value() && *code == 0) << "the master did not stop cleanly:\n" << master_.Log();
    }
    if (HasFailure()) {
      if (master_.started()) std::printf("--- master log ---\n%s\n", master_.Log().c_str());
      for (Node& node : nodes_) {
        if (node.process.started()) std::printf("--- %s log ---\n%s\n", node.id.c_str(), node.process.Log().c_str());
      }
    }
    RemoveKvdShm(ipc_);
  }

  static std::string KvdBinary() {
    const char* value = std::getenv("NANOKV_KVD_BINARY");
    return value != nullptr && *value != '\0' ? value : NANOKV_KVD_BINARY;
  }

#ifdef NANOKV_CLUSTER_READER
  // The reader/writer process of the transfer tests: $NANOKV_CLUSTER_READER
  // (gpu-check.sh's bundle), else the one built beside the test.
  static std::string ReaderBinary() {
    const char* value = std::getenv("NANOKV_CLUSTER_READER");
    return value != nullptr && *value != '\0' ? value : NANOKV_CLUSTER_READER;
  }
#endif

  static std::string Backend() {
    const char* name = std::getenv("NANOKV_TEST_BACKEND");
    return name != nullptr && *name != '\0' ? name : "host";
  }

  // The master, on `address` ("127.0.0.1:0": any port), with extra flags.
  void StartMaster(std::vector<std::string> extra = {}, const std::string& address = "127.0.0.1:0") {
    std::vector<std::string> argv = {KvdBinary(), "--role", "master", "--id", "m" + std::to_string(masters_++),
                                     "--listen", address, "--rebuild-window", "0", "--lease-ttl", "1s",
                                     "--heartbeat-interval", "200ms", "--log-level", "debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    master_ = Process::Start(argv, {}, dir_.path() + "/master" + std::to_string(masters_) + ".log");
    ASSERT_TRUE(master_.started());
    std::string log;
    bool up = WaitFor([&] {
      log = master_.Log();
      return log.find("serving on ") != std::string::npos || !master_.Running();
    }, std::chrono::seconds(20));
    size_t at = log.find("serving on ");
    ASSERT_TRUE(up && at != std::string::npos) << "the master did not come up:\n" << log;
    at += std::string("serving on ").size();
    address_ = log.substr(at, log.find(' ', at) - at);
  }

  // A kvd as node n<index> with a store of `store_pages` pages of 2 MiB
  // (one device unless `devices`); with `wait_alive`, until the master says
  // it is alive. `extra_master` adds keys under `master:`.
  void StartNode(size_t store_pages = 8, const std::string& extra_master = "", int devices = 1,
                 bool wait_alive = true) {
    Node node;
    node.id = "n" + std::to_string(nodes_.size());
    node.ipc = ipc_ + "_" + node.id;
    node.config = dir_.path() + "/" + node.id + ".yaml";
    const size_t pages = store_pages + 8;
    std::ofstream(node.config) << "backend: " << Backend() << "\nipc_name: " << node.ipc << "\nrun_dir: " << dir_.path()
                               << "\ncapacity: " << pages * kPage << "\nhost_device_memory: " << 2 * pages * kPage
                               << "\nhost_devices: " << devices << "\nreserve_pages: 2\nlog_level: debug\n"
                               << devices_yaml_ << "object_store:\n  size: " << store_pages * kPage
                               << "\n  write_timeout: " << write_timeout_ << "\n"
                               << object_store_extra_ << "master:\n  addresses: [\"" << MasterList("\", \"")
                               << "\"]\n  node_id: " << node.id << "\n  host_id: " << HostOf(nodes_.size())
                               << "\n  data_address: \"" << data_address_ << "\"\n  retry_interval: 100ms\n"
                               << extra_master;
    node.process = Process::Start({KvdBinary(), "--config", node.config}, {{"NANOKV_RUN_DIR", dir_.path()}},
                                  dir_.path() + "/" + node.id + ".log");
    ASSERT_TRUE(node.process.started());
    const std::string alive = "node " + node.id + " is alive";
    nodes_.push_back(std::move(node));
    if (!wait_alive) return;
    bool up = WaitFor([&] { return master_.Log().find(alive) != std::string::npos; }, std::chrono::seconds(20));
    ASSERT_TRUE(up) << "the master never said '" << alive << "'";
  }

  // Every master's address, joined by `separator`: master_addresses_ when a
  // test runs several masters, else address_.
  std::string MasterList(const std::string& separator) const {
    if (master_addresses_.empty()) return address_;
    std::string out;
    for (const std::string& a : master_addresses_) out += (out.empty() ? "" : separator) + a;
    return out;
  }

  // The host node n<index> says it is on (its master.host_id), and clients
  // made for it: every node a host of its own, so the cluster tests move
  // bytes between nodes over UCX as between hosts; with one_host_, all one
  // host, so they move through the kvds' sockets and pages.
  std::string HostOf(size_t index) const {
    return one_host_ ? std::string("host-shared") : "host-n" + std::to_string(index);
  }

  static std::vector<std::byte> Bytes(size_t n, int seed) {
    std::vector<std::byte> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + static_cast<size_t>(seed) * 7) & 0xff);
    return out;
  }

  TempDir dir_;
  std::string ipc_;
  std::string address_;
  std::vector<std::string> master_addresses_;  // several masters (cluster_failover_test.cc); nodes list them all
  Process master_;
  int masters_ = 0;
  std::vector<Node> nodes_;
  std::string object_store_extra_;  // more keys under object_store: for the nodes started next
  // A `devices:` line for the nodes started next ("": every device the
  // backend has: both GPUs of a two-GPU host under cuda).
  std::string devices_yaml_;
  std::string write_timeout_ = "30s";         // object_store.write_timeout of the nodes started next
  std::string data_address_ = "127.0.0.1:0";  // master.data_address of the nodes started next ("": no agent)
  bool one_host_ = false;                     // HostOf: every node on one host
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_CLUSTER_PROCESSES_H_
