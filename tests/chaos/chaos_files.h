// What the chaos driver and its engines say to each other, through files in
// the run's state directory (so a SIGKILLed engine leaves nothing half-said):
//
//   barrier            "<epoch> hold|go|exit", written by the driver (rename).
//                      hold: every engine finishes its step, verifies all its
//                      pages, writes its report for <epoch> and waits; go:
//                      carry on; exit: give everything back and exit 0.
//   <engine>.state     the engine's report (rename, so never torn): its pid,
//                      epoch, and every page it holds with the tag it wrote
//                      (owned) or read (shared).
//   <engine>.phase     8 bytes the engine maps and stores its current request
//                      in, so the driver can kill it in the middle of one.
//   <engine>.failures  one line per failure the engine saw (O_APPEND): a page
//                      not holding its bytes, another group's bytes, an error
//                      kvd should never answer.
//
// A page's bytes: examples/page_pattern.h's words for a tag that names the
// writer: group + 1 (8 bits), engine index + 1 (8 bits), life (16 bits: low
// pid bits), a counter (32 bits). So any page's content names its writer's
// group, and an all-zero page is a fresh one (the host backend's memfds).
#ifndef NANOKV_TESTS_CHAOS_CHAOS_FILES_H_
#define NANOKV_TESTS_CHAOS_CHAOS_FILES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv::chaos {

enum class Phase : uint32_t {
  kIdle = 0,
  kAttach = 1,
  kGrant = 2,   // KVTensor::Map
  kShare = 3,   // KVTensor::MapShared
  kReturn = 4,  // KVTensor::Unmap (a plain return)
  kReclaim = 5, // KVTensor::Unmap answering kvd's reclaim
  kLimit = 6,   // Client::SetLimit
  kVerify = 7,
  kBarrier = 8,
};
inline constexpr int kPhaseCount = 9;
const char* PhaseName(Phase phase);

// --- Page tags ---
uint64_t MakeTag(int group, int index, uint32_t life, uint32_t counter);
inline int TagGroup(uint64_t tag) { return static_cast<int>(tag >> 56) - 1; }
inline int TagIndex(uint64_t tag) { return static_cast<int>((tag >> 48) & 0xff) - 1; }

// What a page holds: all zeros, one tag's words, or neither (garbage).
struct PageContent {
  enum class Kind { kZero, kTagged, kGarbage };
  Kind kind = Kind::kGarbage;
  uint64_t tag = 0;  // kTagged
};
// Classifies `words` (a page read back). `full` checks every word; else a
// sample of 64 words spread over the page, plus its first and last.
PageContent Classify(std::span<const uint64_t> words, bool full);
std::string Describe(const PageContent& content);

// --- Control ---
enum class Command { kGo, kHold, kExit };
struct Barrier {
  uint64_t epoch = 0;
  Command command = Command::kGo;
};
Status WriteBarrier(const std::string& dir, const Barrier& barrier);
Barrier ReadBarrier(const std::string& dir);  // {0, kGo} when absent

// --- Reports ---
struct HeldPage {
  int device = 0;
  uint32_t id = 0;
  bool owned = true;  // granted to it (it wrote the tag); false: shared (it read it)
  PageContent content;
};
struct Report {
  int pid = 0;
  uint64_t epoch = 0;
  bool attached = false;
  uint32_t tenant_id = 0;
  uint64_t steps = 0;
  uint64_t refused = 0;   // requests kvd refused for a limit or a full device
  uint64_t forgotten = 0; // page handles dropped because kvd recycled the page
  std::vector<HeldPage> pages;
};
Status WriteReport(const std::string& path, const Report& report);
Result<Report> ReadReport(const std::string& path);

std::string StatePath(const std::string& dir, const std::string& engine);
std::string PhasePath(const std::string& dir, const std::string& engine);
std::string FailuresPath(const std::string& dir, const std::string& engine);

// Appends one line to `path` with a single write(2) (O_APPEND).
void AppendLine(const std::string& path, const std::string& line);
// The lines of a file; empty when it does not exist.
std::vector<std::string> ReadLines(const std::string& path);

}  // namespace nanokv::chaos

#endif  // NANOKV_TESTS_CHAOS_CHAOS_FILES_H_
