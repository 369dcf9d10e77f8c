// The object store's plan round trip through kvd's local socket, against the
// floor measured in the same run on the same socket.
//
//   plan:   OpenForWrite + Commit of a fresh key (two request round trips:
//           kvd allocates a header slot and payload, writes the header,
//           answers the plan; then flips READY). The Remove after each is not
//           timed (it keeps the store from filling).
//   floor:  one round trip that does no store work: GetLocation of a key
//           that does not exist (decode, one hash lookup, an Error reply).
//           The plan costs at least two of these.
//   os:     one 64-byte message to an echo process on a socketpair and back,
//           both sides blocking in recv: what the kernel's wake-ups cost on
//           this host, under any protocol.
//   futex:  a word ping-ponged with a forked process through shared memory,
//           each side spinning --spin-us then sleeping on a futex (woken
//           only when asleep): the floor of any shared-memory request, and
//           of the ring's (the goal: one ring request <= 3x it).
//   wire:   the floor request's encode and decode and its error reply's,
//           in this process: what protobuf costs a request (both sides).
//   ring:   a 40-byte message through a request ring (ipc/ring/) to a
//           forked process that answers 60 bytes, both spinning: the ring's
//           own part of a request, without decode, handling or encode.
// --ring 0 takes the socket for every request (ObjectStoreOptions::ring).
// --cpus A,B pins this process to CPU A and kvd (every thread) to B, and
// the floors' two processes likewise: on a host of several sockets or core
// complexes an unpinned kvd may sit where a cache line costs several times
// what it costs the floor's forked child beside its parent.
//
// It starts its own kvd (--kvd, default next to this binary, else
// ../entry/kvd) with an object store on a private socket, and prints one
// JSON object. --spin-us is the client's ObjectStoreOptions::spin_us,
// --busy-poll-us kvd's busy_poll_us.
//
//   object_plan_bench [--backend auto|cuda|host] [--ops 20000] [--bytes 1048576]
//                     [--spin-us 50] [--busy-poll-us 0] [--ring 1] [--cpus A,B]
#include <linux/futex.h>
#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_kvd.h"
#include "bench/bench_util.h"
#include "ipc/ring/request_ring.h"
#include "ipc/wire/codec.h"
#include "nanokv/object_store.h"

namespace nanokv {
namespace {

using bench::NowMicros;

[[noreturn]] void Die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "object_plan_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

// --cpus: -1 each when not given.
struct Cpus {
  int ours = -1;
  int kvds = -1;
};

// Pins thread `tid` (0: the caller) to `cpu`; nothing when cpu < 0.
void Pin(pid_t tid, int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(tid, sizeof(set), &set) != 0) {
    std::fprintf(stderr, "object_plan_bench: pinning %d to cpu %d: %s\n", tid, cpu, std::strerror(errno));
    std::exit(1);
  }
}

// Every thread of process `pid` to `cpu`.
void PinProcess(pid_t pid, int cpu) {
  if (cpu < 0) return;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (tasks == nullptr) return;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] != '.') Pin(static_cast<pid_t>(std::atoi(entry->d_name)), cpu);
  }
  closedir(tasks);
}

// Round trips of 64 bytes to a forked echo process on a socketpair.
std::vector<double> OsRoundTrips(size_t n, int child_cpu) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return {};
  pid_t child = fork();
  if (child == 0) {
    Pin(0, child_cpu);
    close(sv[0]);
    char buf[64];
    for (;;) {
      ssize_t got = recv(sv[1], buf, sizeof(buf), 0);
      if (got <= 0 || send(sv[1], buf, static_cast<size_t>(got), MSG_NOSIGNAL) != got) _exit(0);
    }
  }
  close(sv[1]);
  std::vector<double> out;
  char buf[64] = {};
  for (size_t i = 0; i < n + n / 10 + 1 && child > 0; ++i) {
    double t0 = NowMicros();
    if (send(sv[0], buf, sizeof(buf), MSG_NOSIGNAL) != sizeof(buf) || recv(sv[0], buf, sizeof(buf), 0) <= 0) break;
    if (i > n / 10) out.push_back(NowMicros() - t0);
  }
  close(sv[0]);
  if (child > 0) waitpid(child, nullptr, 0);
  return out;
}

// Round trips of a shared word to a forked process: it answers each value
// v with v + 1. Each side spins `spin_us`, then marks itself asleep and
// sleeps on the futex; a writer wakes the other only when it is asleep.
std::vector<double> FutexRoundTrips(size_t n, uint32_t spin_us, int child_cpu) {
  struct Shared {
    alignas(64) uint32_t word;
    alignas(64) uint32_t asleep[2];
  };
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return {};
  auto* s = new (mem) Shared{};
  auto word = std::atomic_ref<uint32_t>(s->word);
  auto wait_for = [&](int me, uint32_t want) {
    double until = NowMicros() + spin_us;
    for (;;) {
      uint32_t seen = word.load(std::memory_order_seq_cst);
      if (seen == want) return;
      if (NowMicros() < until) continue;
      std::atomic_ref<uint32_t>(s->asleep[me]).store(1, std::memory_order_seq_cst);
      if (word.load(std::memory_order_seq_cst) != want) {
        syscall(SYS_futex, &s->word, FUTEX_WAIT, seen, nullptr, nullptr, 0);
      }
      std::atomic_ref<uint32_t>(s->asleep[me]).store(0, std::memory_order_relaxed);
    }
  };
  auto post = [&](int other, uint32_t value) {
    word.store(value, std::memory_order_seq_cst);
    if (std::atomic_ref<uint32_t>(s->asleep[other]).load(std::memory_order_seq_cst) != 0) {
      syscall(SYS_futex, &s->word, FUTEX_WAKE, 1, nullptr, nullptr, 0);
    }
  };
  const uint32_t rounds = static_cast<uint32_t>(n + n / 10 + 1);
  pid_t child = fork();
  if (child == 0) {
    Pin(0, child_cpu);
    for (uint32_t v = 1; v < 2 * rounds; v += 2) {
      wait_for(1, v);
      post(0, v + 1);
    }
    _exit(0);
  }
  std::vector<double> out;
  for (uint32_t i = 0; i < rounds && child > 0; ++i) {
    double t0 = NowMicros();
    post(1, 2 * i + 1);
    wait_for(0, 2 * i + 2);
    if (i > n / 10) out.push_back(NowMicros() - t0);
  }
  if (child > 0) waitpid(child, nullptr, 0);
  munmap(mem, sizeof(Shared));
  return out;
}

// Round trips through a request ring with a forked process (see "ring"
// above). Empty when the ring cannot be made or the child stops answering
// (a second without a reply).
std::vector<double> RingRoundTrips(size_t n, int child_cpu) {
  int fd = -1;
  auto kvd_side = ipc::RequestRing::Create(&fd);
  if (!kvd_side.ok()) return {};
  auto client = ipc::RequestRing::Attach(fd);
  close(fd);
  if (!client.ok()) return {};
  const size_t rounds = n + n / 10 + 1;
  // Spins until a message comes: false on a fault or after a second.
  auto next = [](ipc::RequestRing& ring, std::vector<std::byte>* in) {
    const double give_up = NowMicros() + 1e6;
    for (unsigned looks = 1;; ++looks) {
      Result<bool> popped = ring.Pop(in);
      if (!popped.ok()) return false;
      if (*popped) return true;
      if (looks % 4096 == 0 && NowMicros() > give_up) return false;
    }
  };
  pid_t child = fork();
  if (child == 0) {
    Pin(0, child_cpu);
    std::vector<std::byte> in, reply(60);
    for (size_t i = 0; i < rounds; ++i) {
      if (!next(*kvd_side, &in) || !kvd_side->Push(reply).ok()) _exit(1);
      kvd_side->WakeClient();
    }
    _exit(0);
  }
  std::vector<double> out;
  std::vector<std::byte> request(40), in;
  for (size_t i = 0; i < rounds && child > 0; ++i) {
    double t0 = NowMicros();
    if (!client->Push(request).ok() || !next(*client, &in)) break;
    if (i > n / 10) out.push_back(NowMicros() - t0);
  }
  if (child > 0) waitpid(child, nullptr, 0);
  return out;
}

// One floor request's wire work (see "wire" above), per round trip.
std::vector<double> WireWork(size_t n) {
  std::vector<double> out;
  size_t sink = 0;
  for (size_t i = 0; i < n; ++i) {
    double t0 = NowMicros();
    wire::Message request;
    request.set_request_id(i + 1);
    request.mutable_object_locate()->set_key("bench:missing");
    wire::Message asked;
    if (!wire::Decode(wire::Encode(std::move(request)), &asked).ok()) return {};
    wire::Message reply;
    const std::vector<std::byte> bytes =
        wire::Encode(wire::ErrorReply(asked.request_id(), Status::NotFound("no object 'bench:missing'")));
    if (!wire::Decode(bytes, &reply).ok()) return {};
    sink += wire::StatusFromError(reply.error()).message().size();
    out.push_back(NowMicros() - t0);
  }
  return sink > 0 ? out : std::vector<double>{};
}

int Main(int argc, char** argv) {
  bench::LogToStderr("object_plan_bench");
  std::string backend_name = "auto", kvd_path = bench::DefaultKvd(argv[0]);
  size_t ops = 20000, bytes = 1 << 20;
  uint32_t spin_us = ObjectStoreOptions{}.spin_us, busy_poll_us = 0;
  bool ring = true;
  Cpus cpus;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--backend") backend_name = argv[i + 1];
    else if (flag == "--kvd") kvd_path = argv[i + 1];
    else if (flag == "--ops") ops = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--spin-us") spin_us = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (flag == "--busy-poll-us") busy_poll_us = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (flag == "--ring") ring = std::string(argv[i + 1]) != "0";
    else if (flag == "--cpus" && std::sscanf(argv[i + 1], "%d,%d", &cpus.ours, &cpus.kvds) == 2) {}
    else {
      std::fprintf(stderr, "usage: object_plan_bench [--backend NAME] [--kvd PATH] [--ops N] [--bytes B] "
                           "[--spin-us US] [--busy-poll-us US] [--ring 0|1] [--cpus A,B]\n");
      return 2;
    }
  }
  if (ops == 0 || bytes == 0 || bytes > (32u << 20)) {
    std::fprintf(stderr, "object_plan_bench: --ops > 0, --bytes in [1, 32 MiB]\n");
    return 2;
  }
  bench::BenchKvd kvd(kvd_path, "object_plan_bench", "object_store:\n  size: 64MiB\n",
                      {"--backend", backend_name, "--capacity", std::to_string(96u << 20),
                       "--host-device-memory", std::to_string(256u << 20), "--log-level", "warn",
                       "--busy-poll-us", std::to_string(busy_poll_us)});
  Pin(0, cpus.ours);
  PinProcess(kvd.pid(), cpus.kvds);
  ObjectStoreOptions options;
  options.ipc_name = kvd.ipc_name();
  options.backend = backend_name;
  options.spin_us = spin_us;
  options.ring = ring;
  auto opened = bench::BenchKvd::Retry([&] { return ObjectStore::Open(options); });
  if (!opened.ok()) Die("open the object store", opened.status());
  ObjectStore& store = **opened;

  const double kvd_cpu_at_start = kvd.CpuSeconds(), wall_at_start = NowMicros();
  std::vector<double> plan, floor;
  plan.reserve(ops);
  floor.reserve(ops);
  size_t warmup = ops / 10 + 1;
  for (size_t i = 0; i < ops + warmup; ++i) {
    std::string key = "bench:" + std::to_string(i);
    // Interleaved, so both see the same machine state.
    double t0 = NowMicros();
    auto missing = store.GetLocation("bench:missing");
    double t1 = NowMicros();
    if (missing.status().code() != Code::kNotFound) Die("floor request", missing.status());
    auto p = store.OpenForWrite(key, bytes, 0);
    if (!p.ok()) Die("OpenForWrite", p.status());
    Status committed = store.Commit(key, p->epoch);
    double t2 = NowMicros();
    if (!committed.ok()) Die("Commit", committed);
    Status removed = store.Remove(key);
    if (!removed.ok()) Die("Remove", removed);
    if (i >= warmup) {
      floor.push_back(t1 - t0);
      plan.push_back(t2 - t1);
    }
  }
  // kvd's cores while serving (its busy poll spins between requests).
  const double kvd_cores =
      (kvd.CpuSeconds() - kvd_cpu_at_start) / ((NowMicros() - wall_at_start) / 1e6);
  std::vector<double> os = OsRoundTrips(ops, cpus.kvds);
  std::vector<double> futex = FutexRoundTrips(ops, spin_us, cpus.kvds);
  std::vector<double> ring_floor = RingRoundTrips(ops, cpus.kvds);
  std::vector<double> wire_work = WireWork(ops);
  const double futex_p50 = bench::Quantile(futex, 0.5);
  double plan_p50 = bench::Quantile(plan, 0.5), floor_p50 = bench::Quantile(floor, 0.5);
  bench::JsonObject out;
  out.Add("bench", "object_plan")
      .Add("backend", backend_name)
      .Add("object_bytes", static_cast<long long>(bytes))
      .AddPercentiles("plan_open_commit_us", plan)
      .Add("client_spin_us", static_cast<long long>(spin_us))
      .Add("kvd_busy_poll_us", static_cast<long long>(busy_poll_us))
      .Add("ring", ring)
      .Add("cpus", cpus.ours < 0 ? std::string("unpinned")
                                 : std::to_string(cpus.ours) + "," + std::to_string(cpus.kvds))
      .Add("kvd_cores_while_serving", kvd_cores)
      .AddPercentiles("floor_round_trip_us", floor)
      .AddPercentiles("os_socket_round_trip_us", os)
      .AddPercentiles("futex_round_trip_us", futex)
      .AddPercentiles("ring_round_trip_us", ring_floor)
      .AddPercentiles("wire_work_us", wire_work)
      .Add("plan_over_two_floors", plan_p50 / (2 * floor_p50))
      .Add("request_over_futex", floor_p50 / futex_p50)
      .Add("goal_request_le_3x_futex", floor_p50 <= 3 * futex_p50)
      .Add("goal_plan_le_5us", plan_p50 <= 5.0);
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
