// A real kvd per test: started as a process with a small capacity, its socket
// in the test's own directory, its segment under a unique IPC name; stopped
// with SIGTERM (or killed) at the end. The backend is host unless
// NANOKV_TEST_BACKEND names another (cuda on the GPU machine), so the same
// tests run against real GPU pages there. The test leaves nothing behind:
// its directory goes (kvd's run directory: sockets, locks, journals kept for
// a next kvd), and so does a killed kvd's segment in /dev/shm.
#ifndef NANOKV_TESTS_INTEGRATION_KVD_FIXTURE_H_
#define NANOKV_TESTS_INTEGRATION_KVD_FIXTURE_H_

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/backend.h"
#include "ipc/segment/segment_reader.h"
#include "ipc/uds/channel.h"
#include "nanokv/client.h"
#include "nanokv/object_store.h"
#include "tests/integration/page_ledger.h"
#include "tests/integration/process_util.h"

namespace nanokv::testing {

class KvdFixture : public ::testing::Test {
 protected:
  static constexpr size_t kPage = 2u << 20;

  void SetUp() override {
    static int counter = 0;
    ipc_ = "it_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    setenv("NANOKV_RUN_DIR", dir_.path().c_str(), 1);
  }

  void TearDown() override {
    if (kvd_.started() && kvd_.Running()) StopKvd();
    if (HasFailure() && kvd_.started()) std::printf("--- kvd log ---\n%s\n", kvd_.Log().c_str());
    // The test's processes are gone (its body's went with it): no kvd of its
    // names needs its segment any more. Every name here starts with ipc_.
    RemoveKvdShm(ipc_);
  }

  // The binaries: the build's, or $NANOKV_KVD_BINARY / $NANOKV_ENGINE_BINARY
  // where the tests run from a bundle (the GPU machine).
  static std::string Binary(const char* env, const char* built) {
    const char* value = std::getenv(env);
    return value != nullptr && *value != '\0' ? value : built;
  }

  static std::string Backend() {
    const char* name = std::getenv("NANOKV_TEST_BACKEND");
    return name != nullptr && *name != '\0' ? name : "host";
  }

  // kvd with `pages` pages of 2 MiB per device.
  void StartKvd(size_t pages = 32, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(), "--ipc-name", ipc_,
                                     "--capacity", std::to_string(pages * kPage),
                                     "--host-device-memory", std::to_string(4 * pages * kPage),
                                     "--reserve-pages", "4", "--log-level", "debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.begin(), kvd_prefix_.begin(), kvd_prefix_.end());
    kvd_ = Process::Start(argv, {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/kvd.log");
    ASSERT_TRUE(kvd_.started());
    // This kvd's segment (not a killed one's), published, then its socket accepting.
    bool up = WaitFor(
        [&] {
          // Published at least once: tests read its devices right after.
          auto s = ipc::ReadSegment(ipc_);
          return s.ok() && s->segment.header.kvd_pid == kvd_.pid() &&
                 s->segment.header.publish_count > 0 &&
                 ipc::Channel::Connect(SocketPath()).ok();
        },
        std::chrono::seconds(20));
    ASSERT_TRUE(up) << "kvd did not come up:\n" << kvd_.Log();
  }

  void StopKvd() {
    kvd_.Signal(SIGTERM);
    auto code = kvd_.Wait(std::chrono::seconds(20));
    ASSERT_TRUE(code.has_value()) << "kvd did not stop on SIGTERM";
    EXPECT_EQ(*code, 0) << kvd_.Log();
  }

  std::string SocketPath() const { return dir_.path() + "/" + ipc_ + ".sock"; }

  ClientOptions Options(const std::string& tenant, const std::string& group = "",
                        uint64_t limit = 0) const {
    ClientOptions o;
    o.ipc_name = ipc_;
    o.tenant = tenant;
    o.group = group;
    o.limit_bytes = limit;
    return o;
  }

  std::unique_ptr<Client> AttachClient(const std::string& tenant, const std::string& group = "",
                                       uint64_t limit = 0) {
    auto client = Client::Attach(Options(tenant, group, limit));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // An example engine process attached by environment.
  Process StartEngine(const std::string& name, std::vector<std::string> args,
                      std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv = {Binary("NANOKV_ENGINE_BINARY", NANOKV_ENGINE_BINARY)};
    argv.insert(argv.end(), args.begin(), args.end());
    env["ENABLE_NANOKV"] = "1";
    env["NANOKV_IPC_NAME"] = ipc_;
    env["NANOKV_TENANT"] = name;
    env["NANOKV_RUN_DIR"] = dir_.path();
    return Process::Start(argv, env, dir_.path() + "/" + name + ".log");
  }

  // The running kvd's object store, as an engine of this process opens it;
  // `request_timeout_ms` 0: the option's default.
  Result<std::unique_ptr<ObjectStore>> TryOpenStore(uint32_t request_timeout_ms = 0) {
    ObjectStoreOptions options;
    options.ipc_name = ipc_;
    options.backend = Backend();
    if (request_timeout_ms != 0) options.request_timeout_ms = request_timeout_ms;
    return ObjectStore::Open(options);
  }
  // The same, which must succeed.
  std::unique_ptr<ObjectStore> OpenStore() {
    auto store = TryOpenStore();
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // `yaml` as a config file in the test's directory; its path, for --config.
  std::string WriteConfig(const std::string& yaml, const std::string& name = "kvd.yaml") {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << yaml;
    return path;
  }
  // The object store the objects suites run kvd with: 16 MiB a device (8 of
  // 32 pages), FIFO, leases of 5 s, writes reclaimed after 300 ms.
  static constexpr const char* kTestStoreYaml =
      "object_store:\n  size: 16MiB\n  policy: fifo\n  lease_ttl: 5s\n  write_timeout: 300ms\n";

  // An object's 64-byte header as its device holds it, read through this
  // process's mapping of the plan's header page.
  Result<ObjectHeader> DeviceHeader(ObjectStore& store, const ObjectPlan& plan) {
    NANOKV_ASSIGN_OR_RETURN(auto backend, gpu::OpenBackend(Backend()));
    NANOKV_ASSIGN_OR_RETURN(void* at, store.HeaderPointer(plan));
    ObjectHeader header{};
    NANOKV_RETURN_IF_ERROR(backend->Copy(&header, at, sizeof(header), gpu::CopyKind::kDeviceToHost));
    return header;
  }

  ipc::Snapshot Read() {
    auto snapshot = ipc::ReadSegment(ipc_);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    return snapshot.ok() ? *snapshot : ipc::Snapshot{};
  }

  // Device 0's row: free + granted must equal created, always.
  void ExpectCountsExact(const ipc::Snapshot& s) {
    for (uint32_t d = 0; d < s.segment.header.device_count; ++d) {
      const ipc::DeviceRow& row = s.segment.devices[d];
      EXPECT_EQ(row.free_pages + row.granted_pages, row.created_pages) << "device " << row.device;
      EXPECT_LE(row.created_pages, row.capacity_pages);
    }
  }

  uint64_t GrantedPages(int device = 0) { return Read().segment.devices[device].granted_pages; }

  // kvd's published rows agree with the test's own ledger (page_ledger.h).
  // kvd publishes after it answers, so a difference may last a moment: wait
  // for agreement, and report the differences if it never comes.
  void ExpectLedger(const PageLedger& ledger, const std::set<std::string>& others = {},
                    const std::map<int, uint64_t>& others_pages = {}) {
    std::string diff;
    bool agreed = WaitFor([&] {
      diff = ledger.Diff(Read(), others, others_pages);
      return diff.empty();
    }, std::chrono::seconds(5));
    EXPECT_TRUE(agreed) << "kvd's rows disagree with the ledger:\n" << diff;
  }

  TempDir dir_;
  std::string ipc_;
  Process kvd_;
  std::vector<std::string> kvd_prefix_;  // a command kvd runs under (prlimit ...), which execs it
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_KVD_FIXTURE_H_
