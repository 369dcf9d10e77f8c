// A tiny engine outside nanokv's tree: attaches by environment, maps pages
// kvd shares, writes them and reads them back. Only installed headers.
#include <cstdio>
#include <cstring>
#include <vector>

#include "nanokv/client.h"
#include "nanokv/kv_tensor.h"

int main() {
  auto client = nanokv::Client::AttachFromEnv();
  if (!client.ok()) {
    std::fprintf(stderr, "outside: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto tensor = nanokv::KVTensor::Create(**client, 0, 4 * (*client)->page_bytes());
  if (!tensor.ok() || !(*tensor)->Map(0, 4).ok()) {
    std::fprintf(stderr, "outside: could not map 4 pages\n");
    return 1;
  }
  const size_t bytes = 4 * (*client)->page_bytes();
  std::vector<unsigned char> out(bytes), in(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(i * 7 + 3);
  if (!(*client)->CopyToDevice((*tensor)->data(), out.data(), bytes).ok() ||
      !(*client)->CopyToHost(in.data(), (*tensor)->data(), bytes).ok() || in != out) {
    std::fprintf(stderr, "outside: the pages did not hold the bytes written\n");
    return 1;
  }
  std::printf("outside: tenant %s mapped 4 pages on the %s backend, wrote and read them back\n",
              (*client)->tenant().c_str(), (*client)->backend_name().c_str());
  return 0;
}
