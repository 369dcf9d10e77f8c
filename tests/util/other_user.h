// Tests that need a second uid: `nobody` (65534) where that is enough, or a
// user of their own made with useradd and removed again (a squatter that
// owns files). Both need root; without it the test skips, saying so.
#ifndef NANOKV_TESTS_UTIL_OTHER_USER_H_
#define NANOKV_TESTS_UTIL_OTHER_USER_H_

#include <grp.h>
#include <pwd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

#include <gtest/gtest.h>

namespace nanokv::testing {

inline constexpr uid_t kNobody = 65534;

// Skips the test unless we are root.
#define NANOKV_SKIP_UNLESS_ROOT()                                                   \
  do {                                                                              \
    if (geteuid() != 0) GTEST_SKIP() << "needs root, to act as another user";       \
  } while (0)

// A user made for one test ("nkvt<pid>"), removed with its group at the end.
class ScopedUser {
 public:
  // `suffix` tells apart two users of one test ("nkvt<pid>a", "nkvt<pid>b").
  explicit ScopedUser(const std::string& suffix = "") {
    name_ = "nkvt" + std::to_string(getpid()) + suffix;
    if (geteuid() != 0 || std::system("command -v useradd >/dev/null 2>&1") != 0) return;
    std::string command = "useradd --system --no-create-home --shell /usr/sbin/nologin --user-group " +
                          name_ + " >/dev/null 2>&1";
    if (std::system(command.c_str()) != 0) return;
    if (const passwd* p = getpwnam(name_.c_str())) {
      uid_ = p->pw_uid;
      gid_ = p->pw_gid;
      made_ = true;
    }
  }
  ~ScopedUser() {
    if (!made_) return;
    int ignored = std::system(("userdel " + name_ + " >/dev/null 2>&1").c_str());
    (void)ignored;
  }
  ScopedUser(const ScopedUser&) = delete;
  ScopedUser& operator=(const ScopedUser&) = delete;

  bool made() const { return made_; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool made_ = false;
};

// A process running as uid/gid until this is destroyed (a squatter that names
// itself in a file it owns). pid() is -1 if it could not be started.
class LiveProcessAs {
 public:
  LiveProcessAs(uid_t uid, gid_t gid) {
    int ready[2], quit[2];
    if (pipe(ready) != 0) return;
    if (pipe(quit) != 0) {
      close(ready[0]);
      close(ready[1]);
      return;
    }
    pid_t child = fork();
    if (child == 0) {
      close(ready[0]);
      close(quit[1]);
      if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(125);
      char byte = 1;
      if (write(ready[1], &byte, 1) != 1) _exit(126);
      ssize_t ended = read(quit[0], &byte, 1);  // until the parent closes its end
      _exit(ended == 0 ? 0 : 1);
    }
    close(ready[1]);
    close(quit[0]);
    quit_ = quit[1];
    char byte = 0;
    const bool started = child > 0 && read(ready[0], &byte, 1) == 1;
    close(ready[0]);
    child_ = child;
    if (started) pid_ = child;
  }
  ~LiveProcessAs() {
    if (quit_ >= 0) close(quit_);
    if (child_ > 0) waitpid(child_, nullptr, 0);
  }
  LiveProcessAs(const LiveProcessAs&) = delete;
  LiveProcessAs& operator=(const LiveProcessAs&) = delete;

  pid_t pid() const { return pid_; }

 private:
  pid_t child_ = -1;
  pid_t pid_ = -1;  // once it runs as the uid
  int quit_ = -1;
};

// Runs `body` in a forked child as uid/gid and returns its exit code (the
// child's EXPECTs do not reach the parent: report through the exit code).
inline int RunAs(uid_t uid, gid_t gid, const std::function<int()>& body) {
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(125);
    _exit(body());
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_UTIL_OTHER_USER_H_
