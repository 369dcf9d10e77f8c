#include "daemon/node/page_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>

#include <spdlog/spdlog.h>

#include "ipc/uds/fd_passing.h"

extern char** environ;

namespace nanokv::kvd {
namespace {

// One datagram each way; a page's carries its fd.
struct Message {
  uint32_t kind;
  int32_t device;
  uint32_t id;
  uint32_t generation;
};
enum Kind : uint32_t { kKeep = 1, kBye = 2, kTake = 3, kPage = 4, kEnd = 5, kKeepHost = 6, kHostPage = 7 };

constexpr int kTakeTimeoutMs = 5000;  // a next kvd that connects but stalls

Status Send(int socket, const Message& message, int fd) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(&message), sizeof(message));
  if (fd < 0) return ipc::SendWithFds(socket, bytes, {});
  return ipc::SendWithFds(socket, bytes, std::span<const int>(&fd, 1));
}

// A message and its fd (-1 if none); kind 0 when the peer closed.
Result<Message> Receive(int socket, int* fd) {
  Message message{};
  std::vector<int> fds;
  NANOKV_ASSIGN_OR_RETURN(size_t n, ipc::ReceiveWithFds(socket, {reinterpret_cast<std::byte*>(&message),
                                                                 sizeof(message)}, &fds, 1));
  *fd = fds.empty() ? -1 : fds[0];
  if (n == 0) return Message{};
  if (n != sizeof(message)) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
    return Status::ProtocolError("page keeper: a message of " + std::to_string(n) + " bytes");
  }
  return message;
}

sockaddr_un AddressOf(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  return address;
}

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

int64_t NowMs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1'000'000;
}

// The keeper's life (PageKeeperMain): hold what kvd sends until it says bye
// or goes; then hand everything to the first next kvd of our uid.
int RunKeeper(int pair, int listener, uint32_t wait_ms) {
  std::vector<KeptPage> kept;
  for (;;) {
    int fd = -1;
    auto message = Receive(pair, &fd);
    if (!message.ok() || message->kind == 0) break;  // kvd is gone
    if (message->kind == kBye) return 0;  // exiting closes every fd: the pages go
    if ((message->kind == kKeep || message->kind == kKeepHost) && fd >= 0) {
      kept.push_back({message->device, message->id, message->generation, fd, message->kind == kKeepHost});
    } else if (fd >= 0) {
      close(fd);
    }
  }
  close(pair);
  if (kept.empty()) return 0;
  const int64_t give_up = NowMs() + wait_ms;
  for (int64_t left = wait_ms; left > 0; left = give_up - NowMs()) {
    if (!Readable(listener, static_cast<int>(left))) continue;
    int peer = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer < 0) continue;
    ucred cred{};
    socklen_t length = sizeof(cred);
    int fd = -1;
    const bool ours = getsockopt(peer, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0 && cred.uid == getuid();
    auto asked = ours && Readable(peer, kTakeTimeoutMs) ? Receive(peer, &fd) : Result<Message>(Message{});
    if (fd >= 0) close(fd);
    if (!asked.ok() || asked->kind != kTake) {
      close(peer);
      continue;
    }
    bool sent = true;
    for (const KeptPage& page : kept) {
      const uint32_t kind = page.host ? kHostPage : kPage;
      sent = sent && Send(peer, Message{kind, page.device, page.id, page.generation}, page.fd).ok();
    }
    sent = sent && Send(peer, Message{kEnd, 0, 0, 0}, -1).ok();
    if (sent) {
      // Until the next kvd hangs up: its fds may still be in flight.
      (void)Readable(peer, kTakeTimeoutMs);
      return 0;
    }
    close(peer);
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<PageKeeper>> PageKeeper::Start(const std::string& exe, const std::string& path,
                                                      uint32_t wait_ms) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return Status::InvalidArgument("page keeper: socket path " + path + " is too long");
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return Status::FromErrno("socketpair", errno, "the page keeper");
  }
  int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un address = AddressOf(path);
  unlink(path.c_str());  // a dead keeper's, in kvd's own directory
  auto fail = [&](const char* call) {
    Status status = Status::FromErrno(call, errno, "the page keeper at " + path);
    close(pair[0]);
    close(pair[1]);
    if (listener >= 0) close(listener);
    return status;
  };
  if (listener < 0) return fail("socket");
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return fail("bind");
  chmod(path.c_str(), 0600);
  if (listen(listener, 4) != 0) return fail("listen");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pair[1], 3);  // dup2 clears close-on-exec
  posix_spawn_file_actions_adddup2(&actions, listener, 4);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  const std::string wait = std::to_string(wait_ms);
  std::vector<char*> argv = {const_cast<char*>("kvd"), const_cast<char*>("--role"),
                             const_cast<char*>("page-keeper"), const_cast<char*>("--wait-ms"),
                             const_cast<char*>(wait.c_str()), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(pair[1]);
  close(listener);
  if (spawned != 0) {
    close(pair[0]);
    unlink(path.c_str());
    return Status::FromErrno("posix_spawn", spawned, "the page keeper " + exe);
  }
  spdlog::info("kvd: page keeper {} holds the object store's pages over a kvd crash ({} ms for the next kvd)",
               pid, wait_ms);
  return std::unique_ptr<PageKeeper>(new PageKeeper(pid, pair[0], path));
}

PageKeeper::~PageKeeper() {
  if (pair_ >= 0) close(pair_);
}

Status PageKeeper::Keep(int device, PageId id, uint32_t generation, int fd) {
  if (pair_ < 0) return Status::FailedPrecondition("page keeper: stopped");
  return Send(pair_, Message{kKeep, device, id, generation}, fd);
}

Status PageKeeper::KeepHost(int device, PageId id, int fd) {
  if (pair_ < 0) return Status::FailedPrecondition("page keeper: stopped");
  return Send(pair_, Message{kKeepHost, device, id, 0}, fd);
}

void PageKeeper::Stop() {
  if (pair_ < 0) return;
  (void)Send(pair_, Message{kBye, 0, 0, 0}, -1);
  close(pair_);
  pair_ = -1;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
  unlink(path_.c_str());
}

std::vector<KeptPage> PageKeeper::TakeOver(const std::string& path) {
  std::vector<KeptPage> pages;
  struct stat st{};
  if (path.size() >= sizeof(sockaddr_un::sun_path) || lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
      st.st_uid != getuid()) {
    return pages;
  }
  int socket_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (socket_fd < 0) return pages;
  sockaddr_un address = AddressOf(path);
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (connect(socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0 || cred.uid != getuid() ||
      !Send(socket_fd, Message{kTake, 0, 0, 0}, -1).ok()) {
    close(socket_fd);
    return pages;  // none there (it gave up: connection refused), or not ours
  }
  bool ended = false;
  while (Readable(socket_fd, kTakeTimeoutMs)) {
    int fd = -1;
    auto message = Receive(socket_fd, &fd);
    if (!message.ok() || message->kind == 0) break;
    if (message->kind == kEnd) {
      if (fd >= 0) close(fd);
      ended = true;
      break;
    }
    if ((message->kind != kPage && message->kind != kHostPage) || fd < 0) {
      if (fd >= 0) close(fd);
      continue;
    }
    pages.push_back({message->device, message->id, message->generation, fd, message->kind == kHostPage});
  }
  close(socket_fd);
  if (!ended) spdlog::warn("kvd: the page keeper at {} stopped before handing every page back", path);
  return pages;
}

int PageKeeperMain(int argc, char** argv) {
  uint32_t wait_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--wait-ms") != 0) return 2;
    char* end = nullptr;
    const unsigned long value = std::strtoul(argv[i + 1], &end, 10);
    if (end == argv[i + 1] || *end != '\0' || value > 24ul * 3600 * 1000) return 2;
    wait_ms = static_cast<uint32_t>(value);
  }
  struct stat pair{}, listener{};
  if (fstat(3, &pair) != 0 || !S_ISSOCK(pair.st_mode) || fstat(4, &listener) != 0 || !S_ISSOCK(listener.st_mode)) {
    return 2;  // not started by kvd
  }
  signal(SIGPIPE, SIG_IGN);
  fcntl(3, F_SETFD, FD_CLOEXEC);
  fcntl(4, F_SETFD, FD_CLOEXEC);
  return RunKeeper(3, 4, wait_ms);
}

}  // namespace nanokv::kvd
