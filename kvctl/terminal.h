// The terminal for `kvctl top`, with nothing but termios and ANSI escapes (no
// curses: one less dependency, and the same bytes work in a plain terminal,
// over ssh and in tmux). Entering takes the alternate screen, hides the
// cursor and turns off line buffering and echo; leaving, or destroying the
// object, puts all of it back. Signals that end kvctl (SIGINT, SIGTERM,
// SIGHUP) are caught while a Terminal lives, so top leaves through the same
// door and the shell gets its screen back.
#ifndef NANOKV_KVCTL_TERMINAL_H_
#define NANOKV_KVCTL_TERMINAL_H_

#include <termios.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "nanokv/status.h"

namespace nanokv::kvctl {

class Terminal {
 public:
  // kFailedPrecondition if `in_fd` or `out_fd` is not a terminal. At most one
  // Terminal exists at a time (the signal handlers are process-wide).
  static Result<std::unique_ptr<Terminal>> Enter(int in_fd, int out_fd);
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  struct Size {
    int columns = 80;
    int rows = 24;
  };
  Size size() const;

  // Writes all of `bytes` to the terminal.
  Status Write(std::string_view bytes);

  enum class EventKind { kKey, kTimeout, kResize, kQuit };
  struct Event {
    EventKind kind;
    char key = 0;
  };
  // Waits up to `timeout` for a key, a resize or a quit signal.
  Result<Event> Wait(std::chrono::milliseconds timeout);

 private:
  Terminal(int in_fd, int out_fd, const termios& saved);
  void Restore();

  int in_fd_;
  int out_fd_;
  termios saved_;
  bool restored_ = false;
  std::string pending_;  // keys read but not yet returned (typed faster than a frame)
};

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_TERMINAL_H_
