// nanokv_example_engine: what an inference engine does with nanokv, in small.
// It attaches by environment (ENABLE_NANOKV=1, NANOKV_IPC_NAME, NANOKV_LIMIT,
// NANOKV_GROUP), grows a KV tensor page by page writing a pattern into each
// new page, checks every mapped page still holds its own pattern (a page
// granted twice would be overwritten by its other holder), holds, shrinks, and
// answers kvd's reclaim requests by shrinking. Integration tests and
// `make demo` run it; kvd's controller runs it from configs/demo.yaml, and an
// instance's `device` reaches it as NANOKV_DEVICE (the default of --device).
//
// When kvd goes away (killed, or restarted), the engine keeps its pages and
// their bytes (the mappings outlive kvd), waits while libkv reconnects to the
// next kvd of the same IPC name, checks every page still holds what it wrote,
// and carries on; it gives up after --reconnect-wait-ms.
//
// Exit codes: 0 all held; 1 an error (named on stderr); 2 bad usage or
// nanokv not enabled; 3 a page did not hold the bytes this engine wrote.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <cerrno>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/page_pattern.h"
#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"

namespace nanokv {
namespace {

constexpr int kExitError = 1, kExitUsage = 2, kExitCorrupt = 3;

struct Options {
  int device = 0;
  size_t pages = 16;       // the tensor's size, and how far each round grows
  size_t step = 4;         // pages per grant
  int rounds = 2;
  int hold_ms = 0;         // time held at full size each round
  int step_ms = 0;         // pause between steps (lets tests act mid-run)
  uint32_t seed = 0;       // 0: the pid, so engines differ
  bool quiet = false;
  // Check every mapped page once at full size, not after each grant and
  // each give-back: a run that grows with the pages, not their square
  // (scripts/fd-scale.sh at tens of thousands of pages).
  bool check_at_full_only = false;
  // Share mode: map pages another tenant of the group holds, check that they
  // hold Pattern(expect_seed), write Pattern(write_seed), exit.
  std::vector<uint32_t> share_ids;
  uint32_t expect_seed = 0;
  uint32_t write_seed = 0;
  std::string ids_out;     // grow mode: write the page ids held at full size here
  int exit_holding = -1;   // >= 0: exit with this code while holding round 0's pages
  int reconnect_wait_ms = 90'000;  // how long to wait for a restarted kvd (libkv tries for 60 s)
};

using examples::PageTag;
using examples::PageWords;

// SIGUSR1 ends the hold in progress and skips later ones: a test (or a demo)
// moves the engine on at the moment it chooses, not when a timer says.
std::atomic<bool> g_hurry{false};
void OnHurry(int) { g_hurry = true; }

class Engine {
 public:
  Engine(Client& client, const Options& options) : client_(client), o_(options) {}

  int RunGrowShrink();
  int RunShare();

 private:
  // Runs `request` (one that asks kvd something); while it fails because kvd
  // went away, waits for the reconnect, then runs it again.
  // (kUnavailable may also be a hung kvd's timeout: a few tries, not forever.)
  Status WithKvd(const std::function<Status()>& request) {
    for (int attempt = 1;; ++attempt) {
      Status s = request();
      if (s.code() != Code::kUnavailable || attempt == 5) return s;
      NANOKV_RETURN_IF_ERROR(AwaitKvd());
    }
  }
  // Unmaps the last `pages` pages and returns them. With kvd gone the return
  // cannot be sent, but the pages are this engine's no more all the same:
  // libkv leaves them out of what it hands the next kvd, which frees them.
  // So no retry (that would give back pages twice).
  Status GiveBack(size_t pages) {
    Status s = tensor_->Shrink(pages);
    return s.code() == Code::kUnavailable ? Status::OK() : s;
  }
  // After kvd went away: waits until libkv has reconnected (or gives up),
  // then checks the KV survived. The pages stay mapped meanwhile.
  Status AwaitKvd();
  // In a hold: notices a restart that libkv handled in the background.
  Status NoticeRestart() { return client_.connected() ? Reconnected() : AwaitKvd(); }
  Status Reconnected();

  uint64_t Tag(size_t index) const { return PageTag(seed(), index); }
  uint32_t seed() const { return o_.seed != 0 ? o_.seed : static_cast<uint32_t>(getpid()); }
  void* PageAddress(size_t index) const {
    return static_cast<char*>(tensor_->data()) + index * tensor_->page_bytes();
  }
  Status Write(size_t index, uint64_t tag) {
    auto words = PageWords(tensor_->page_bytes(), tag);
    return client_.CopyToDevice(PageAddress(index), words.data(), tensor_->page_bytes());
  }
  // OK, or kInternal naming the page that does not hold `tag`'s words.
  Status Check(size_t index, uint64_t tag) {
    std::vector<uint64_t> got(tensor_->page_bytes() / sizeof(uint64_t));
    NANOKV_RETURN_IF_ERROR(client_.CopyToHost(got.data(), PageAddress(index), tensor_->page_bytes()));
    if (got != PageWords(tensor_->page_bytes(), tag)) {
      return Status::Internal("page at index " + std::to_string(index) + " (kvd id " +
                              std::to_string(tensor_->page_id(index).value_or(0)) +
                              ") does not hold the bytes this engine wrote");
    }
    return Status::OK();
  }
  Status CheckAll() {
    for (size_t i = 0; i < tensor_->mapped_prefix(); ++i) NANOKV_RETURN_IF_ERROR(Check(i, Tag(i)));
    return Status::OK();
  }
  // Gives back what kvd asked for, from the end.
  Status AnswerReclaim() {
    uint32_t wanted = reclaim_.exchange(0);
    if (wanted == 0) return Status::OK();
    size_t give = std::min<size_t>(wanted, tensor_->mapped_prefix());
    if (!o_.quiet) {
      std::printf("engine %d: kvd asked for %u pages back, returning %zu\n", getpid(), wanted, give);
      std::fflush(stdout);
    }
    return GiveBack(give);
  }
  void Pause(int ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }

  Client& client_;
  const Options& o_;
  std::unique_ptr<KVTensor> tensor_;
  std::atomic<uint32_t> reclaim_{0};
  uint64_t reconnects_seen_ = 0;
};

Status Engine::AwaitKvd() {
  if (client_.connected()) return Reconnected();  // back already
  const size_t held = tensor_ ? tensor_->mapped_prefix() : 0;
  std::printf("engine %d: kvd went away; holding %zu pages, waiting for it to come back\n", getpid(), held);
  std::fflush(stdout);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.reconnect_wait_ms);
  while (!client_.connected()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable("kvd did not come back within " + std::to_string(o_.reconnect_wait_ms) +
                                 " ms (--reconnect-wait-ms)");
    }
    Pause(20);
  }
  return Reconnected();
}

Status Engine::Reconnected() {
  const uint64_t reconnects = client_.stats().reconnects;
  if (reconnects == reconnects_seen_) return Status::OK();  // it never went away (a slow kvd)
  reconnects_seen_ = reconnects;
  if (uint64_t lost = client_.stats().pages_forfeited; lost > 0) {
    // The new kvd did not take them back (its recovery window ended first):
    // their ids may be another engine's now.
    return Status::FailedPrecondition("the restarted kvd did not take back " + std::to_string(lost) +
                                      " of this engine's pages");
  }
  NANOKV_RETURN_IF_ERROR(CheckAll());
  std::printf("engine %d: reconnected to kvd; its %zu pages hold their bytes, carrying on\n", getpid(),
              tensor_ ? tensor_->mapped_prefix() : size_t{0});
  std::fflush(stdout);
  return Status::OK();
}

int Report(const Status& status) {
  std::fprintf(stderr, "engine %d: %s\n", getpid(), status.ToString().c_str());
  return status.code() == Code::kInternal ? kExitCorrupt : kExitError;
}

int Engine::RunGrowShrink() {
  auto tensor = KVTensor::Create(client_, o_.device, o_.pages * client_.page_bytes());
  if (!tensor.ok()) return Report(tensor.status());
  tensor_ = std::move(tensor).value();
  client_.OnReclaim([this](const ReclaimNotice& notice) { reclaim_ += notice.pages; });

  for (int round = 0; round < o_.rounds; ++round) {
    int refusals = 0;
    while (tensor_->mapped_prefix() < o_.pages) {
      Status s = AnswerReclaim();
      if (!s.ok()) return Report(s);
      size_t at = tensor_->mapped_prefix();
      size_t grow = std::min(o_.step, o_.pages - at);
      s = WithKvd([&] { return tensor_->Grow(grow); });
      if (s.code() == Code::kResourceExhausted) {
        // Over a limit or the device is full. A real engine would preempt a
        // request; this one waits a little for pages to come free, then
        // settles for what it has this round (so engines that all hold
        // some pages and want more cannot wait on each other forever).
        if (!o_.quiet) std::printf("engine %d: %s\n", getpid(), s.ToString().c_str());
        if (++refusals > 10) break;
        Pause(10 + (getpid() % 20));
        continue;
      }
      if (!s.ok()) return Report(s);
      for (size_t i = at; i < at + grow; ++i) {
        if (!(s = Write(i, Tag(i))).ok()) return Report(s);
      }
      if (!o_.check_at_full_only && !(s = CheckAll()).ok()) return Report(s);
      Pause(o_.step_ms);
    }
    if (o_.check_at_full_only) {
      if (Status full = CheckAll(); !full.ok()) return Report(full);
    }
    if (!o_.ids_out.empty() && round == 0) {
      FILE* out = std::fopen(o_.ids_out.c_str(), "w");
      if (out == nullptr) return Report(Status::FromErrno("fopen", errno, o_.ids_out));
      for (size_t i = 0; i < tensor_->mapped_prefix(); ++i) {
        std::fprintf(out, "%u %llu\n", *tensor_->page_id(i), static_cast<unsigned long long>(Tag(i)));
      }
      std::fclose(out);
    }
    if (!o_.quiet) {
      std::printf("engine %d: round %d: %zu pages (%zu MiB) mapped and verified\n", getpid(), round,
                  tensor_->mapped_prefix(), tensor_->mapped_prefix() * client_.page_bytes() >> 20);
    }
    std::fflush(stdout);
    Status s;
    if (o_.exit_holding >= 0) {
      // A crash, for tests: no return, no detach; kvd must take the pages back.
      Pause(o_.hold_ms);
      std::printf("engine %d: exiting with code %d while holding %zu pages\n", getpid(),
                  o_.exit_holding, tensor_->mapped_prefix());
      std::fflush(stdout);
      _exit(o_.exit_holding);
    }
    // Hold, answering kvd's reclaim requests as they come.
    auto hold_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.hold_ms);
    while (std::chrono::steady_clock::now() < hold_end && !g_hurry) {
      if (!(s = NoticeRestart()).ok()) return Report(s);
      if (!(s = AnswerReclaim()).ok()) return Report(s);
      Pause(5);
    }
    if (o_.check_at_full_only && !(s = CheckAll()).ok()) return Report(s);
    while (tensor_->mapped_prefix() > 0) {
      if (!o_.check_at_full_only && !(s = CheckAll()).ok()) return Report(s);
      const size_t give = std::min(o_.step, tensor_->mapped_prefix());
      if (!(s = GiveBack(give)).ok()) return Report(s);
      Pause(o_.step_ms);
    }
    reclaim_ = 0;  // an empty tensor has answered any reclaim
  }
  return 0;
}

int Engine::RunShare() {
  auto tensor = KVTensor::Create(client_, o_.device, o_.share_ids.size() * client_.page_bytes());
  if (!tensor.ok()) return Report(tensor.status());
  tensor_ = std::move(tensor).value();
  Status s = WithKvd([&] { return tensor_->MapShared(0, o_.device, o_.share_ids); });
  if (!s.ok()) return Report(s);
  for (size_t i = 0; i < o_.share_ids.size(); ++i) {
    if (!(s = Check(i, PageTag(o_.expect_seed, i))).ok()) return Report(s);
    if (!(s = Write(i, PageTag(o_.write_seed, i))).ok()) return Report(s);
  }
  if (!o_.quiet) std::printf("engine %d: shared %zu pages, read and wrote them\n", getpid(), o_.share_ids.size());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"nanokv_example_engine: grow, verify and shrink a KV tensor of pages kvd shares.\n"
               "Attaches by environment: ENABLE_NANOKV=1 NANOKV_IPC_NAME=<name> [NANOKV_LIMIT=2G] [NANOKV_GROUP=g]"};
  Options o;
  app.add_option("--device", o.device, "device to take pages from (kvd's ordinal)")->envname("NANOKV_DEVICE");
  app.add_option("--pages", o.pages, "tensor size in pages, and how far each round grows")->check(CLI::PositiveNumber);
  app.add_option("--step", o.step, "pages per grant")->check(CLI::PositiveNumber);
  app.add_option("--rounds", o.rounds, "grow/shrink rounds")->check(CLI::NonNegativeNumber);
  app.add_option("--hold-ms", o.hold_ms, "time held at full size each round (SIGUSR1 ends the holds)");
  app.add_option("--step-ms", o.step_ms, "pause between steps");
  app.add_option("--seed", o.seed, "pattern seed (default: pid)");
  app.add_option("--ids-out", o.ids_out, "write the page ids held at full size to this file");
  app.add_option("--share-ids", o.share_ids, "share mode: map these page ids of the group")->delimiter(',');
  app.add_option("--expect-seed", o.expect_seed, "share mode: the seed the shared pages hold");
  app.add_option("--write-seed", o.write_seed, "share mode: the seed to write over them");
  app.add_option("--exit-holding", o.exit_holding,
                 "exit with this code after the first round's hold, pages still held (a crash, for tests)")
      ->check(CLI::Range(0, 255));
  app.add_option("--reconnect-wait-ms", o.reconnect_wait_ms,
                 "when kvd goes away, how long to wait for it to come back before giving up")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", o.quiet, "print only errors");
  app.add_flag("--check-at-full-only", o.check_at_full_only,
               "check every page once at full size and before giving back, not after each step");
  CLI11_PARSE(app, argc, argv);
  signal(SIGUSR1, OnHurry);

  auto client = Client::AttachFromEnv();
  if (!client.ok()) {
    std::fprintf(stderr, "engine: %s\n", client.status().ToString().c_str());
    return client.status().code() == Code::kNotFound ? kExitUsage : kExitError;
  }
  if (!o.quiet) {
    std::printf("engine %d: attached to kvd as '%s' (%s backend, %zu KiB pages, limit %llu MiB)\n",
                getpid(), (*client)->tenant().c_str(), (*client)->backend_name().c_str(),
                (*client)->page_bytes() >> 10,
                static_cast<unsigned long long>((*client)->limit_bytes() >> 20));
  }
  Engine engine(**client, o);
  return o.share_ids.empty() ? engine.RunGrowShrink() : engine.RunShare();
}

}  // namespace
}  // namespace nanokv

int main(int argc, char** argv) { return nanokv::Main(argc, argv); }
