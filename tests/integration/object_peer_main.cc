// A second process for the object store's integration tests:
//   object_peer put <ipc_name> <key> <bytes> <seed>   plan, copy, commit
//   object_peer get <ipc_name> <key> <bytes> <seed>   get, compare byte-exact
// Exit 0 on success; 1 with the reason on stderr.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nanokv/object_store.h"
#include "tests/integration/object_pattern.h"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: object_peer put|get <ipc_name> <key> <bytes> <seed>\n");
    return 2;
  }
  std::string mode = argv[1];
  nanokv::ObjectStoreOptions options;
  options.ipc_name = argv[2];
  const char* backend = std::getenv("NANOKV_TEST_BACKEND");
  options.backend = backend != nullptr && *backend != '\0' ? backend : "host";
  std::string key = argv[3];
  size_t bytes = std::strtoull(argv[4], nullptr, 10);
  auto seed = static_cast<uint8_t>(std::atoi(argv[5]));
  auto store = nanokv::ObjectStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  auto data = nanokv::testing::ObjectPattern(bytes, seed);
  if (mode == "put") {
    nanokv::Status put = (*store)->Put(key, data, 0);
    if (!put.ok()) {
      std::fprintf(stderr, "put: %s\n", put.ToString().c_str());
      return 1;
    }
    return 0;
  }
  auto got = (*store)->Get(key);
  if (!got.ok()) {
    std::fprintf(stderr, "get: %s\n", got.status().ToString().c_str());
    return 1;
  }
  if (*got != data) {
    std::fprintf(stderr, "get: %zu bytes differ from the pattern\n", got->size());
    return 1;
  }
  return 0;
}
