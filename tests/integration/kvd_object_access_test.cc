// Who may write an object's pages (issue 19 item 12), through a real kvd:
// readers map store pages read-only and a write through such a mapping
// faults (host: SIGSEGV; cuda: the driver refuses or faults the copy); kvd
// hands a reader fds it cannot write through, and write fds only for pages
// of the asker's own open plans. NANOKV_TEST_BACKEND=cuda runs the reader's
// half on GPU pages; the fd half is the host backend's (a CUDA fd gives its
// holder full access, docs/ARCHITECTURE.md "Security").
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <set>

#include "gpu/backend.h"
#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "nanokv/object_store.h"
#include "tests/integration/kvd_fixture.h"
#include "tests/integration/object_pattern.h"
#include "tests/integration/raw_object_requests.h"
#include "tests/util/other_user.h"
#include "tests/util/status_matchers.h"

namespace nanokv::testing {
namespace {

class KvdObjectAccessTest : public KvdFixture {
 protected:
  void StartWithStore(const std::string& extra_yaml = "") {
    StartKvd(32, {"--config", WriteConfig("object_store:\n  size: 16MiB\n  write_timeout: 30s\n" + extra_yaml)});
  }

  int RunPeer(const std::string& mode, const std::string& key, size_t bytes, int seed) {
    // Under a sanitizer the fault the scribble expects must reach the process
    // as SIGSEGV, not as the sanitizer's report and its own exit code.
    auto with_segv = [](const char* name) {
      const char* given = std::getenv(name);
      return std::string(given != nullptr ? given : "") + (given != nullptr && *given ? ":" : "") +
             "handle_segv=0";
    };
    Process peer = Process::Start({Binary("NANOKV_OBJECT_PEER", NANOKV_OBJECT_PEER), mode, ipc_, key,
                                   std::to_string(bytes), std::to_string(seed)},
                                  {{"NANOKV_RUN_DIR", dir_.path()},
                                   {"NANOKV_TEST_BACKEND", Backend()},
                                   {"ASAN_OPTIONS", with_segv("ASAN_OPTIONS")},
                                   {"TSAN_OPTIONS", with_segv("TSAN_OPTIONS")}},
                                  dir_.path() + "/peer_" + mode + ".log");
    auto code = peer.Wait(std::chrono::seconds(60));
    std::printf("--- peer %s (exit %d) ---\n%s\n", mode.c_str(), code ? *code : -1, peer.Log().c_str());
    return code ? *code : -1;
  }
};

// What a raw peer can do with a READY object's page: 0 when it got a fd
// that neither maps writable nor re-opens writable, and no write fd (asked
// naming the object's own key and epoch); else the step that let it write.
int TryToWriteAReadyPage(const std::string& socket, int device, uint32_t page, const std::string& key,
                         uint32_t epoch) {
  auto channel = ipc::Channel::Connect(socket);
  if (!channel.ok()) return 2;
  std::vector<int> fds;
  auto reply = Ask(*channel, PagesRequest(1, device, page, false), &fds);
  if (!reply.ok() || reply->has_error() || fds.size() != 1) return 3;
  const int fd = fds[0];
  if ((fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY) return 4;
  void* writable = mmap(nullptr, 2u << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (writable != MAP_FAILED || errno != EACCES) return 5;
  void* readable = mmap(nullptr, 2u << 20, PROT_READ, MAP_SHARED, fd, 0);
  if (readable == MAP_FAILED) return 6;
  munmap(readable, 2u << 20);
  // Another uid cannot re-open the page writable through /proc (it is 0600);
  // kvd's own uid (and root) can: they are the operator.
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  int reopened = open(proc.c_str(), O_RDWR | O_CLOEXEC);
  if (reopened >= 0) close(reopened);
  if (geteuid() != 0 && reopened >= 0) return 7;
  close(fd);
  fds.clear();
  auto write = Ask(*channel, PagesRequest(2, device, page, true, key, epoch), &fds);
  for (int f : fds) close(f);
  if (!write.ok() || !write->has_error()) return 8;
  if (write->error().code() != static_cast<int>(Code::kPermissionDenied) ||
      write->error().message().find("is lent for no plan '" + key + "'") == std::string::npos) {
    return 9;
  }
  return 0;
}

// The store pages a raw plan touches: its payload spans and its header page.
std::set<uint32_t> PlanPages(const wire::ObjectPlan& plan) {
  std::set<uint32_t> pages{plan.header_page()};
  for (const auto& span : plan.spans()) pages.insert(span.page_id());
  return pages;
}

// A raw producer's put: open, write fds of every page of the plan (so kvd
// counts them held by this uid), commit. The plan, or the step that failed.
Result<wire::ObjectPlan> PutRaw(ipc::Channel& channel, uint64_t& rid, const std::string& key, uint64_t bytes) {
  wire::Message open;
  open.set_request_id(++rid);
  open.mutable_object_open()->set_key(key);
  open.mutable_object_open()->set_bytes_total(bytes);
  open.mutable_object_open()->set_preferred_device(0);
  std::vector<int> fds;
  NANOKV_ASSIGN_OR_RETURN(wire::Message opened, Ask(channel, open, &fds));
  if (opened.has_error()) return ErrorOf(opened);
  const wire::ObjectPlan plan = opened.object_plan();
  for (uint32_t page : PlanPages(plan)) {
    const wire::Message ask = PagesRequest(++rid, 0, page, true, key, plan.epoch(), plan.write_secret());
    NANOKV_ASSIGN_OR_RETURN(wire::Message lent, Ask(channel, ask, &fds));
    for (int fd : fds) close(fd);
    fds.clear();
    if (lent.has_error()) return ErrorOf(lent);
  }
  wire::Message commit;
  commit.set_request_id(++rid);
  commit.mutable_object_commit()->set_key(key);
  commit.mutable_object_commit()->set_epoch(plan.epoch());
  NANOKV_ASSIGN_OR_RETURN(wire::Message done, Ask(channel, commit, &fds));
  if (done.has_error()) return ErrorOf(done);
  return plan;
}

// Another uid's try at a READY object through someone else's open plan:
// it locates the object, finds in the listing (epochs are listed) an open
// plan on the same page, asks a write fd of that page naming that plan and
// writes over the object. 0 when kvd refused the fd kPermissionDenied; 30
// when it wrote; else the step that failed.
int OverwriteThroughAnotherUidsPlan(const std::string& socket, const std::string& ready_key,
                                    const std::string& open_key) {
  auto channel = ipc::Channel::Connect(socket);
  if (!channel.ok()) return 2;
  std::vector<int> fds;
  wire::Message locate;
  locate.set_request_id(1);
  locate.mutable_object_locate()->set_key(ready_key);
  auto located = Ask(*channel, locate, &fds);
  if (!located.ok() || !located->has_object_plan()) return 3;
  const wire::ObjectPlan& ready = located->object_plan();
  wire::Message list;
  list.set_request_id(2);
  list.mutable_object_list();
  auto listed = Ask(*channel, list, &fds);
  if (!listed.ok() || !listed->has_object_list_reply()) return 4;
  uint32_t epoch = 0;
  for (const auto& entry : listed->object_list_reply().objects()) {
    if (entry.key() == open_key) epoch = entry.epoch();
  }
  if (epoch == 0) return 5;
  const uint32_t page = ready.spans(0).page_id();
  wire::Message pages = PagesRequest(3, ready.device(), page, true, open_key, epoch);
  auto lent = Ask(*channel, pages, &fds);
  if (!lent.ok()) return 6;
  if (lent->has_error()) {
    if (lent->error().code() != static_cast<int>(Code::kPermissionDenied) ||
        lent->error().message().find("lent only to plan '" + open_key + "'") == std::string::npos) {
      return 7;
    }
    std::fprintf(stderr, "refused: %s\n", lent->error().message().c_str());
    return 0;
  }
  if (fds.size() != 1) return 8;
  const uint64_t page_bytes = ready.page_bytes();
  void* mapped = mmap(nullptr, page_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  close(fds[0]);
  if (mapped == MAP_FAILED) return 9;
  const uint64_t at = ready.payload_offset() % page_bytes;
  std::memset(static_cast<char*>(mapped) + at, 0x5a, std::min<uint64_t>(ready.bytes_total(), page_bytes - at));
  munmap(mapped, page_bytes);
  return 30;
}

// The reader's mapping is read-only: a second process writing through it
// dies of SIGSEGV (host) or has the copy refused (cuda), and the bytes stay.
TEST_F(KvdObjectAccessTest, AWriteThroughAReadersMappingFaults) {
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const size_t bytes = 2 * kPage + 4321;
  ASSERT_OK(store->Put("ro", ObjectPattern(bytes, 5)));
  const int code = RunPeer("scribble", "ro", bytes, 5);
  if (Backend() == "host") {
    EXPECT_EQ(code, 128 + SIGSEGV) << "a write through a reader's mapping must fault";
  } else {
    EXPECT_EQ(code, 20) << "the driver must refuse a write through a read-only mapping";
  }
  auto got = store->Get("ro");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, ObjectPattern(bytes, 5)) << "the object's bytes changed";
  EXPECT_EQ(RunPeer("get", "ro", bytes, 5), 0);
  EXPECT_TRUE(kvd_.Running());
}

// The producer's own write mapping lasts while its plan is open: after the
// commit its pointer no longer writes, and a locate's pointer never did.
TEST_F(KvdObjectAccessTest, AProducerWritesOnlyWhileItsPlanIsOpen) {
  if (Backend() != "host") GTEST_SKIP() << "checked through the host backend's record of mappings";
  StartWithStore();
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto host = gpu::MakeHostBackend();  // sees every host backend's mappings in this process
  auto plan = store->OpenForWrite("w", 5000, 0);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto writing = store->PayloadPointer(*plan);
  ASSERT_TRUE(writing.ok()) << writing.status().ToString();
  const auto data = ObjectPattern(5000, 8);
  ASSERT_OK(host->Copy(*writing, data.data(), data.size(), gpu::CopyKind::kHostToDevice));
  ASSERT_OK(store->Commit("w", plan->epoch));
  unsigned char byte = 1;
  Status after = host->Copy(*writing, &byte, 1, gpu::CopyKind::kHostToDevice);
  EXPECT_FALSE(after.ok()) << "the write mapping outlived the plan";
  auto ready = store->GetLocation("w");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  auto reading = store->PayloadPointer(*ready);
  ASSERT_TRUE(reading.ok());
  Status into = host->Copy(*reading, &byte, 1, gpu::CopyKind::kHostToDevice);
  EXPECT_EQ(into.code(), Code::kPermissionDenied) << into.ToString();
  std::vector<std::byte> out(5000);
  ASSERT_OK(host->Copy(out.data(), *reading, out.size(), gpu::CopyKind::kDeviceToHost));
  EXPECT_EQ(out, data);
}

// A hostile raw peer: kvd's fds of a READY object's page do not write, and
// a write fd is refused for a page without an open plan of the asker. Its
// own open plan's pages it gets writable. Root also tries as `nobody`,
// which cannot re-open the read-only fd writable through /proc.
TEST_F(KvdObjectAccessTest, ARawPeerGetsNoWritableFdOfAReadyObject) {
  if (Backend() != "host") GTEST_SKIP() << "a CUDA fd gives its holder full access (ARCHITECTURE.md)";
  const bool root = geteuid() == 0;
  if (root) {  // nobody must reach the socket
    ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  }
  StartWithStore(root ? "socket_mode: \"0666\"\nallowed_uids: [" + std::to_string(kNobody) + "]\n" : "");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Put("ready", ObjectPattern(2 * kPage, 3)));
  auto plan = store->GetLocation("ready");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const uint32_t page = plan->spans[0].page_id;
  EXPECT_EQ(TryToWriteAReadyPage(SocketPath(), plan->device, page, "ready", plan->epoch), 0);
  if (root) {
    EXPECT_EQ(RunAs(kNobody, kNobody,
                    [&] { return TryToWriteAReadyPage(SocketPath(), plan->device, page, "ready", plan->epoch); }),
              0)
        << "as another uid";
  } else {
    std::printf("not root: the /proc re-open as another uid is not tried\n");
  }

  // The same peer's own open plan: its pages come writable.
  auto channel = ipc::Channel::Connect(SocketPath());
  ASSERT_TRUE(channel.ok()) << channel.status().ToString();
  wire::Message open;
  open.set_request_id(3);
  open.mutable_object_open()->set_key("mine");
  open.mutable_object_open()->set_bytes_total(3 * kPage);
  open.mutable_object_open()->set_preferred_device(plan->device);
  std::vector<int> fds;
  auto opened = Ask(*channel, open, &fds);
  ASSERT_TRUE(opened.ok() && opened->has_object_plan()) << (opened.ok() ? opened->DebugString() : "");
  const uint32_t mine = opened->object_plan().spans(1).page_id();
  auto write = Ask(*channel, PagesRequest(4, plan->device, mine, true, "mine", opened->object_plan().epoch()), &fds);
  ASSERT_TRUE(write.ok() && !write->has_error()) << (write.ok() ? write->DebugString() : "");
  ASSERT_EQ(fds.size(), 1u);
  void* mapped = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
  EXPECT_NE(mapped, MAP_FAILED) << "the peer's own open plan must be writable: " << errno;
  if (mapped != MAP_FAILED) munmap(mapped, kPage);
  close(fds[0]);
  auto got = store->Get("ready");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, ObjectPattern(2 * kPage, 3));
  EXPECT_TRUE(kvd_.Running());
}

// While root held an open plan on a page, a write fd of that page went to
// another uid, who rewrote root's READY object there. A write fd goes only
// to the plan's writer.
TEST_F(KvdObjectAccessTest, AnotherUidGetsNoWriteFdThroughAnOpenPlanOfRoots) {
  if (Backend() != "host") GTEST_SKIP() << "a CUDA fd gives its holder full access (ARCHITECTURE.md)";
  NANOKV_SKIP_UNLESS_ROOT();
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  StartWithStore("socket_mode: \"0666\"\nallowed_uids: [" + std::to_string(kNobody) + "]\n");
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->Put("root-ready", ObjectPattern(1000, 4), 0));
  auto open = store->OpenForWrite("root-open", 1000, 0);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  auto ready = store->GetLocation("root-ready");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  ASSERT_EQ(ready->spans[0].page_id, open->spans[0].page_id) << "one owner's small objects share a page";

  EXPECT_EQ(RunAs(kNobody, kNobody,
                  [&] { return OverwriteThroughAnotherUidsPlan(SocketPath(), "root-ready", "root-open"); }),
            0)
      << "nobody got a write fd of root's page";
  auto got = store->Get("root-ready");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, ObjectPattern(1000, 4)) << "root's READY object was rewritten";
  // The writer itself still writes its plan.
  auto pointer = store->PayloadPointer(*open);
  ASSERT_TRUE(pointer.ok()) << pointer.status().ToString();
  ASSERT_OK(store->Commit("root-open", open->epoch));
  EXPECT_TRUE(kvd_.Running());
}

// Two producer uids (issue 19 item 12): B's objects never share a page or a
// header page with A's, B gets no write fd of a page holding A's READY
// object nor of one A holds for writing, and A's held pages go back to
// shared use once A's last connection is gone (not before).
TEST_F(KvdObjectAccessTest, TwoUidsNeverShareAWritablePage) {
  NANOKV_SKIP_UNLESS_ROOT();
  ScopedUser a("a"), b("b");
  if (!a.made() || !b.made()) GTEST_SKIP() << "useradd could not make the two users";
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  StartWithStore("socket_mode: \"0666\"\nallowed_uids: [" + std::to_string(a.uid()) + ", " +
                 std::to_string(b.uid()) + "]\n");
  const std::string socket = SocketPath();

  // A: a READY object pinned hard (its page and header page stay A's), and
  // one removed after its put, whose other page A still holds.
  int to_parent[2], to_a[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_a), 0);
  pid_t producer_a = fork();
  if (producer_a == 0) {
    close(to_parent[0]);
    close(to_a[1]);
    if (setgroups(0, nullptr) != 0 || setgid(a.gid()) != 0 || setuid(a.uid()) != 0) _exit(125);
    auto channel = ipc::Channel::Connect(socket);
    if (!channel.ok()) _exit(2);
    uint64_t rid = 0;
    auto ready = PutRaw(*channel, rid, "a-ready", 1000);
    if (!ready.ok()) _exit(3);
    wire::Message pin;
    pin.set_request_id(++rid);
    pin.mutable_object_pin()->set_key("a-ready");
    pin.mutable_object_pin()->set_pin(static_cast<uint32_t>(ObjectPin::kHard));
    std::vector<int> fds;
    auto pinned = Ask(*channel, pin, &fds);
    if (!pinned.ok() || pinned->has_error()) _exit(4);
    auto held = PutRaw(*channel, rid, "a-held", 2u << 20);
    if (!held.ok()) _exit(5);
    wire::Message remove;
    remove.set_request_id(++rid);
    remove.mutable_object_remove()->set_key("a-held");
    auto removed = Ask(*channel, remove, &fds);
    if (!removed.ok() || removed->has_error()) _exit(6);
    // {n, a-ready's pages..., a-held's other pages...}
    const std::set<uint32_t> ready_pages = PlanPages(*ready);
    std::vector<uint32_t> out{static_cast<uint32_t>(ready_pages.size())};
    out.insert(out.end(), ready_pages.begin(), ready_pages.end());
    for (uint32_t page : PlanPages(*held)) {
      if (!ready_pages.contains(page)) out.push_back(page);
    }
    if (write(to_parent[1], out.data(), out.size() * sizeof(uint32_t)) < 0) _exit(7);
    char go = 0;
    (void)!read(to_a[0], &go, 1);  // stays connected until told
    _exit(0);
  }
  close(to_parent[1]);
  close(to_a[0]);
  std::vector<uint32_t> a_pages(64);
  const ssize_t got = read(to_parent[0], a_pages.data(), a_pages.size() * sizeof(uint32_t));
  const size_t words = got > 0 ? static_cast<size_t>(got) / sizeof(uint32_t) : 0;
  close(to_parent[0]);
  auto finish_a = [&] {
    close(to_a[1]);
    int status = 0;
    waitpid(producer_a, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  if (words < 2 || words < 1 + a_pages[0]) {
    FAIL() << "producer A failed: exit " << finish_a();
  }
  const std::vector<uint32_t> ready_pages(a_pages.begin() + 1, a_pages.begin() + 1 + a_pages[0]);
  const std::vector<uint32_t> held_pages(a_pages.begin() + 1 + a_pages[0], a_pages.begin() + words);
  a_pages.assign(a_pages.begin() + 1, a_pages.begin() + words);
  ASSERT_EQ(ready_pages.size(), 2u) << "a-ready: a payload page and a header page";
  ASSERT_GE(held_pages.size(), 1u) << "a-held reaches past a-ready's page";

  // B, while A is connected: its puts (evicting its own older objects when
  // full) never touch A's pages, and every write fd it asks of A's pages
  // is refused.
  auto b_puts = [&](int rounds, bool want_a_page) {
    return RunAs(b.uid(), b.gid(), [&]() -> int {
      auto channel = ipc::Channel::Connect(socket);
      if (!channel.ok()) return 2;
      uint64_t rid = 0;
      for (int i = 0; i < rounds; ++i) {
        // Mostly a page each: a run of one free page, which best fit finds
        // in the single page A held once that is free.
        const uint64_t bytes = i % 4 == 0 ? 1000 + 777 * i : (2u << 20) - 4096 * (i % 3);
        auto plan = PutRaw(*channel, rid, "b" + std::to_string(i), bytes);
        if (!plan.ok()) {
          std::fprintf(stderr, "b%d: %s\n", i, plan.status().ToString().c_str());
          return 3;
        }
        for (uint32_t page : PlanPages(*plan)) {
          auto in = [page](const std::vector<uint32_t>& pages) {
            return std::find(pages.begin(), pages.end(), page) != pages.end();
          };
          if (in(ready_pages) || (in(held_pages) && !want_a_page)) return 4;  // shares a page with A
          if (in(held_pages)) return 0;  // the page A held is shared space again
        }
      }
      if (want_a_page) return 5;
      // An open plan of B's own, named for A's pages.
      std::vector<int> fds;
      wire::Message open;
      open.set_request_id(++rid);
      open.mutable_object_open()->set_key("b-open");
      open.mutable_object_open()->set_bytes_total(1000);
      open.mutable_object_open()->set_preferred_device(0);
      auto opened = Ask(*channel, open, &fds);
      if (!opened.ok() || !opened->has_object_plan()) return 8;
      for (uint32_t page : a_pages) {
        auto lent = Ask(*channel, PagesRequest(++rid, 0, page, true, "b-open", opened->object_plan().epoch()), &fds);
        for (int fd : fds) close(fd);
        fds.clear();
        if (!lent.ok() || !lent->has_error()) return 6;  // a write fd of A's page
        if (lent->error().message().find("it is uid " + std::to_string(a.uid())) == std::string::npos) return 7;
      }
      return 0;
    });
  };
  EXPECT_EQ(b_puts(24, false), 0) << "B's puts while A is connected";
  EXPECT_EQ(finish_a(), 0) << "producer A";
  // A is gone: the page it held (a-held's) is shared again and B's puts
  // reach it; a-ready's pages stay A's (its object lives, pinned). kvd may
  // see A's hang-up after B's first requests: B puts until it gets there.
  EXPECT_EQ(b_puts(48, true), 0) << "B's puts never reached the page A held, after A left";
  auto objects = OpenStore();
  ASSERT_NE(objects, nullptr);
  auto listed = objects->List();
  ASSERT_TRUE(listed.ok());
  for (const auto& entry : *listed) (void)objects->Remove(entry.key);
  EXPECT_TRUE(kvd_.Running());
}

}  // namespace
}  // namespace nanokv::testing
