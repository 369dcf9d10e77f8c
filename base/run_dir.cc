#include "base/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/kvd_identity.h"

namespace nanokv {
namespace {

bool OthersMayWrite(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

std::string Describe(const struct stat& st) {
  return "owner " + DescribeUid(st.st_uid) + ", mode " + ModeText(st.st_mode);
}

// Every directory from `dir`'s parent up to "/" (symlinks resolved) must be
// root's or ours, and others may write it only if it is sticky (they cannot
// then rename or remove what is ours in it).
Status CheckParents(const std::string& dir) {
  const size_t slash = dir.find_last_of('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  char real[PATH_MAX];
  if (realpath(parent.c_str(), real) == nullptr) {
    return Status::FromErrno("realpath", errno, "the parent of run directory " + dir);
  }
  std::string path = real;
  for (;;) {
    struct stat st{};
    if (stat(path.c_str(), &st) != 0) return Status::FromErrno("stat", errno, path);
    const bool owner_ok = st.st_uid == 0 || st.st_uid == geteuid();
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if (!owner_ok || (OthersMayWrite(st.st_mode) && !sticky)) {
      return Status::PermissionDenied(
          "run directory " + dir + " lies in " + path + " (" + Describe(st) + "), which " +
          (owner_ok ? "others may write" : "another user owns") +
          ": they could replace the run directory; choose a run_dir whose parents are root's or "
          "kvd's own");
    }
    if (path == "/") return Status::OK();
    const size_t cut = path.find_last_of('/');
    path = cut == 0 ? "/" : path.substr(0, cut);
  }
}

}  // namespace

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

Status CheckRunDirectory(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("run directory is empty");
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0) return Status::FromErrno("lstat", errno, "run directory " + dir);
  if (S_ISLNK(st.st_mode)) {
    return Status::PermissionDenied("run directory " + dir + " is a symbolic link (" +
                                    Describe(st) + "): kvd uses only a real directory of its own");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::PermissionDenied("run directory " + dir + " is not a directory (" +
                                    Describe(st) + ")");
  }
  if (st.st_uid != geteuid()) {
    return Status::PermissionDenied("run directory " + dir + " belongs to " + DescribeUid(st.st_uid) +
                                    " (mode " + ModeText(st.st_mode) + "), not to kvd's " +
                                    DescribeUid(geteuid()) +
                                    ": whoever owns it could replace kvd's socket; remove it or "
                                    "set run_dir");
  }
  if (OthersMayWrite(st.st_mode)) {
    return Status::PermissionDenied("run directory " + dir + " has mode " + ModeText(st.st_mode) +
                                    " (owner " + DescribeUid(st.st_uid) +
                                    "): others may write it and replace kvd's socket; "
                                    "chmod go-w it, or remove it and let kvd make it");
  }
  return CheckParents(dir);
}

Status PrepareRunDirectory(const std::string& dir) {
  if (!dir.empty() && mkdir(dir.c_str(), 0755) == 0) {
    // mkdir applies the umask; engines of other users must reach the socket.
    if (chmod(dir.c_str(), 0755) != 0) return Status::FromErrno("chmod", errno, dir);
  } else if (!dir.empty() && errno != EEXIST) {
    return Status::FromErrno("mkdir", errno, "run directory " + dir);
  }
  return CheckRunDirectory(dir);
}

Status CheckOwnedFile(const struct stat& st, uid_t uid, const std::string& path,
                      const std::string& what) {
  std::string wrong;
  if (!S_ISREG(st.st_mode)) {
    wrong = "is not a regular file";
  } else if (st.st_uid != uid) {
    wrong = "belongs to " + DescribeUid(st.st_uid) + ", not to " + DescribeUid(uid);
  } else if (OthersMayWrite(st.st_mode)) {
    wrong = "may be written by others";
  } else {
    return Status::OK();
  }
  return Status::PermissionDenied(what + " " + path + " " + wrong + " (" + Describe(st) + ")");
}

Result<int> OpenOwnFile(const std::string& path, const std::string& what) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP) {
      struct stat st{};
      std::string owner = lstat(path.c_str(), &st) == 0 ? " (" + Describe(st) + ")" : "";
      return Status::PermissionDenied(what + " " + path + " is a symbolic link" + owner);
    }
    return Status::FromErrno("open", error, what + " " + path);
  }
  struct stat st{};
  Status checked = fstat(fd, &st) == 0 ? CheckOwnedFile(st, geteuid(), path, what)
                                       : Status::FromErrno("fstat", errno, path);
  if (!checked.ok()) {
    close(fd);
    return checked;
  }
  return fd;
}

Result<std::vector<std::byte>> ReadOwnFile(const std::string& path, const std::string& what, uint64_t max_bytes) {
  NANOKV_ASSIGN_OR_RETURN(int fd, OpenOwnFile(path, what));
  struct stat st{};
  Status fault;
  std::vector<std::byte> bytes;
  if (fstat(fd, &st) != 0) {
    fault = Status::FromErrno("fstat", errno, path);
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    fault = Status::InvalidArgument(what + " " + path + " is " + std::to_string(st.st_size) + " bytes, more than any " +
                                    what + " (" + std::to_string(max_bytes) + ")");
  } else {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    bytes.resize(done);
  }
  close(fd);
  if (!fault.ok()) return fault;
  return bytes;
}

Result<void*> CreateMappedFile(const std::string& private_path, uint64_t bytes, const std::string& what) {
  unlink(private_path.c_str());  // a dead process's of the same pid: ours to replace
  int fd = open(private_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open", errno, "creating the " + what + " " + private_path);
  void* base = MAP_FAILED;
  Status failed;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    failed = Status::FromErrno("ftruncate", errno, private_path);
  } else {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) failed = Status::FromErrno("mmap", errno, private_path);
  }
  close(fd);  // the mapping keeps the file
  if (!failed.ok()) {
    unlink(private_path.c_str());
    return failed;
  }
  return base;
}

namespace {

// Whether `path` still names the file open as `fd`: a lock taken on a file
// that was unlinked meanwhile (its holder stopped) locks nothing.
bool StillNamed(int fd, const std::string& path) {
  struct stat open_st{};
  struct stat named{};
  return fstat(fd, &open_st) == 0 && lstat(path.c_str(), &named) == 0 &&
         open_st.st_dev == named.st_dev && open_st.st_ino == named.st_ino;
}

std::string HolderOf(int fd) {
  char text[32] = {};
  ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  int pid = n > 0 ? std::atoi(text) : 0;
  return pid > 0 ? " (pid " + std::to_string(pid) + ")" : "";
}

// Takes the flock of `path` opened with `flags`, waiting up to `wait` for a
// holder that is only passing through (a cleanup), and retrying when the
// file was replaced under us.
Result<int> Lock(const std::string& path, int flags, bool check_owner,
                 std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    int fd = open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == ELOOP) return Status::PermissionDenied("lock file " + path + " is a symbolic link");
      return Status::FromErrno("open", errno, "lock file " + path);
    }
    struct stat st{};
    if (check_owner) {
      Status owned = fstat(fd, &st) == 0 ? CheckOwnedFile(st, geteuid(), path, "lock file")
                                         : Status::FromErrno("fstat", errno, path);
      if (!owned.ok()) {
        close(fd);
        return owned;
      }
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (StillNamed(fd, path)) return fd;
      close(fd);  // replaced meanwhile: lock the new one
      continue;
    }
    const int error = errno;
    if (error != EWOULDBLOCK && error != EINTR) {
      close(fd);
      return Status::FromErrno("flock", error, path);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string holder = HolderOf(fd);
      close(fd);
      return Status::FailedPrecondition("a kvd" + holder + " holds " + path);
    }
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

Result<std::unique_ptr<RunDirLock>> RunDirLock::Acquire(const std::string& path) {
  NANOKV_ASSIGN_OR_RETURN(int fd, Lock(path, O_RDWR | O_CREAT, /*check_owner=*/true,
                                    std::chrono::seconds(1)));
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    Status failed = Status::FromErrno("write", errno, path);
    close(fd);
    return failed;
  }
  return std::unique_ptr<RunDirLock>(new RunDirLock(fd, path, /*owned=*/true));
}

Result<std::unique_ptr<RunDirLock>> RunDirLock::TryExisting(const std::string& path) {
  NANOKV_ASSIGN_OR_RETURN(int fd, Lock(path, O_RDONLY | O_NONBLOCK, /*check_owner=*/false,
                                    std::chrono::milliseconds(0)));
  return std::unique_ptr<RunDirLock>(new RunDirLock(fd, path, /*owned=*/false));
}

Status RunDirLock::Unlink() {
  if (!StillNamed(fd_, path_)) return Status::OK();
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("unlink", errno, path_);
  return Status::OK();
}

RunDirLock::~RunDirLock() {
  // Unlinked while held, so nobody can lock the old file after we let go.
  if (owned_) (void)Unlink();
  close(fd_);
}

}  // namespace nanokv
