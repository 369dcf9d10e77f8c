#include "kvctl/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace nanokv::kvctl {
namespace {

// Alternate screen on, cursor hidden, screen cleared; and the way back.
constexpr std::string_view kEnterScreen = "\033[?1049h\033[?25l\033[H\033[2J";
constexpr std::string_view kLeaveScreen = "\033[0m\033[?25h\033[?1049l";

// The self-pipe the signal handler writes to: 'q' to quit, 'w' on a resize.
int g_signal_pipe[2] = {-1, -1};
constexpr int kQuitSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_saved_actions[4];  // kQuitSignals, then SIGWINCH
struct sigaction g_saved_tstp;

void OnSignal(int signal) {
  const int saved_errno = errno;  // write(2) may change it under the interrupted code
  char byte = signal == SIGWINCH ? 'w' : 'q';
  ssize_t ignored = write(g_signal_pipe[1], &byte, 1);  // async-signal-safe
  (void)ignored;
  errno = saved_errno;
}

Status WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("write", errno, "terminal");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Terminal>> Terminal::Enter(int in_fd, int out_fd) {
  if (isatty(in_fd) != 1 || isatty(out_fd) != 1) {
    return Status::FailedPrecondition("kvctl top needs a terminal (try `kvctl top --once` or `kvctl watch`)");
  }
  termios saved{};
  if (tcgetattr(in_fd, &saved) != 0) return Status::FromErrno("tcgetattr", errno);
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno("pipe2", errno);
  // From here on the destructor undoes everything.
  std::unique_ptr<Terminal> terminal(new Terminal(in_fd, out_fd, saved));

  struct sigaction action{};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kQuitSignals); ++i) {
    sigaction(kQuitSignals[i], &action, &g_saved_actions[i]);
  }
  sigaction(SIGWINCH, &action, &g_saved_actions[std::size(kQuitSignals)]);
  // Ctrl-Z would stop top with the screen still taken: ignore it while top runs.
  struct sigaction ignore{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGTSTP, &ignore, &g_saved_tstp);

  termios raw = saved;
  // No line buffering and no echo; ISIG stays, so Ctrl-C still raises SIGINT.
  raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  if (tcsetattr(in_fd, TCSANOW, &raw) != 0) return Status::FromErrno("tcsetattr", errno);
  NANOKV_RETURN_IF_ERROR(terminal->Write(kEnterScreen));
  return terminal;
}

Terminal::Terminal(int in_fd, int out_fd, const termios& saved)
    : in_fd_(in_fd), out_fd_(out_fd), saved_(saved) {}

Terminal::~Terminal() { Restore(); }

void Terminal::Restore() {
  if (restored_) return;
  restored_ = true;
  (void)WriteAll(out_fd_, kLeaveScreen);
  tcsetattr(in_fd_, TCSANOW, &saved_);
  for (size_t i = 0; i < std::size(kQuitSignals); ++i) {
    sigaction(kQuitSignals[i], &g_saved_actions[i], nullptr);
  }
  sigaction(SIGWINCH, &g_saved_actions[std::size(kQuitSignals)], nullptr);
  sigaction(SIGTSTP, &g_saved_tstp, nullptr);
  for (int& fd : g_signal_pipe) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

Terminal::Size Terminal::size() const {
  Size size;
  winsize ws{};
  if (ioctl(out_fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
    size.columns = ws.ws_col;
    size.rows = ws.ws_row;
  }
  return size;
}

Status Terminal::Write(std::string_view bytes) { return WriteAll(out_fd_, bytes); }

Result<Terminal::Event> Terminal::Wait(std::chrono::milliseconds timeout) {
  if (!pending_.empty()) {
    char key = pending_.front();
    pending_.erase(0, 1);
    return Event{EventKind::kKey, key};
  }
  pollfd fds[2] = {{g_signal_pipe[0], POLLIN, 0}, {in_fd_, POLLIN, 0}};
  int n = poll(fds, 2, static_cast<int>(timeout.count()));
  if (n < 0 && errno == EINTR) return Event{EventKind::kTimeout};  // the pipe says why next time
  if (n < 0) return Status::FromErrno("poll", errno, "terminal");
  if (n == 0) return Event{EventKind::kTimeout};
  if (fds[0].revents & POLLIN) {
    char bytes[16];
    ssize_t got = read(g_signal_pipe[0], bytes, sizeof(bytes));
    bool resize = false;
    for (ssize_t i = 0; i < got; ++i) {
      if (bytes[i] == 'q') return Event{EventKind::kQuit};
      resize = true;
    }
    if (resize) return Event{EventKind::kResize};
  }
  if (fds[1].revents & (POLLHUP | POLLERR)) return Event{EventKind::kQuit};  // the terminal went away
  if (fds[1].revents & POLLIN) {
    char bytes[64];
    ssize_t got = read(in_fd_, bytes, sizeof(bytes));
    if (got == 0) return Event{EventKind::kQuit};
    if (got < 0) return errno == EINTR || errno == EAGAIN ? Result<Event>(Event{EventKind::kTimeout})
                                                          : Result<Event>(Status::FromErrno("read", errno, "terminal"));
    pending_.append(bytes, static_cast<size_t>(got));
    char key = pending_.front();
    pending_.erase(0, 1);
    return Event{EventKind::kKey, key};
  }
  return Event{EventKind::kTimeout};
}

}  // namespace nanokv::kvctl
