// libFuzzer target: bytes -> what a hostile client does to its end of a
// request ring's doorbell (ipc/ring/doorbell.h), between kvd's Drains:
// bells, datagrams of any length (empty ones too), fds sent along,
// O_NONBLOCK cleared and set, reads, buffer sizes, its end duplicated and
// closed. Whatever it does, kvd's Drain never blocks (a blocked Drain is a
// libFuzzer timeout), says "rang" exactly when a datagram came since the
// last one, takes at most its batch, and keeps no fd a client sent; and the
// client never reads a bell (which would take kvd's wake-up).
// Input: one byte per action: the action is the byte mod 9, its argument
// the byte / 9.
#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ring/doorbell.h"

namespace {

using nanokv::ipc::Doorbell;
using nanokv::ipc::kDoorbellDrainBatch;

void Fail(const char* what) {
  std::fprintf(stderr, "fuzz_ring_doorbell: %s\n", what);
  std::abort();
}

bool NonBlocking(int fd) { return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }

// Sends the write end of a fresh pipe along with a bell; true if sent.
// `*read_end` is left to tell whether anyone still holds the write end.
bool SendPipeEnd(int end, int* read_end) {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  char byte = 1;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &ends[1], sizeof(int));
  const bool sent = sendmsg(end, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == 1;
  close(ends[1]);
  if (!sent) {
    close(ends[0]);
    return false;
  }
  *read_end = ends[0];
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int client_end = -1;
  auto made = Doorbell::Create(&client_end);
  if (!made.ok()) return 0;  // out of fds: nothing to fuzz
  Doorbell bell = std::move(*made);
  std::vector<int> ends = {client_end};
  std::vector<int> passed;  // read ends of pipes whose write end went along
  size_t pending = 0;       // datagrams queued at kvd's end
  auto drain = [&] {
    if (bell.Drain() != (pending > 0)) Fail("Drain's 'rang' disagrees with what was sent");
    pending -= std::min(pending, kDoorbellDrainBatch);
    if (pending > 0) return;
    for (int read_end : passed) {  // every write end sent along is closed now
      char byte;
      if (read(read_end, &byte, 1) != 0) Fail("an fd sent along a bell is still open");
      close(read_end);
    }
    passed.clear();
  };
  const std::vector<char> bytes(64, 'b');
  for (size_t i = 0; i < size; ++i) {
    const uint8_t action = data[i] % 9;
    const uint8_t arg = data[i] / 9;  // 0..28
    const int end = ends.empty() ? -1 : ends[arg % ends.size()];
    switch (action) {
      case 0:    // a bell, as libkv rings; never blocking here
      case 1: {  // a datagram of any length, empty ones too
        if (end < 0 || !NonBlocking(end)) break;
        const size_t count = action == 0 ? 8 : arg * 2;
        if (write(end, bytes.data(), count) >= 0) ++pending;
        break;
      }
      case 2: {  // O_NONBLOCK cleared or set on the client's open file
        if (end < 0) break;
        const int flags = fcntl(end, F_GETFL);
        fcntl(end, F_SETFL, (arg & 1) != 0 ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
        break;
      }
      case 3: {  // a read at the client's end: nothing is ever sent to it
        if (end < 0) break;
        char byte;
        if (recv(end, &byte, 1, MSG_DONTWAIT) >= 0) Fail("the client's end read something");
        break;
      }
      case 4: {  // its buffers resized (bounded by the kernel's limits)
        if (end < 0) break;
        const int bytes_wanted = 1024 << (arg % 10);
        setsockopt(end, SOL_SOCKET, (arg & 1) != 0 ? SO_SNDBUF : SO_RCVBUF, &bytes_wanted,
                   sizeof(bytes_wanted));
        break;
      }
      case 5:  // a second writer
        if (end >= 0 && ends.size() < 4) {
          const int copy = fcntl(end, F_DUPFD_CLOEXEC, 0);
          if (copy >= 0) ends.push_back(copy);
        }
        break;
      case 6:  // a writer closed
        if (end >= 0) {
          close(end);
          ends.erase(ends.begin() + static_cast<std::ptrdiff_t>(arg % ends.size()));
        }
        break;
      case 7: {  // an fd sent along with a bell
        int read_end = -1;
        if (end >= 0 && passed.size() < 8 && SendPipeEnd(end, &read_end)) {
          passed.push_back(read_end);
          ++pending;
        }
        break;
      }
      default:
        drain();
        break;
    }
  }
  for (int end : ends) close(end);
  do {
    drain();
  } while (pending > 0);
  if (bell.Drain()) Fail("rang with nothing sent");
  return 0;
}
