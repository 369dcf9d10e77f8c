// The kvd binary: one program, two roles. `kvd` (or `kvd --role node`) is the
// per-node daemon (daemon/), `kvd --role master` the cluster master
// (master/). This floor-4 entry is the only code that sees both, so neither
// role includes the other.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/node/page_keeper.h"
#include "daemon/node_main.h"
#include "master/service/master_main.h"

int main(int argc, char** argv) {
  std::string role = "node";
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--role") == 0) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "--role: expected node or master\n");
        return 2;
      }
      role = argv[++i];
    } else if (std::strncmp(argv[i], "--role=", 7) == 0) {
      role = argv[i] + 7;
    } else {
      rest.push_back(argv[i]);
    }
  }
  rest.push_back(nullptr);
  int count = static_cast<int>(rest.size()) - 1;
  if (role == "node") return nanokv::kvd::NodeMain(count, rest.data());
  if (role == "master") return nanokv::master::MasterMain(count, rest.data());
  // kvd's own helper, started by kvd only (daemon/node/page_keeper.h).
  if (role == "page-keeper") return nanokv::kvd::PageKeeperMain(count, rest.data());
  std::fprintf(stderr, "--role: '%s' is not node or master\n", role.c_str());
  return 2;
}
