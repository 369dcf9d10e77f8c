#include "tests/chaos/chaos_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace nanokv::chaos {
namespace {

// examples/page_pattern.h: word i of a page is tag * kMul + i.
constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;

// kMul is odd, so it has an inverse modulo 2^64 (Newton: each step doubles
// the correct low bits), and word 0 gives the tag back.
constexpr uint64_t Inverse(uint64_t a) {
  uint64_t x = a;  // correct to 3 bits for odd a
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
constexpr uint64_t kMulInverse = Inverse(kMul);
static_assert(kMul * kMulInverse == 1);

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("open", errno, tmp);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return Status::FromErrno("write", e, tmp);
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  if (rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno("rename", errno, path);
  return Status::OK();
}

}  // namespace

const char* PhaseName(Phase phase) {
  static const char* kNames[kPhaseCount] = {"idle",    "attach", "grant",  "share",  "return",
                                            "reclaim", "limit",  "verify", "barrier"};
  auto i = static_cast<uint32_t>(phase);
  return i < kPhaseCount ? kNames[i] : "?";
}

uint64_t MakeTag(int group, int index, uint32_t life, uint32_t counter) {
  return (uint64_t(group + 1) & 0xff) << 56 | (uint64_t(index + 1) & 0xff) << 48 |
         uint64_t(life & 0xffff) << 32 | counter;
}

PageContent Classify(std::span<const uint64_t> words, bool full) {
  PageContent out;
  if (words.empty()) return out;
  size_t stride = full ? 1 : std::max<size_t>(1, words.size() / 64);
  auto at = [&](auto&& pred) {
    for (size_t i = 0; i < words.size(); i += stride) {
      if (!pred(i)) return false;
    }
    return pred(words.size() - 1);
  };
  if (words[0] == 0 && at([&](size_t i) { return words[i] == 0; })) {
    out.kind = PageContent::Kind::kZero;
    return out;
  }
  uint64_t tag = words[0] * kMulInverse;
  if (TagGroup(tag) >= 0 && TagIndex(tag) >= 0 &&
      at([&](size_t i) { return words[i] == tag * kMul + i; })) {
    out.kind = PageContent::Kind::kTagged;
    out.tag = tag;
  }
  return out;
}

std::string Describe(const PageContent& content) {
  switch (content.kind) {
    case PageContent::Kind::kZero: return "zeros";
    case PageContent::Kind::kGarbage: return "garbage";
    case PageContent::Kind::kTagged: break;
  }
  char buf[96];
  std::snprintf(buf, sizeof(buf), "tag %016" PRIx64 " (group %d engine %d)", content.tag,
                TagGroup(content.tag), TagIndex(content.tag));
  return buf;
}

Status WriteBarrier(const std::string& dir, const Barrier& barrier) {
  const char* word = barrier.command == Command::kHold ? "hold"
                     : barrier.command == Command::kExit ? "exit" : "go";
  return WriteFileAtomically(dir + "/barrier", std::to_string(barrier.epoch) + " " + word + "\n");
}

Barrier ReadBarrier(const std::string& dir) {
  Barrier out;
  std::ifstream in(dir + "/barrier");
  std::string word;
  if (!(in >> out.epoch >> word)) return Barrier{};
  out.command = word == "hold" ? Command::kHold : word == "exit" ? Command::kExit : Command::kGo;
  return out;
}

Status WriteReport(const std::string& path, const Report& r) {
  std::ostringstream out;
  out << "pid " << r.pid << "\nepoch " << r.epoch << "\nattached " << (r.attached ? 1 : 0)
      << "\ntenant " << r.tenant_id << "\nsteps " << r.steps << "\nrefused " << r.refused
      << "\nforgotten " << r.forgotten << "\n";
  for (const HeldPage& p : r.pages) {
    out << "page " << p.device << " " << p.id << " " << (p.owned ? "owned" : "shared") << " "
        << static_cast<int>(p.content.kind) << " " << p.content.tag << "\n";
  }
  out << "end\n";  // a report without it was not written whole
  return WriteFileAtomically(path, out.str());
}

Result<Report> ReadReport(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("no report at " + path);
  Report r;
  std::string key;
  bool ended = false;
  while (in >> key) {
    if (key == "pid") in >> r.pid;
    else if (key == "epoch") in >> r.epoch;
    else if (key == "attached") { int a = 0; in >> a; r.attached = a != 0; }
    else if (key == "tenant") in >> r.tenant_id;
    else if (key == "steps") in >> r.steps;
    else if (key == "refused") in >> r.refused;
    else if (key == "forgotten") in >> r.forgotten;
    else if (key == "page") {
      HeldPage p;
      std::string role;
      int kind = 0;
      in >> p.device >> p.id >> role >> kind >> p.content.tag;
      p.owned = role == "owned";
      p.content.kind = static_cast<PageContent::Kind>(kind);
      r.pages.push_back(p);
    } else if (key == "end") {
      ended = true;
      break;
    } else {
      return Status::ProtocolError("report " + path + ": unknown line '" + key + "'");
    }
    if (!in) return Status::ProtocolError("report " + path + ": malformed '" + key + "' line");
  }
  if (!ended) return Status::ProtocolError("report " + path + " is incomplete");
  return r;
}

std::string StatePath(const std::string& dir, const std::string& engine) {
  return dir + "/" + engine + ".state";
}
std::string PhasePath(const std::string& dir, const std::string& engine) {
  return dir + "/" + engine + ".phase";
}
std::string FailuresPath(const std::string& dir, const std::string& engine) {
  return dir + "/" + engine + ".failures";
}

void AppendLine(const std::string& path, const std::string& line) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = line + "\n";
  ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
  close(fd);
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

}  // namespace nanokv::chaos
