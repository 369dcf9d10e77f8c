// The other process of the conformance suite's cross-process cases. It is a
// fresh exec (not a bare fork) so that CUDA is initialised here from scratch:
// a forked child may not use the parent's CUDA state.
//
//   backend_peer BACKEND SOCKET_FD DEVICE PAGE_BYTES CHECK_SEED WRITE_SEED
//
// Receives one page fd over SOCKET_FD, imports and maps it, checks that it
// holds Pattern(CHECK_SEED), writes Pattern(WRITE_SEED), replies one byte and
// waits for the parent's byte before tearing down. Exit 0 only if all held.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ipc/uds/fd_passing.h"
#include "gpu/backend.h"
#include "tests/unit/gpu/backend_test_util.h"

namespace {

int Fail(const char* step, const nanokv::Status& status) {
  std::fprintf(stderr, "backend_peer: %s: %s\n", step, status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nanokv;
  if (argc != 7) {
    std::fprintf(stderr, "usage: backend_peer BACKEND SOCKET_FD DEVICE PAGE_BYTES CHECK WRITE\n");
    return 2;
  }
  int socket = std::atoi(argv[2]);
  int device = std::atoi(argv[3]);
  size_t page_bytes = std::strtoull(argv[4], nullptr, 10);
  uint32_t check_seed = static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10));
  uint32_t write_seed = static_cast<uint32_t>(std::strtoul(argv[6], nullptr, 10));

  auto backend = gpu::OpenBackend(argv[1]);
  if (!backend.ok()) return Fail("OpenBackend", backend.status());
  gpu::Backend& b = **backend;

  std::byte tag{};
  std::vector<int> fds;
  auto got = ipc::ReceiveWithFds(socket, {&tag, 1}, &fds);
  if (!got.ok()) return Fail("ReceiveWithFds", got.status());
  if (*got != 1 || fds.size() != 1) return Fail("ReceiveWithFds", Status::ProtocolError("no fd"));

  auto page = b.ImportPage(fds[0], device, page_bytes);
  if (!page.ok()) return Fail("ImportPage", page.status());
  auto base = b.ReserveRange(page_bytes, 0);
  if (!base.ok()) return Fail("ReserveRange", base.status());
  Status s = b.Map(*base, page_bytes, *page);
  if (!s.ok()) return Fail("Map", s);
  int devices[] = {device};
  s = b.SetAccess(*base, page_bytes, devices);
  if (!s.ok()) return Fail("SetAccess", s);
  s = gpu::testing::CheckPattern(b, *base, page_bytes, check_seed);
  if (!s.ok()) return Fail("CheckPattern", s);
  s = gpu::testing::WritePattern(b, *base, page_bytes, write_seed);
  if (!s.ok()) return Fail("WritePattern", s);

  std::byte done{1};
  s = ipc::SendWithFds(socket, {&done, 1}, {});
  if (!s.ok()) return Fail("SendWithFds", s);
  std::vector<int> none;
  auto bye = ipc::ReceiveWithFds(socket, {&tag, 1}, &none);  // parent has read
  if (!bye.ok()) return Fail("ReceiveWithFds(bye)", bye.status());

  if (!(s = b.Unmap(*base, page_bytes)).ok()) return Fail("Unmap", s);
  if (!(s = b.ReleasePage(*page)).ok()) return Fail("ReleasePage", s);
  if (!(s = b.FreeRange(*base, page_bytes)).ok()) return Fail("FreeRange", s);
  return 0;
}
