// A reader for cluster_transfer_test: a ClusterClient on node argv[2] that
// gets key argv[3] over and over through the master at argv[1], until it is
// killed (the test kills it mid-get).
#include <cstdio>

#include "nanokv/cluster_client.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: cluster_reader MASTER NODE_ID KEY\n");
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
  for (;;) {
    auto got = (*client)->Get(argv[3]);
    if (!got.ok()) std::fprintf(stderr, "get: %s\n", got.status().ToString().c_str());
  }
}
