// The fixture of kvctl's integration tests (kvctl_test.cc, the views;
// kvctl_commands_test.cc, the commands): kvctl run as a binary through a
// shell, against the fixture's kvd, and small readers of its output.
//
// /dev/shm is shared by everything on the machine (other tests' kvds too), so
// these tests find their own kvd by name and never assume it is the only one,
// and clean up only what they name.
#ifndef NANOKV_TESTS_INTEGRATION_KVCTL_FIXTURE_H_
#define NANOKV_TESTS_INTEGRATION_KVCTL_FIXTURE_H_

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/integration/kvd_fixture.h"
#include "tests/unit/kvctl/mini_json.h"

namespace nanokv::testing {

using namespace std::chrono_literals;

struct Ran {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline bool Exists(const std::string& path) {
  struct stat st{};
  return lstat(path.c_str(), &st) == 0;
}

inline const ipc::TenantRow* FindRow(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.tenant_count; ++i) {
    if (ipc::ReadString(s.segment.tenants[i].name) == name) return &s.segment.tenants[i];
  }
  return nullptr;
}

inline const ipc::InstanceRow* FindInstance(const ipc::Snapshot& s, const std::string& name) {
  for (uint32_t i = 0; i < s.segment.header.instance_count; ++i) {
    if (ipc::ReadString(s.segment.instances[i].name) == name) return &s.segment.instances[i];
  }
  return nullptr;
}

// The line of a table that starts with `name` and a blank, or "".
inline std::string TableRow(const std::string& table, const std::string& name) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(name + " ")) return line;
  }
  return "";
}

inline const Json* FindByKey(const Json& array, const std::string& key, const std::string& value) {
  for (const Json& item : array.items) {
    if (item[key].str() == value) return &item;
  }
  return nullptr;
}

// tmux on its own socket in the test's directory: no other tmux touched,
// the server killed at the end.
class Tmux {
 public:
  explicit Tmux(const std::string& dir) : socket_(Quote(dir + "/tmux.sock")) {}
  ~Tmux() { (void)std::system(("tmux -S " + socket_ + " kill-server >/dev/null 2>&1").c_str()); }
  std::string Command(const std::string& args) const { return "tmux -S " + socket_ + " " + args; }

 private:
  std::string socket_;
};

class KvctlTest : public KvdFixture {
 protected:
  static std::string KvctlBinary() { return Binary("NANOKV_KVCTL_BINARY", NANOKV_KVCTL_BINARY); }

  // Runs a shell command line with the test's run directory and no IPC name
  // or colour settings from outside; stdout and stderr apart.
  Ran Shell(const std::string& command, std::map<std::string, std::string> env = {}) {
    static int counter = 0;
    const std::string base = dir_.path() + "/run" + std::to_string(counter++);
    env.emplace("NANOKV_RUN_DIR", dir_.path());
    env.emplace("NANOKV_IPC_NAME", "");  // "" unsets
    env.emplace("KVCACHED_IPC_NAME", "");
    env.emplace("NO_COLOR", "");
    Process p = Process::Start({"/bin/sh", "-c", command + " >" + Quote(base + ".out") + " 2>" + Quote(base + ".err")},
                               env, base + ".log");
    Ran run;
    auto code = p.Wait(60s);
    run.code = code.value_or(-1);
    run.out = ReadFile(base + ".out");
    run.err = ReadFile(base + ".err");
    return run;
  }

  Ran Kvctl(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    std::string command = "exec " + Quote(KvctlBinary());
    for (const std::string& arg : args) command += " " + Quote(arg);
    return Shell(command, std::move(env));
  }

  static Json ParseJson(const Ran& run) {
    auto doc = JsonParser::Parse(run.out);
    EXPECT_TRUE(doc.has_value()) << "not JSON: " << run.out << run.err;
    return doc.value_or(Json{});
  }

  // An engine that takes `pages` pages of device 0 and holds them (answering
  // reclaim notices) for a minute.
  Process HoldingEngine(const std::string& name, int pages, std::map<std::string, std::string> env = {}) {
    return StartEngine(name, {"--pages", std::to_string(pages), "--step", std::to_string(pages), "--rounds",
                              "1", "--hold-ms", "60000"},
                       std::move(env));
  }

  uint64_t TenantUsed(const std::string& name) {
    const ipc::Snapshot snap = Read();  // FindRow points into it: keep it alive
    const ipc::TenantRow* row = FindRow(snap, name);
    return row != nullptr ? row->used_bytes : 0;
  }

  // A second kvd of this test, beside the fixture's, in the same run directory.
  Process StartSecondKvd(const std::string& ipc, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {Binary("NANOKV_KVD_BINARY", NANOKV_KVD_BINARY), "--backend", Backend(), "--ipc-name",
                                     ipc, "--capacity", std::to_string(8 * kPage), "--host-device-memory",
                                     std::to_string(32 * kPage), "--reserve-pages", "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Process kvd = Process::Start(argv, {{"NANOKV_RUN_DIR", dir_.path()}}, dir_.path() + "/" + ipc + ".log");
    EXPECT_TRUE(WaitFor([&] { return ipc::ReadSegment(ipc).ok() && Exists(dir_.path() + "/" + ipc + ".sock"); },
                        20s))
        << kvd.Log();
    return kvd;
  }
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_KVCTL_FIXTURE_H_
