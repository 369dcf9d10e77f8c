// A peer process for cluster tests, killed by them mid-work: a
// ClusterClient on node NODE_ID through the master at MASTER that, over and
// over, gets KEY, or (with `put BYTES TO`) puts KEY:<n> of BYTES bytes into
// node TO; or (with `open-batch BYTES TO COUNT`, on host HOST_ID from
// $NANOKV_HOST_ID) opens KEY:0..COUNT-1 in one batch on node TO, writes
// the first half of them through their pages (NANOKV_TEST_BACKEND's fill),
// says "written" and waits to
// be killed: a producer that dies mid-batch.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "nanokv/cluster_client.h"

namespace {

int OpenBatch(nanokv::ClusterClient& client, const std::string& key, uint64_t bytes, const std::string& to,
              size_t count) {
  std::vector<nanokv::WriteRequest> opens;
  for (size_t i = 0; i < count; ++i) opens.push_back({key + ":" + std::to_string(i), bytes, {.preferred_segment = to}});
  const char* name = std::getenv("NANOKV_TEST_BACKEND");
  auto backend = nanokv::gpu::OpenBackend(name != nullptr && *name != '\0' ? name : "host");
  if (!backend.ok()) {
    std::fprintf(stderr, "backend: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  auto plans = client.BatchOpenForWrite(opens);
  for (size_t i = 0; i < count / 2; ++i) {
    if (!plans[i].ok()) {
      std::fprintf(stderr, "open: %s\n", plans[i].status().ToString().c_str());
      return 1;
    }
    auto at = client.PayloadPointer(plans[i]->replicas.front());
    if (!at.ok()) {
      std::fprintf(stderr, "payload: %s\n", at.status().ToString().c_str());
      return 1;
    }
    nanokv::Status filled = (*backend)->Fill(*at, 0x5a, bytes);
    if (!filled.ok()) {
      std::fprintf(stderr, "fill: %s\n", filled.ToString().c_str());
      return 1;
    }
  }
  std::printf("written\n");
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  const bool put = argc == 7 && std::string(argv[4]) == "put";
  const bool open_batch = argc == 8 && std::string(argv[4]) == "open-batch";
  if (argc != 4 && !put && !open_batch) {
    std::fprintf(stderr, "usage: cluster_reader MASTER NODE_ID KEY [put BYTES TO | open-batch BYTES TO COUNT]\n");
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
  if (open_batch) {
    return OpenBatch(**client, argv[3], std::strtoull(argv[5], nullptr, 10), argv[6],
                     std::strtoull(argv[7], nullptr, 10));
  }
  std::vector<std::byte> bytes(put ? std::strtoull(argv[5], nullptr, 10) : 0, std::byte{0x5a});
  for (unsigned long n = 0;; ++n) {
    nanokv::Status status = put ? (*client)->Put(std::string(argv[3]) + ":" + std::to_string(n), bytes,
                                                 {.preferred_segment = argv[6]})
                                : (*client)->Get(argv[3]).status();
    if (!status.ok()) std::fprintf(stderr, "%s: %s\n", put ? "put" : "get", status.ToString().c_str());
  }
}
