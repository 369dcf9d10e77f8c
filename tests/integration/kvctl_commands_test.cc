// kvctl's commands against a real kvd with real engine processes: `limit`
// and `evict` change what engines hold; `cleanup` removes what a kvd killed
// with SIGKILL left and nothing else; errors have their documented exit
// codes; only root or kvd's user may change tenants.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ipc/uds/channel.h"
#include "tests/integration/kvctl_fixture.h"

namespace nanokv::testing {
namespace {

TEST_F(KvctlTest, LimitChangesWhatAnEngineHolds) {
  StartKvd(32, {"--devices", "0"});  // one pool: the figures below are one device's (two GPUs serve both)
  Process engine = HoldingEngine("held", 8);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 8; }, 20s)) << engine.Log();

  Ran limit = Kvctl({"--json", "limit", ipc_, "held", "4M", "--wait"});
  ASSERT_EQ(limit.code, 0) << limit.out << limit.err << engine.Log();
  Json doc = ParseJson(limit);
  EXPECT_EQ(doc["old_limit_bytes"].u64(), 32 * kPage);
  EXPECT_EQ(doc["limit_bytes"].u64(), 2 * kPage);
  EXPECT_EQ(doc["used_bytes"].u64(), 8 * kPage);
  EXPECT_TRUE(doc["reclaiming"].boolean);
  EXPECT_TRUE(doc["complete"].boolean);
  EXPECT_EQ(doc["used_after_bytes"].u64(), 2 * kPage);
  const ipc::Snapshot snap = Read();  // FindRow points into it: keep it alive
  const ipc::TenantRow* row = FindRow(snap, "held");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->limit_bytes, 2 * kPage);
  EXPECT_EQ(row->used_bytes, 2 * kPage);
  EXPECT_TRUE(engine.Running()) << "the engine gave pages back and lives on";
  ExpectLedger(PageLedger{}, {"held"}, {{0, 2}});  // the engine's two pages, nobody else's

  // A share is of the kvd's capacity; the IPC name may come from the environment.
  Ran share = Kvctl({"limit", "held", "50%"}, {{"NANOKV_IPC_NAME", ipc_}});
  ASSERT_EQ(share.code, 0) << share.err;
  EXPECT_NE(share.out.find("4.00 MiB -> 32.0 MiB"), std::string::npos) << share.out;
  // kvd answers before it publishes (at the end of its loop turn).
  auto limit_is = [&](uint64_t bytes) {
    return WaitFor([&] { return FindRow(Read(), "held")->limit_bytes == bytes; }, 5s);
  };
  EXPECT_TRUE(limit_is(16 * kPage));
  Ran clamped = Kvctl({"limit", ipc_, "held", "1.5GiB"});
  ASSERT_EQ(clamped.code, 0) << clamped.err;
  EXPECT_NE(clamped.out.find("clamped"), std::string::npos) << clamped.out;
  EXPECT_TRUE(limit_is(32 * kPage));
}

TEST_F(KvctlTest, EvictTakesPagesBackAndReportsWhatCameBack) {
  StartKvd(32);
  Process engine = HoldingEngine("victim", 8);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 8; }, 20s)) << engine.Log();
  const uint64_t limit_before = FindRow(Read(), "victim")->limit_bytes;

  Ran evict = Kvctl({"--json", "evict", ipc_, "victim", "--bytes", "5M"});
  ASSERT_EQ(evict.code, 0) << evict.out << evict.err << engine.Log();
  Json doc = ParseJson(evict);
  EXPECT_EQ(doc["pages_requested"].u64(), 3u) << "5 MiB is 3 pages of 2 MiB, rounded up";
  EXPECT_EQ(doc["used_before_bytes"].u64(), 8 * kPage);
  EXPECT_EQ(doc["used_after_bytes"].u64(), 5 * kPage);
  EXPECT_EQ(doc["returned_bytes"].u64(), 3 * kPage);
  EXPECT_TRUE(doc["complete"].boolean);
  EXPECT_EQ(TenantUsed("victim"), 5 * kPage);
  ExpectLedger(PageLedger{}, {"victim"}, {{0, 5}});
  EXPECT_EQ(FindRow(Read(), "victim")->limit_bytes, limit_before) << "evict leaves the limit alone";

  Ran all = Kvctl({"evict", ipc_, "victim"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("asked tenant 'victim' for 5 pages (10.0 MiB)"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("10.0 MiB came back"), std::string::npos) << all.out;
  EXPECT_EQ(TenantUsed("victim"), 0u);
  ExpectLedger(PageLedger{}, {"victim"}, {{0, 0}});
  EXPECT_TRUE(engine.Running());
  Ran nothing = Kvctl({"evict", ipc_, "victim"});
  EXPECT_EQ(nothing.code, 0) << nothing.err;
  EXPECT_NE(nothing.out.find("holds nothing"), std::string::npos) << nothing.out;
}

TEST_F(KvctlTest, EvictSaysSoWhenATenantDoesNotGiveBack) {
  StartKvd(32);
  // The fixture's kvd is up once its socket file exists, but kvd binds before
  // it listens: wait until a connect is answered before attaching in-process.
  ASSERT_TRUE(WaitFor([&] { return ipc::Channel::Connect(SocketPath()).ok(); }, 10s));
  auto deaf = AttachClient("deaf");  // registers no reclaim callback: gives nothing back
  ASSERT_TRUE(deaf);
  ASSERT_TRUE(deaf->Grant(0, 4).ok());
  ASSERT_TRUE(WaitFor([&] { return TenantUsed("deaf") == 4 * kPage; }, 5s));
  Ran evict = Kvctl({"evict", ipc_, "deaf", "--timeout", "0.5"});
  EXPECT_EQ(evict.code, 6) << evict.out << evict.err;
  EXPECT_NE(evict.out.find("timed out"), std::string::npos) << evict.out;
  EXPECT_NE(evict.out.find("0 B of 8.00 MiB came back"), std::string::npos) << evict.out;
}

TEST_F(KvctlTest, ErrorsHaveTheirDocumentedExitCodes) {
  StartKvd(32);
  Process engine = HoldingEngine("alpha", 2);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, 20s)) << engine.Log();

  Ran help = Kvctl({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Exit codes:"), std::string::npos) << help.out;
  EXPECT_EQ(Kvctl({"frobnicate"}).code, 2);
  EXPECT_EQ(Kvctl({}).code, 2) << "a command is required";
  EXPECT_EQ(Kvctl({"limit", ipc_, "alpha", "12 parsecs"}).code, 2);
  EXPECT_EQ(Kvctl({"evict", ipc_, "alpha", "--bytes", "-1"}).code, 2);
  EXPECT_EQ(Kvctl({"tenants", ipc_, "--sort", "size"}).code, 2);
  EXPECT_EQ(Kvctl({"tenants", "bad/name"}).code, 2);
  EXPECT_EQ(Kvctl({"instances", "bad/name"}).code, 2);
  Ran none = Kvctl({"instances", ipc_});
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "NAME  PID  STATE  RESTARTS  SINCE\n") << "a kvd that runs no instance";
  EXPECT_EQ(ParseJson(Kvctl({"instances", ipc_, "--json"}))["instances"].items.size(), 0u);

  Ran no_kvd = Kvctl({"tenants", "no_such_kvd_" + ipc_});
  EXPECT_EQ(no_kvd.code, 3) << no_kvd.err;
  EXPECT_NE(no_kvd.err.find("no kvd named"), std::string::npos) << no_kvd.err;
  EXPECT_EQ(Kvctl({"instances", "no_such_kvd_" + ipc_}).code, 3);
  Ran no_tenant = Kvctl({"evict", ipc_, "nobody"});
  EXPECT_EQ(no_tenant.code, 3) << no_tenant.err;
  EXPECT_NE(no_tenant.err.find("its tenants: alpha"), std::string::npos) << no_tenant.err;
  EXPECT_EQ(Kvctl({"limit", ipc_, "nobody", "1G"}).code, 3);

  // Two kvds run and none is named: which one is meant is unclear.
  Process second = StartSecondKvd(ipc_ + "_b");
  Ran unclear = Kvctl({"tenants"});
  EXPECT_EQ(unclear.code, 2) << unclear.err;
  EXPECT_NE(unclear.err.find("several kvds"), std::string::npos) << unclear.err;
  EXPECT_NE(unclear.err.find(ipc_ + "_b"), std::string::npos) << unclear.err;
  EXPECT_EQ(Kvctl({"evict", "alpha"}).code, 2);
  Ran unclear_instances = Kvctl({"instances"});
  EXPECT_EQ(unclear_instances.code, 2) << unclear_instances.err;
  EXPECT_NE(unclear_instances.err.find("several kvds"), std::string::npos) << unclear_instances.err;
  second.Signal(SIGTERM);
  EXPECT_EQ(second.Wait(20s), 0) << second.Log();
}

TEST_F(KvctlTest, CleanupRemovesWhatAKilledKvdLeftAndNothingElse) {
  StartKvd(32);  // stays alive: cleanup must leave it alone
  const std::string victim = ipc_ + "_k";
  // A recovery window of 0: its journal is nobody's once it is dead.
  Process second = StartSecondKvd(victim, {"--recovery-window", "0ms"});
  const std::string segment = "/dev/shm/nanokv_" + victim;
  const std::string socket = dir_.path() + "/" + victim + ".sock";
  const std::string lock = dir_.path() + "/" + victim + ".lock";
  const std::string journal = dir_.path() + "/" + victim + ".journal";
  ASSERT_TRUE(Exists(segment) && Exists(socket) && Exists(lock) && Exists(journal));
  second.Signal(SIGKILL);
  ASSERT_EQ(second.Wait(10s), 128 + SIGKILL);
  ASSERT_TRUE(Exists(segment) && Exists(socket) && Exists(lock) && Exists(journal))
      << "kill -9 leaves everything behind";

  // Views still read the last figures, marked stale; commands refuse.
  Json doc = ParseJson(Kvctl({"--json", "list"}));
  const Json* dead = FindByKey(doc["kvds"], "ipc", victim);
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ((*dead)["state"].str(), "stale");
  EXPECT_EQ((*FindByKey(doc["kvds"], "ipc", ipc_))["state"].str(), "live");
  Ran stale_view = Kvctl({"tenants", victim});
  EXPECT_EQ(stale_view.code, 0) << stale_view.err;
  EXPECT_NE(stale_view.err.find("not running"), std::string::npos) << stale_view.err;
  EXPECT_EQ(Kvctl({"evict", victim, "anyone"}).code, 4);
  EXPECT_EQ(Kvctl({"limit", victim, "anyone", "1G"}).code, 4);

  // Without --run-dir or NANOKV_RUN_DIR: the segment says where kvd served.
  const std::map<std::string, std::string> no_run_dir = {{"NANOKV_RUN_DIR", ""}};
  Ran dry = Kvctl({"cleanup", "--dry-run"}, no_run_dir);
  ASSERT_EQ(dry.code, 0) << dry.err;
  for (const std::string& what : {"segment " + segment, "socket " + socket, "lock " + lock,
                                   "journal " + journal}) {
    EXPECT_NE(dry.out.find("would remove " + what), std::string::npos) << dry.out;
  }
  EXPECT_EQ(dry.out.find(ipc_ + ".sock"), std::string::npos) << "the live kvd's socket stays\n" << dry.out;
  EXPECT_EQ(dry.out.find(ipc_ + ".lock"), std::string::npos) << "the live kvd's lock stays\n" << dry.out;
  EXPECT_TRUE(Exists(segment) && Exists(socket) && Exists(lock) && Exists(journal));

  // Only what this test named (other tests' stale segments are theirs).
  Ran cleanup = Kvctl({"--json", "cleanup", victim}, no_run_dir);
  ASSERT_EQ(cleanup.code, 0) << cleanup.err;
  doc = ParseJson(cleanup);
  std::set<std::string> removed;
  for (const Json& item : doc["removed"].items) {
    removed.insert(item["path"].str());
    EXPECT_TRUE(item["ok"].boolean) << cleanup.out;
  }
  EXPECT_EQ(removed, (std::set<std::string>{segment, socket, lock, journal})) << cleanup.out;
  EXPECT_NE((*FindByKey(doc["removed"], "path", segment))["reason"].str().find(
                "kvd pid " + std::to_string(second.pid()) + " is gone"),
            std::string::npos) << cleanup.out;
  for (const std::string& path : {segment, socket, lock, journal}) EXPECT_FALSE(Exists(path)) << path;
  EXPECT_EQ(Kvctl({"tenants", victim}).code, 3);
  Ran again = Kvctl({"cleanup", victim});
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.out, "nothing to clean up\n");

  // A live kvd named is left alone, and says why.
  Ran live = Kvctl({"cleanup", ipc_});
  EXPECT_EQ(live.code, 1) << live.out;
  EXPECT_NE(live.out.find("is live: left alone"), std::string::npos) << live.out;
  EXPECT_TRUE(Exists("/dev/shm/nanokv_" + ipc_));
  EXPECT_TRUE(Exists(SocketPath()));
  EXPECT_TRUE(Exists(dir_.path() + "/" + ipc_ + ".lock"));
  EXPECT_TRUE(kvd_.Running());
}

// A killed kvd's journal is how the next kvd takes back the pages engines
// still hold: cleanup keeps it (and the segment that dates the death) for the
// recovery window, and a kvd started meanwhile takes it over.
TEST_F(KvctlTest, CleanupKeepsAJournalWithinItsRecoveryWindow) {
  const std::string name = ipc_ + "_w";
  Process first = StartSecondKvd(name, {"--recovery-window", "10m"});
  const std::string segment = "/dev/shm/nanokv_" + name;
  const std::string journal = dir_.path() + "/" + name + ".journal";
  first.Signal(SIGKILL);
  ASSERT_EQ(first.Wait(10s), 128 + SIGKILL);

  Ran cleanup = Kvctl({"--json", "cleanup", name});
  ASSERT_EQ(cleanup.code, 0) << cleanup.out << cleanup.err;
  Json doc = ParseJson(cleanup);
  std::set<std::string> removed, kept;
  for (const Json& item : doc["removed"].items) removed.insert(item["path"].str());
  for (const Json& item : doc["kept"].items) kept.insert(item["path"].str());
  EXPECT_EQ(removed, (std::set<std::string>{dir_.path() + "/" + name + ".sock",
                                            dir_.path() + "/" + name + ".lock"}))
      << cleanup.out;
  EXPECT_EQ(kept, (std::set<std::string>{journal, segment})) << cleanup.out;
  EXPECT_TRUE(Exists(journal) && Exists(segment));
  Ran text = Kvctl({"cleanup", name});
  EXPECT_NE(text.out.find("kept journal " + journal + ": a restarted kvd may still take back its pages"),
            std::string::npos) << text.out;

  // The next kvd of the name takes the journal over, and a clean stop with
  // nothing held leaves nothing at all.
  Process next = StartSecondKvd(name);
  next.Signal(SIGTERM);
  ASSERT_EQ(next.Wait(20s), 0) << next.Log();
  for (const std::string& file : {segment, journal, dir_.path() + "/" + name + ".sock",
                                  dir_.path() + "/" + name + ".lock"}) {
    EXPECT_FALSE(Exists(file)) << file << "\n" << next.Log();
  }
  EXPECT_EQ(Kvctl({"cleanup", name}).out, "nothing to clean up\n");
}

// What a killed kvd's object store leaves: its object journal goes with
// the page journal, and the page keeper's socket goes once nothing listens
// there, but stays while a keeper still holds the pages for the next kvd.
TEST_F(KvctlTest, CleanupTakesAStoresFilesOnlyWhenNoKeeperListens) {
  const std::string name = ipc_ + "_s";
  const std::string objects = dir_.path() + "/" + name + ".objects";
  const std::string keeper = dir_.path() + "/" + name + ".keeper";
  auto bind_keeper = [&](bool listen) {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, keeper.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0) << keeper;
    EXPECT_EQ(::listen(fd, 4), 0);
    if (!listen) {
      ::close(fd);
      fd = -1;
    }
    return fd;
  };
  std::ofstream(objects) << "an object journal";
  int live = bind_keeper(/*listen=*/true);
  Ran kept = Kvctl({"--json", "cleanup", name});
  ASSERT_EQ(kept.code, 0) << kept.out << kept.err;
  Json doc = ParseJson(kept);
  std::set<std::string> removed, held;
  for (const Json& item : doc["removed"].items) removed.insert(item["path"].str());
  for (const Json& item : doc["kept"].items) held.insert(item["path"].str());
  EXPECT_EQ(removed, (std::set<std::string>{objects})) << "no page journal keeps it\n" << kept.out;
  EXPECT_EQ(held, (std::set<std::string>{keeper})) << kept.out;
  EXPECT_TRUE(Exists(keeper));

  ::close(live);  // the keeper exited (its window passed): its socket is left
  Ran gone = Kvctl({"--json", "cleanup", name});
  ASSERT_EQ(gone.code, 0) << gone.out << gone.err;
  doc = ParseJson(gone);
  removed.clear();
  for (const Json& item : doc["removed"].items) removed.insert(item["path"].str());
  EXPECT_EQ(removed, (std::set<std::string>{keeper})) << gone.out;
  EXPECT_FALSE(Exists(keeper) || Exists(objects));
  EXPECT_EQ(Kvctl({"cleanup", name}).out, "nothing to clean up\n");
}

// A start that fails once it made its files removes them all again.
TEST_F(KvctlTest, AFailedStartLeavesNothingBehind) {
  const std::string name = ipc_ + "_f";
  const std::string socket = dir_.path() + "/" + name + ".sock";
  std::ofstream(socket) << "not a socket\n";  // the bind fails: after segment and journal
  Process kvd = Process::Start({Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(),
                                "--ipc-name", name, "--capacity", std::to_string(8 * kPage),
                                "--host-device-memory", std::to_string(32 * kPage)},
                               {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/" + name + ".log");
  auto code = kvd.Wait(20s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1) << kvd.Log();
  EXPECT_NE(kvd.Log().find("exists and is not a socket"), std::string::npos) << kvd.Log();
  for (const std::string& file : {"/dev/shm/nanokv_" + name, dir_.path() + "/" + name + ".journal",
                                  dir_.path() + "/" + name + ".lock"}) {
    EXPECT_FALSE(Exists(file)) << file << " left behind\n" << kvd.Log();
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(entry.path().filename().string().find(name + ".journal.new"), std::string::npos);
    EXPECT_EQ(entry.path().filename().string().find(name + ".sock.new"), std::string::npos);
  }
  EXPECT_TRUE(Exists(socket)) << "not kvd's file: left alone";
}

// A user kvd lets attach but who is neither root nor kvd's user may look,
// but not limit or evict (exit 5); kvd says no, not just the socket's mode.
TEST_F(KvctlTest, OnlyRootOrKvdsUserMayChangeTenants) {
  if (geteuid() != 0 || std::system("command -v setpriv >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs root and setpriv to run kvctl as another user";
  }
  const std::string config = dir_.path() + "/kvd.yaml";
  std::ofstream(config) << "allowed_uids: [65534]\nsocket_mode: \"0666\"\nsegment_mode: \"0644\"\n";
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);  // so that uid 65534 reaches the socket
  StartKvd(32, {"--config", config});
  Process engine = HoldingEngine("alpha", 2);
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, 20s)) << engine.Log();
  auto as_nobody = [&](const std::vector<std::string>& args) {
    std::string command = "exec setpriv --reuid=65534 --regid=65534 --clear-groups " + Quote(KvctlBinary());
    for (const std::string& arg : args) command += " " + Quote(arg);
    return Shell(command);
  };
  Ran view = as_nobody({"tenants", ipc_});
  EXPECT_EQ(view.code, 0) << view.err;
  EXPECT_NE(view.out.find("alpha"), std::string::npos) << view.out;
  Ran evict = as_nobody({"evict", ipc_, "alpha"});
  EXPECT_EQ(evict.code, 5) << evict.out << evict.err;
  EXPECT_NE(evict.err.find("only kvd's user or root may evict"), std::string::npos) << evict.err;
  EXPECT_EQ(as_nobody({"limit", ipc_, "alpha", "2M"}).code, 5);
  EXPECT_EQ(GrantedPages(), 2u) << "nothing was taken";
}

// tmux on its own socket in the test's directory: no other tmux touched, no socket left.

}  // namespace
}  // namespace nanokv::testing
