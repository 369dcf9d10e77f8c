// A peer process for cluster_transfer tests, killed by them mid-transfer: a
// ClusterClient on node NODE_ID through the master at MASTER that, over and
// over, gets KEY, or (with `put BYTES TO`) puts KEY:<n> of BYTES bytes
// into node TO.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nanokv/cluster_client.h"

int main(int argc, char** argv) {
  const bool put = argc == 7 && std::string(argv[4]) == "put";
  if (argc != 4 && !put) {
    std::fprintf(stderr, "usage: cluster_reader MASTER NODE_ID KEY [put BYTES TO]\n");
    return 2;
  }
  nanokv::ClusterClientOptions options;
  options.masters = {argv[1]};
  options.node_id = argv[2];
  auto client = nanokv::ClusterClient::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  std::vector<std::byte> bytes(put ? std::strtoull(argv[5], nullptr, 10) : 0, std::byte{0x5a});
  for (unsigned long n = 0;; ++n) {
    nanokv::Status status = put ? (*client)->Put(std::string(argv[3]) + ":" + std::to_string(n), bytes,
                                                 {.preferred_segment = argv[6]})
                                : (*client)->Get(argv[3]).status();
    if (!status.ok()) std::fprintf(stderr, "%s: %s\n", put ? "put" : "get", status.ToString().c_str());
  }
}
