// nanokv_chaos_engine: one engine of the chaos run (chaos_driver.cc). Over
// the public libkv API it loops at random: grant pages (batches of 1 to
// --max-batch) into a KVTensor per device and write its own tag into each,
// return some, share pages a tenant of its group holds, set its own limit,
// answer kvd's reclaims, and verify that every page it holds still holds what
// it wrote. It reports what it holds to the driver through files
// (chaos_files.h) and holds still at the driver's barriers. The driver kills
// it with SIGKILL at any moment; nothing it leaves may matter to kvd.
//
// Exit codes: 0 told to exit; 1 kvd went away; 2 bad usage.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/page_pattern.h"
#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"
#include "tests/chaos/chaos_files.h"

namespace nanokv::chaos {
namespace {

struct Options {
  std::string ipc;
  std::string name;
  int group = 0;
  int index = 0;
  int groups = 1;
  int engines = 1;
  std::string dir;
  size_t slots = 16;       // pages per tensor (one tensor per device)
  uint32_t max_batch = 8;
  uint64_t seed = 1;
  int step_us = 2000;      // at most this long a pause between steps
  // Host backend: a new physical page is all zeros, so a page showing another
  // group's bytes crossed groups. (A GPU's new page may hold any old bytes.)
  bool check_fresh = false;
};

struct Slot {
  bool mapped = false;
  bool owned = false;
  uint32_t id = 0;
  PageContent content;  // owned: the tag written; shared: what was read
};

class Engine {
 public:
  explicit Engine(const Options& o) : o_(o), rng_(o.seed ^ (uint64_t(getpid()) << 20)) {}
  int Run();

 private:
  void SetPhase(Phase phase) {
    if (phase_ != nullptr) std::atomic_ref<uint32_t>(*phase_).store(static_cast<uint32_t>(phase));
  }
  void Fail(const std::string& what) {
    std::string line = o_.name + " pid " + std::to_string(getpid()) + ": " + what;
    std::fprintf(stderr, "%s\n", line.c_str());
    AppendLine(FailuresPath(o_.dir, o_.name), line);
  }
  // A request's answer: OK, or an error this run expects (a limit, a page
  // another group took meanwhile). Anything else is a failure; kvd gone ends us.
  bool Expected(const Status& s, const char* what, std::initializer_list<Code> also = {}) {
    if (s.code() == Code::kResourceExhausted) ++refused_;
    if (s.ok() || s.code() == Code::kResourceExhausted) return true;
    for (Code c : also) {
      if (s.code() == c) return true;
    }
    if (s.code() == Code::kUnavailable && !client_->connected()) {
      std::fprintf(stderr, "%s: kvd went away: %s\n", o_.name.c_str(), s.ToString().c_str());
      std::fflush(stderr);
      _exit(1);
    }
    Fail(std::string("unexpected answer to ") + what + ": " + s.ToString());
    return false;
  }
  uint32_t Rand(uint32_t lo, uint32_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_);
  }
  void* Address(size_t d, size_t slot) const {
    return static_cast<char*>(tensors_[d]->data()) + slot * page_bytes_;
  }
  int Device(size_t d) const { return client_->devices()[d].device; }

  uint32_t Held() const {
    uint32_t n = 0;
    for (const auto& slots : slots_) {
      for (const Slot& s : slots) n += s.mapped ? 1 : 0;
    }
    return n;
  }
  void MapPhaseFile();
  bool Attach();
  void Step();
  void Barrier(uint64_t epoch);
  void Exit();
  void WriteState();
  Result<PageContent> Read(size_t d, size_t slot, bool full);
  bool Check(size_t d, size_t slot, bool full);
  void Grant();
  void Give(bool reclaim, uint32_t want);
  void Share();
  void SetLimit();
  // A run of `count` unmapped slots of device index d near a random start;
  // shorter (at least 1) when none that long is free; nullopt when none is.
  std::optional<std::pair<size_t, size_t>> FreeRun(size_t d, size_t count);

  const Options& o_;
  std::mt19937_64 rng_;
  uint32_t* phase_ = nullptr;
  std::unique_ptr<Client> client_;
  std::vector<std::unique_ptr<KVTensor>> tensors_;  // per device index
  std::vector<std::vector<Slot>> slots_;
  size_t page_bytes_ = 0;
  uint64_t epoch_ = 0;  // the last barrier reported
  uint64_t steps_ = 0;
  uint64_t refused_ = 0;
  uint32_t counter_ = 0;
  std::vector<uint64_t> buffer_;
};

void Engine::MapPhaseFile() {
  int fd = open(PhasePath(o_.dir, o_.name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (ftruncate(fd, 4096) == 0) {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) phase_ = static_cast<uint32_t*>(p);
  }
  close(fd);
}

bool Engine::Attach() {
  SetPhase(Phase::kAttach);
  ClientOptions options;
  options.ipc_name = o_.ipc;
  options.tenant = o_.name;
  options.group = "g" + std::to_string(o_.group);
  options.request_timeout_ms = 20'000;
  auto client = Client::Attach(options);
  SetPhase(Phase::kIdle);
  if (!client.ok()) {
    // The engine this one replaces may not be gone from kvd yet.
    if (client.status().code() != Code::kAlreadyExists) {
      Fail("attach: " + client.status().ToString());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return false;
  }
  client_ = std::move(client).value();
  page_bytes_ = client_->page_bytes();
  for (size_t d = 0; d < client_->devices().size(); ++d) {
    auto tensor = KVTensor::Create(*client_, Device(d), o_.slots * page_bytes_);
    if (!tensor.ok()) {
      Fail("KVTensor::Create: " + tensor.status().ToString());
      _exit(1);
    }
    tensors_.push_back(std::move(tensor).value());
    slots_.emplace_back(o_.slots);
  }
  return true;
}

Result<PageContent> Engine::Read(size_t d, size_t slot, bool full) {
  buffer_.resize(page_bytes_ / sizeof(uint64_t));
  NANOKV_RETURN_IF_ERROR(client_->CopyToHost(buffer_.data(), Address(d, slot), page_bytes_));
  return Classify(buffer_, full);
}

// Owned: exactly the tag written. Shared: never another group's bytes (its
// owner may have written since, or died mid-write); records what it holds.
bool Engine::Check(size_t d, size_t slot, bool full) {
  Slot& s = slots_[d][slot];
  auto got = Read(d, slot, full);
  if (!got.ok()) {
    Fail("read back: " + got.status().ToString());
    return false;
  }
  std::string where = "device " + std::to_string(Device(d)) + " page " + std::to_string(s.id);
  if (s.owned) {
    if (got->kind != PageContent::Kind::kTagged || got->tag != s.content.tag) {
      Fail("pattern: " + where + " holds " + Describe(*got) + ", wrote " + Describe(s.content));
      s.content = *got;  // report it once
      s.owned = false;
      return false;
    }
    return true;
  }
  s.content = *got;
  if (o_.check_fresh && got->kind == PageContent::Kind::kTagged && TagGroup(got->tag) != o_.group) {
    Fail("leak: shared " + where + " holds another group's bytes: " + Describe(*got));
    return false;
  }
  return true;
}

std::optional<std::pair<size_t, size_t>> Engine::FreeRun(size_t d, size_t count) {
  std::vector<Slot>& slots = slots_[d];
  size_t start = Rand(0, static_cast<uint32_t>(slots.size() - 1));
  for (size_t k = 0; k < slots.size(); ++k) {
    size_t first = (start + k) % slots.size();
    if (slots[first].mapped) continue;
    size_t len = 0;
    while (first + len < slots.size() && len < count && !slots[first + len].mapped) ++len;
    return std::make_pair(first, len);
  }
  return std::nullopt;
}

void Engine::Grant() {
  static const uint32_t kBatches[] = {1, 1, 1, 2, 2, 3, 4, 4, 6, 8, 12, 16, 24, 32};
  size_t d = Rand(0, static_cast<uint32_t>(tensors_.size() - 1));
  uint32_t want = kBatches[Rand(0, std::size(kBatches) - 1)];
  want = std::min(want, o_.max_batch);
  auto run = FreeRun(d, want);
  if (!run) return;
  auto [first, len] = *run;
  SetPhase(Phase::kGrant);
  Status mapped = tensors_[d]->Map(first, len);
  SetPhase(Phase::kIdle);
  if (!mapped.ok()) {
    Expected(mapped, "grant");
    return;
  }
  std::vector<uint64_t> words;
  for (size_t i = first; i < first + len; ++i) {
    Slot& s = slots_[d][i];
    s.mapped = true;
    s.owned = true;
    s.id = tensors_[d]->page_id(i).value_or(UINT32_MAX);
    // A page's old bytes never cross groups (invariant 2): it is fresh
    // (zeros on host), or its group's own (ours, or torn by a writer that
    // was killed mid-write).
    auto before = Read(d, i, false);
    if (o_.check_fresh && before.ok() && before->kind == PageContent::Kind::kTagged && TagGroup(before->tag) != o_.group) {
      Fail("leak: granted device " + std::to_string(Device(d)) + " page " + std::to_string(s.id) +
           " holding another group's bytes: " + Describe(*before));
    }
    s.content.kind = PageContent::Kind::kTagged;
    s.content.tag = MakeTag(o_.group, o_.index, static_cast<uint32_t>(getpid()), ++counter_);
    words = examples::PageWords(page_bytes_, s.content.tag);
    Status wrote = client_->CopyToDevice(Address(d, i), words.data(), page_bytes_);
    if (!wrote.ok()) Fail("write: " + wrote.ToString());
    Check(d, i, true);
  }
}

// Gives back `want` pages (reclaim) or one random run of up to 6 (a return).
void Engine::Give(bool reclaim, uint32_t want) {
  uint32_t given = 0;
  while (given < want) {
    std::vector<std::pair<size_t, size_t>> mapped;  // (d, slot)
    for (size_t d = 0; d < slots_.size(); ++d) {
      for (size_t i = 0; i < slots_[d].size(); ++i) {
        if (slots_[d][i].mapped) mapped.emplace_back(d, i);
      }
    }
    if (mapped.empty()) return;
    auto [d, first] = mapped[Rand(0, static_cast<uint32_t>(mapped.size() - 1))];
    size_t len = 0;
    uint32_t cap = reclaim ? want - given : Rand(1, 6);
    while (first + len < slots_[d].size() && len < cap && slots_[d][first + len].mapped) ++len;
    for (size_t i = first; i < first + len; ++i) Check(d, i, false);
    SetPhase(reclaim ? Phase::kReclaim : Phase::kReturn);
    Status unmapped = tensors_[d]->Unmap(first, len);
    SetPhase(Phase::kIdle);
    // The pages are unmapped even when the return failed (KVTensor::Unmap).
    for (size_t i = first; i < first + len; ++i) slots_[d][i] = Slot{};
    if (!Expected(unmapped, reclaim ? "reclaim return" : "return")) return;
    given += static_cast<uint32_t>(len);
    if (!reclaim) return;
  }
}

void Engine::Share() {
  // Group-mates: engine indices with the same index % groups.
  std::vector<int> mates;
  for (int j = o_.group; j < o_.engines; j += o_.groups) {
    if (j != o_.index) mates.push_back(j);
  }
  if (mates.empty()) return;
  int mate = mates[Rand(0, static_cast<uint32_t>(mates.size() - 1))];
  auto report = ReadReport(StatePath(o_.dir, "e" + std::to_string(mate)));
  if (!report.ok()) return;
  size_t d = Rand(0, static_cast<uint32_t>(tensors_.size() - 1));
  std::vector<uint32_t> candidates;
  for (const HeldPage& p : report->pages) {
    if (!p.owned || p.device != Device(d)) continue;
    bool mine = false;
    for (const Slot& s : slots_[d]) mine |= s.mapped && s.id == p.id;
    if (!mine) candidates.push_back(p.id);
  }
  if (candidates.empty()) return;
  std::shuffle(candidates.begin(), candidates.end(), rng_);
  auto run = FreeRun(d, Rand(1, 4));
  if (!run) return;
  auto [first, len] = *run;
  candidates.resize(std::min(candidates.size(), len));
  SetPhase(Phase::kShare);
  Status mapped = tensors_[d]->MapShared(first, Device(d), candidates);
  SetPhase(Phase::kIdle);
  // The report was a snapshot: the page may be gone to another group since
  // (kPermissionDenied) or back with us already (kFailedPrecondition).
  if (!mapped.ok()) {
    Expected(mapped, "share", {Code::kPermissionDenied, Code::kFailedPrecondition});
    return;
  }
  for (size_t k = 0; k < candidates.size(); ++k) {
    Slot& s = slots_[d][first + k];
    s.mapped = true;
    s.owned = false;
    s.id = candidates[k];
    Check(d, first + k, false);
  }
}

void Engine::SetLimit() {
  uint64_t total = uint64_t{o_.slots} * tensors_.size();
  uint64_t pages = Rand(0, 2) == 0 ? total * 4 : Rand(1, static_cast<uint32_t>(total));
  SetPhase(Phase::kLimit);
  auto limit = client_->SetLimit(pages * page_bytes_);
  SetPhase(Phase::kIdle);
  // The driver limits engines as the operator: a raise above that ceiling
  // is refused, and the limit stays (issue 19 item 7).
  Expected(limit.status(), "set_limit", {Code::kPermissionDenied});
}

void Engine::WriteState() {
  Report r;
  r.pid = getpid();
  r.epoch = epoch_;
  r.attached = client_ != nullptr;
  r.tenant_id = client_ ? client_->tenant_id() : 0;
  r.steps = steps_;
  r.refused = refused_;
  r.forgotten = client_ ? client_->stats().pages_released : 0;
  for (size_t d = 0; d < slots_.size(); ++d) {
    for (const Slot& s : slots_[d]) {
      if (s.mapped) r.pages.push_back({Device(d), s.id, s.owned, s.content});
    }
  }
  Status wrote = WriteReport(StatePath(o_.dir, o_.name), r);
  if (!wrote.ok()) Fail("report: " + wrote.ToString());
}

void Engine::Barrier(uint64_t epoch) {
  SetPhase(Phase::kBarrier);
  if (client_) {
    if (uint32_t want = client_->pending_reclaim_pages()) Give(true, std::min<uint32_t>(want, Held()));
    for (size_t d = 0; d < slots_.size(); ++d) {
      for (size_t i = 0; i < slots_[d].size(); ++i) {
        if (slots_[d][i].mapped) Check(d, i, true);
      }
    }
  }
  epoch_ = epoch;
  WriteState();
  SetPhase(Phase::kIdle);
}

void Engine::Exit() {
  tensors_.clear();  // unmaps and returns every page
  if (client_) {
    Status detached = client_->Detach();
    if (!detached.ok()) Fail("detach: " + detached.ToString());
  }
  client_.reset();
  slots_.clear();
  WriteState();
  std::exit(0);
}

void Engine::Step() {
  // The count can exceed what we hold (a notice computed before returns of
  // ours reached kvd): give what there is and carry on.
  if (uint32_t want = client_->pending_reclaim_pages(); want > 0 && Held() > 0) {
    Give(true, std::min<uint32_t>(want, Held()));
    return;
  }
  uint32_t roll = Rand(0, 99);
  if (roll < 45) {
    Grant();
  } else if (roll < 70) {
    Give(false, 1);
  } else if (roll < 83) {
    Share();
  } else if (roll < 90) {
    SetLimit();
  } else {
    SetPhase(Phase::kVerify);
    for (int k = 0; k < 4; ++k) {
      size_t d = Rand(0, static_cast<uint32_t>(slots_.size() - 1));
      size_t i = Rand(0, static_cast<uint32_t>(o_.slots - 1));
      if (slots_[d][i].mapped) Check(d, i, true);
    }
    SetPhase(Phase::kIdle);
  }
}

int Engine::Run() {
  MapPhaseFile();
  while (true) {
    chaos::Barrier b = ReadBarrier(o_.dir);
    if (b.command == Command::kExit) Exit();
    if (b.command == Command::kHold) {
      if (b.epoch > epoch_) Barrier(b.epoch);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (!client_) {
      if (!Attach()) continue;
    } else {
      Step();
      ++steps_;
    }
    WriteState();
    if (o_.step_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(Rand(0, o_.step_us)));
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"nanokv_chaos_engine: one engine of the chaos run (started by nanokv_chaos)"};
  Options o;
  app.add_option("--ipc", o.ipc, "kvd's IPC name")->required();
  app.add_option("--name", o.name, "tenant name (e<index>)")->required();
  app.add_option("--index", o.index, "engine index")->required();
  app.add_option("--engines", o.engines, "engines in the run")->required();
  app.add_option("--groups", o.groups, "tenant groups; engine i is in group i % groups")->required();
  app.add_option("--dir", o.dir, "the run's state directory")->required();
  app.add_option("--slots", o.slots, "pages per tensor (one per device)")->check(CLI::Range(1, 4096));
  app.add_option("--max-batch", o.max_batch, "most pages per grant")->check(CLI::Range(1, 4096));
  app.add_option("--seed", o.seed, "random seed (mixed with the pid)");
  app.add_option("--step-us", o.step_us, "longest pause between steps");
  app.add_flag("--check-fresh", o.check_fresh, "fresh pages are zeros (host backend): check no page shows another group's bytes");
  CLI11_PARSE(app, argc, argv);
  if (o.groups < 1 || o.engines < 1) {
    std::fprintf(stderr, "--engines and --groups must be positive\n");
    return 2;
  }
  o.group = o.index % o.groups;
  // A driver that dies takes its engines along: none keeps writing its files.
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return 1;
  Engine engine(o);
  return engine.Run();
}

}  // namespace
}  // namespace nanokv::chaos

int main(int argc, char** argv) { return nanokv::chaos::Main(argc, argv); }
