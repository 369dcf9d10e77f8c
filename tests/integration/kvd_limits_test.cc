// Resource limits against a real kvd: a process that opens 1000 connections,
// one that never reads its replies, one that sends a message a byte at a
// time, and a kvd out of file descriptors. kvd survives each, gives back what
// the abuser held, and an engine process started meanwhile is served to the end.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>

#include <thread>

#include "ipc/uds/channel.h"
#include "ipc/wire/codec.h"
#include "base/open_file_limit.h"
#include "tests/integration/kvd_fixture.h"

namespace nanokv::testing {
namespace {

using namespace std::chrono_literals;

size_t CountFds(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return 0;
  size_t count = 0;
  while (const dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

// The lowest fd number kvd has free once its spare fds (/dev/null, above
// stdio) are closed: as its limit, not even those make room for an accept.
rlim_t LowestFdFreeWithoutSpares(pid_t pid) {
  for (rlim_t n = 0;; ++n) {
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(n);
    char target[256];
    ssize_t len = readlink(path.c_str(), target, sizeof(target));
    if (len < 0) return n;
    if (n > 2 && std::string_view(target, static_cast<size_t>(len)) == "/dev/null") return n;
  }
}

wire::Message AttachRequest(const std::string& tenant) {
  wire::Message m;
  m.set_request_id(1);
  m.mutable_attach()->set_tenant(tenant);
  return m;
}

// What kvd said on a connection so far, without waiting.
enum class Heard { kNothing, kError, kOther, kClosed };
Heard Poll(ipc::Channel& channel, std::string* error = nullptr) {
  std::vector<std::byte> data;
  std::vector<int> fds;
  auto got = channel.Receive(&data, &fds);
  for (int fd : fds) close(fd);
  if (!got.ok() || *got == ipc::Channel::Received::kClosed) return Heard::kClosed;
  if (*got == ipc::Channel::Received::kWouldBlock) return Heard::kNothing;
  wire::Message m;
  if (!wire::Decode(data, &m).ok()) return Heard::kOther;
  if (!m.has_error()) return Heard::kOther;
  if (error != nullptr) *error = m.error().message();
  return Heard::kError;
}

class KvdLimitsTest : public KvdFixture {
 protected:
  void SetUp() override {
    KvdFixture::SetUp();
    (void)RaiseOpenFileLimit();  // the flood needs more than a soft limit of 1024
  }

  // `n` connections from this process; connect retries while kvd's backlog is full.
  std::vector<ipc::Channel> Flood(size_t n) {
    std::vector<ipc::Channel> out;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
      auto c = ipc::Channel::Connect(SocketPath());
      if (c.ok()) {
        EXPECT_TRUE(c->SetNonBlocking(true).ok());  // Poll never waits
        out.push_back(std::move(c).value());
      } else {
        std::this_thread::sleep_for(1ms);
      }
    }
    EXPECT_EQ(out.size(), n) << "could not open the connections";
    return out;
  }

  // Polls the flood until `expected` refusals came (or 30 s); *served marks
  // the connections kvd said nothing on. Returns the refusals; *why, the last.
  size_t AwaitRefusals(std::vector<ipc::Channel>& flood, size_t expected, std::string* why,
                       std::vector<bool>* served) {
    size_t refused = 0;
    std::vector<bool> heard(flood.size(), false);
    WaitFor([&] {
      for (size_t i = 0; i < flood.size(); ++i) {
        if (heard[i]) continue;
        Heard h = Poll(flood[i], why);
        if (h == Heard::kError) ++refused;
        heard[i] = h != Heard::kNothing;
      }
      return refused == expected;
    }, 30s);
    served->assign(flood.size(), false);
    for (size_t i = 0; i < flood.size(); ++i) (*served)[i] = !heard[i];
    return refused;
  }

  // An engine process that grows, verifies and shrinks its pages for a while.
  Process StartBusyEngine(const std::string& name) {
    return StartEngine(name, {"--pages", "4", "--step", "1", "--rounds", "20", "--step-ms", "5",
                              "--quiet"});
  }

  // A kvd of 16 pages, warmed up and idle, whose soft open-file limit is
  // then lowered to `spare` above what it holds (*old: the limit before).
  void StartKvdThenLowerItsLimit(rlim_t spare, rlimit* old, rlimit* low) {
    StartKvd(16);
    ExpectKvdServes("warm-up");
    ASSERT_TRUE(WaitFor([&] { return Read().segment.header.tenant_count == 0; }, 10s));
    ASSERT_EQ(prlimit(kvd_.pid(), RLIMIT_NOFILE, nullptr, old), 0);
    *low = *old;
    low->rlim_cur = CountFds(kvd_.pid()) + spare;
    ASSERT_EQ(prlimit(kvd_.pid(), RLIMIT_NOFILE, low, nullptr), 0);
  }

  void ExpectEngineFinished(Process& engine) {
    auto code = engine.Wait(60s);
    ASSERT_TRUE(code.has_value()) << "the engine was starved:\n" << engine.Log();
    EXPECT_EQ(*code, 0) << engine.Log();
  }

  // kvd still serves: a new tenant gets a page, and kvd's rows show that
  // page held by it alone, every other page of the test given back.
  void ExpectKvdServes(const std::string& tenant) {
    ASSERT_TRUE(kvd_.Running()) << kvd_.Log();
    auto client = AttachClient(tenant);
    ASSERT_TRUE(client);
    auto granted = client->Grant(0, 1);
    ASSERT_TRUE(granted.ok()) << granted.status().ToString();
    PageLedger ledger;
    ledger.Attach(tenant, "");
    ledger.Hold(tenant, 0, *granted);
    ExpectLedger(ledger);
  }
};

TEST_F(KvdLimitsTest, AThousandConnectionsFromOneProcessAreCappedAndGiveEveryFdBack) {
  StartKvd(16);
  ExpectKvdServes("warm-up");  // kvd's lazily made fds (pool refills) exist before counting
  ASSERT_TRUE(WaitFor([&] { return Read().segment.header.tenant_count == 0; }, 10s));
  size_t kvd_fds = CountFds(kvd_.pid());
  ASSERT_GT(kvd_fds, 0u);
  // Each page kvd creates keeps an fd (its export): pages made meanwhile count.
  auto created = [&] { return static_cast<size_t>(Read().segment.devices[0].created_pages); };
  size_t created_before = created();

  std::vector<ipc::Channel> flood = Flood(1000);
  ASSERT_EQ(flood.size(), 1000u);
  // The first 64 (max_connections_per_process) are served; the rest are told why not.
  std::string why;
  std::vector<bool> served;
  EXPECT_EQ(AwaitRefusals(flood, 1000 - 64, &why, &served), 1000u - 64u);
  EXPECT_NE(why.find("max_connections_per_process"), std::string::npos) << why;
  // kvd never holds more than the 64 and the refusals still waiting to be read.
  EXPECT_LT(CountFds(kvd_.pid()), kvd_fds + 2 * 64 + 130) << "refused connections pile up";

  // Another engine is served while the flood holds its 64.
  Process engine = StartBusyEngine("neighbour");
  ExpectEngineFinished(engine);

  flood.clear();
  // Two fds a page at most (a page created ahead: its memfd on host and
  // its export until its first grant).
  EXPECT_TRUE(WaitFor([&] { return CountFds(kvd_.pid()) <= kvd_fds + 2 * (created() - created_before); }, 10s))
      << "kvd holds " << CountFds(kvd_.pid()) << " fds, " << kvd_fds << " before the flood, "
      << created() - created_before << " pages created since";
  ExpectKvdServes("after");
}

// Issue 16 item 1: a granted page keeps no exported fd in kvd. On cuda and
// hip a page is then no fd at all (a driver handle); on host it is its
// memfd, one fd. Before, every page kept its export too: two on host, one
// on cuda, so a node of GPUs needed ~290,000 fds.
TEST_F(KvdLimitsTest, GrantedPagesKeepNoExportInKvd) {
  StartKvd(64);
  ExpectKvdServes("warm-up");
  ASSERT_TRUE(WaitFor([&] { return Read().segment.header.tenant_count == 0; }, 10s));
  auto created = [&] { return static_cast<size_t>(Read().segment.devices[0].created_pages); };
  const size_t fds_before = CountFds(kvd_.pid()), created_before = created();
  auto client = AttachClient("holder");
  ASSERT_TRUE(client);
  auto granted = client->Grant(0, 48);
  ASSERT_TRUE(granted.ok()) << granted.status().ToString();
  // The segment says so at kvd's next publish.
  ASSERT_TRUE(WaitFor([&] { return created() - created_before >= 44; }, 10s)) << created() << " created";
  const size_t made = created() - created_before;
  const size_t per_page_at_rest = Backend() == "host" ? 1 : 0;
  // The connection's two fds, and the reserve's exports (4 pages ahead) as slack.
  EXPECT_TRUE(WaitFor([&] { return CountFds(kvd_.pid()) <= fds_before + made * per_page_at_rest + 2 + 4; }, 10s))
      << "kvd holds " << CountFds(kvd_.pid()) << " fds, " << fds_before << " before " << made
      << " pages were made and granted";
}

// Issue 16's CI case: 64 engines attached at once, each mapping and
// verifying its pages, under an open-file limit the old design could not
// serve: with an export kept per page (two fds a host page) kvd's budget
// left 8 connections at 900 fds for 272 pages; at one fd a page it affords
// about 100 (at three fds a connection).
TEST_F(KvdLimitsTest, SixtyFourEnginesAtOnceUnderALoweredOpenFileLimit) {
  constexpr int kEngines = 64;
  kvd_prefix_ = {"/usr/bin/prlimit", "--nofile=900:900", "--"};
  StartKvd(kEngines * 4 + 16);
  std::vector<Process> engines;
  for (int i = 0; i < kEngines; ++i) {
    engines.push_back(StartEngine("e" + std::to_string(i),
                                  {"--pages", "4", "--step", "4", "--rounds", "1", "--hold-ms", "12000", "--quiet"}));
  }
  // All attached and holding at once: each holds its pages for 12 s, so the
  // first is still there when the last attaches (under ASan on 2 busy cores
  // the 64 took 7 s, past the 4 s they used to hold).
  EXPECT_TRUE(WaitFor([&] { return Read().segment.header.tenant_count == kEngines; }, 30s))
      << Read().segment.header.tenant_count << " attached\n" << kvd_.Log();
  for (int i = 0; i < kEngines; ++i) {
    auto code = engines[i].Wait(60s);
    ASSERT_TRUE(code.has_value()) << "engine " << i << " hung:\n" << engines[i].Log();
    EXPECT_EQ(*code, 0) << "engine " << i << ":\n" << engines[i].Log();
  }
  ExpectKvdServes("after");
}

TEST_F(KvdLimitsTest, TheConnectionLimitFollowsTheOpenFileLimit) {
  // 400 fds: after its pages and the headroom, kvd can serve a few dozen connections.
  kvd_prefix_ = {"/usr/bin/prlimit", "--nofile=400:400", "--"};
  StartKvd(16, {"--max-connections-per-process", "1000"});
  const std::string log = kvd_.Log();
  const std::string said = "serving at most ";
  size_t at = log.find(said);
  ASSERT_NE(at, std::string::npos) << log;
  size_t limit = std::stoul(log.substr(at + said.size()));
  EXPECT_LT(limit, 200u);
  EXPECT_GE(limit, 8u);

  std::vector<ipc::Channel> flood = Flood(300);
  std::string why;
  std::vector<bool> served;
  EXPECT_EQ(AwaitRefusals(flood, flood.size() - limit, &why, &served), flood.size() - limit);
  EXPECT_NE(why.find("(max_connections in kvd's config"), std::string::npos) << why;
  // The served connections still work: attach on one.
  size_t one = 0;
  while (one < flood.size() && !served[one]) ++one;
  ASSERT_LT(one, flood.size());
  ASSERT_TRUE(flood[one].Send(wire::Encode(AttachRequest("one-of-many"))).ok());
  ASSERT_TRUE(WaitFor([&] { return Poll(flood[one]) == Heard::kOther; }, 10s));

  flood.clear();
  ExpectKvdServes("after");
  EXPECT_EQ(kvd_.Log().find("out of file descriptors"), std::string::npos);
}

TEST_F(KvdLimitsTest, OutOfFileDescriptorsNewConnectionsAreClosedNotLeftWaiting) {
  // Lower kvd's soft limit under its feet, to just above what it holds.
  rlimit old{}, low{};
  StartKvdThenLowerItsLimit(6, &old, &low);

  std::vector<ipc::Channel> flood = Flood(40);
  for (auto& c : flood) (void)c.Send(wire::Encode(AttachRequest("f" + std::to_string(c.fd()))));
  // Every connection hears from kvd: a reply, or a refusal and closed at
  // once. None waits in the backlog.
  std::vector<Heard> heard(flood.size(), Heard::kNothing);
  size_t told_out_of_fds = 0;
  bool all = WaitFor([&] {
    bool done = true;
    for (size_t i = 0; i < flood.size(); ++i) {
      std::string why;
      if (heard[i] == Heard::kNothing) heard[i] = Poll(flood[i], &why);
      told_out_of_fds += why.find("kvd is out of file descriptors") != std::string::npos;
      done &= heard[i] != Heard::kNothing;
    }
    return done;
  }, 20s);
  EXPECT_TRUE(all) << "connections left waiting in kvd's backlog";
  EXPECT_GT(told_out_of_fds, 0u);
  EXPECT_NE(kvd_.Log().find("out of file descriptors"), std::string::npos);

  ASSERT_EQ(prlimit(kvd_.pid(), RLIMIT_NOFILE, &old, nullptr), 0);
  flood.clear();
  ExpectKvdServes("after");
}

// Issue 16 item 3: an engine kvd has no fd for still reads why, through
// libkv: the cause and what to raise, not a reset connection.
TEST_F(KvdLimitsTest, AnEngineRefusedForWantOfFdsIsToldWhichLimit) {
  rlimit old{}, low{};
  StartKvdThenLowerItsLimit(0, &old, &low);  // the next accept has no fd

  // kvd's fds may shift by one meanwhile (a pool refill): keep any engine
  // served until one is refused.
  std::vector<std::unique_ptr<Client>> served;
  Status refused;
  for (int i = 0; i < 8 && refused.ok(); ++i) {
    auto client = Client::Attach(Options("short-" + std::to_string(i)));
    if (client.ok()) served.push_back(std::move(client).value());
    else refused = client.status();
  }
  ASSERT_EQ(refused.code(), Code::kResourceExhausted) << refused.ToString();
  const std::string_view why = refused.message();
  EXPECT_NE(why.find("kvd is out of file descriptors (its open-file limit, RLIMIT_NOFILE, is " +
                     std::to_string(low.rlim_cur) + ")"), std::string_view::npos) << refused.ToString();
  EXPECT_NE(why.find("LimitNOFILE="), std::string_view::npos) << refused.ToString();
  EXPECT_NE(why.find("max_connections in kvd's config"), std::string_view::npos) << refused.ToString();

  ASSERT_EQ(prlimit(kvd_.pid(), RLIMIT_NOFILE, &old, nullptr), 0);
  served.clear();
  ExpectKvdServes("after");
}

// With no fd even to turn a peer away (its spares closed make no room:
// another thread took one), kvd stops accepting for a moment rather than
// spin on a listener that stays readable, and once the limit is raised the
// engine waiting in the backlog is served, not told kvd is out of fds.
TEST_F(KvdLimitsTest, WithNoFdEvenToRefuseKvdPausesThenServesTheEngineThatWaited) {
  rlimit old{}, low{};
  StartKvdThenLowerItsLimit(0, &old, &low);
  low.rlim_cur = LowestFdFreeWithoutSpares(kvd_.pid());
  ASSERT_EQ(prlimit(kvd_.pid(), RLIMIT_NOFILE, &low, nullptr), 0);

  Result<std::unique_ptr<Client>> waited = Status::Internal("the engine did not finish attaching");
  std::thread engine([&] { waited = Client::Attach(Options("waited")); });
  EXPECT_TRUE(WaitFor([&] { return kvd_.Log().find("not accepting for") != std::string::npos; }, 20s)) << kvd_.Log();
  std::this_thread::sleep_for(300ms);  // a spinning loop logs each failed accept meanwhile
  const std::string log = kvd_.Log();
  size_t lines = 0;
  for (size_t at = log.find("out of file descriptors"); at != std::string::npos;
       at = log.find("out of file descriptors", at + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 2u) << "kvd spun on its listener:\n" << log;

  ASSERT_EQ(prlimit(kvd_.pid(), RLIMIT_NOFILE, &old, nullptr), 0);
  engine.join();
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  waited->reset();
  ExpectKvdServes("after");
}

TEST_F(KvdLimitsTest, AnEngineThatNeverReadsIsDroppedAndItsPagesComeBack) {
  StartKvd(16);
  ipc::Channel deaf = std::move(Flood(1).at(0));
  ASSERT_TRUE(deaf.Send(wire::Encode(AttachRequest("deaf"))).ok());
  ASSERT_TRUE(WaitFor([&] { return Poll(deaf) == Heard::kOther; }, 10s));
  wire::Message grant;
  grant.set_request_id(2);
  grant.mutable_grant()->set_device(0);
  grant.mutable_grant()->set_pages(2);
  ASSERT_TRUE(deaf.Send(wire::Encode(grant)).ok());
  ASSERT_TRUE(WaitFor([&] { return GrantedPages() == 2; }, 10s));
  ExpectLedger(PageLedger{}, {"deaf"}, {{0, 2}});  // its two pages, nobody else's

  Process engine = StartBusyEngine("neighbour");
  // Requests it never reads the answers to: each asks kvd a question
  // (a lookup in a store this kvd does not have) and kvd's answers pile up.
  wire::Message ask;
  ask.mutable_object_locate()->set_key("nothing");
  bool dropped = false;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!dropped && std::chrono::steady_clock::now() < deadline) {
    ask.set_request_id(ask.request_id() + 1);
    Status sent = deaf.Send(wire::Encode(ask));
    if (sent.code() == Code::kUnavailable) {
      std::this_thread::sleep_for(1ms);  // kvd's receive queue is full for a moment
    } else if (!sent.ok()) {
      dropped = true;  // EPIPE/ECONNRESET: kvd closed it
    }
  }
  EXPECT_TRUE(dropped) << "kvd kept a peer that does not read";
  EXPECT_NE(kvd_.Log().find("dropping connection"), std::string::npos);
  ExpectEngineFinished(engine);
  ExpectLedger(PageLedger{});  // the deaf engine's pages came back, and the neighbour's
  ExpectKvdServes("after");
}

TEST_F(KvdLimitsTest, AMessageSentAByteAtATimeNeverHoldsKvd) {
  StartKvd(16);
  Process engine = StartBusyEngine("neighbour");
  ipc::Channel slow = std::move(Flood(1).at(0));
  std::vector<std::byte> attach = wire::Encode(AttachRequest("slow-engine-dribbling-its-attach"));
  ASSERT_GT(attach.size(), 16u);
  // Each byte is a datagram of its own: kvd answers each as the fault it is,
  // waits for no rest, and closes the connection after max_faults (16). Each
  // byte goes out once kvd has answered the one before.
  size_t errors = 0;
  bool closed = false;
  for (size_t i = 0; i < attach.size() && !closed; ++i) {
    if (!slow.Send(std::span(attach).subspan(i, 1)).ok()) break;
    Heard h = Heard::kNothing;
    ASSERT_TRUE(WaitFor([&] { return (h = Poll(slow)) != Heard::kNothing; }, 20s))
        << "kvd did not answer byte " << i;
    if (h == Heard::kError) ++errors;
    if (h == Heard::kClosed) closed = true;
  }
  EXPECT_EQ(errors, 16u);
  EXPECT_TRUE(closed || WaitFor([&] { return Poll(slow) == Heard::kClosed; }, 5s));
  ExpectEngineFinished(engine);
  ExpectKvdServes("after");
}

}  // namespace
}  // namespace nanokv::testing
