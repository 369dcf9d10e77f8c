// kvd's run directory and the files in it are kvd's alone: a directory it
// owns that nobody else may write, under parents nobody else may rename it
// in, so nobody can swap kvd's socket for their own, plant a journal, or
// squat its lock (docs/ARCHITECTURE.md, "Security"). Everything kvd reads from
// there is opened without following links and checked to be a plain file
// of kvd's uid that others cannot write.
#ifndef NANOKV_BASE_RUN_DIR_H_
#define NANOKV_BASE_RUN_DIR_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <memory>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nanokv/status.h"

namespace nanokv {

// Makes `dir` (mode 0755: engines of other users must reach the socket, whose
// own mode says who may connect) if it is missing, then checks it: a real
// directory (no symlink), owned by this process's effective uid, writable by
// nobody else, in parents that are root's or ours and that others cannot
// write (sticky ones, like /tmp, aside). kPermissionDenied naming the
// directory, its owner and mode otherwise; the mkdir's error if it fails.
Status PrepareRunDirectory(const std::string& dir);

// The same checks on an existing directory, making nothing.
Status CheckRunDirectory(const std::string& dir);

// `st` describes a file kvd is about to trust: OK iff it is a regular file,
// owned by `uid`, and neither group nor others may write it. Otherwise
// kPermissionDenied: "<what> <path>: <what is wrong, with its owner and mode>".
Status CheckOwnedFile(const struct stat& st, uid_t uid, const std::string& path,
                      const std::string& what);

// Opens `path` read-only without following a symlink (ELOOP: "is a symbolic
// link") and without blocking on a FIFO, then CheckOwnedFile against this
// process's euid. kNotFound when nothing is there.
Result<int> OpenOwnFile(const std::string& path, const std::string& what);

// OpenOwnFile, then the whole file, refused (kInvalidArgument, "<what>
// <path> is N bytes, more than any <what> (max)") when larger than
// `max_bytes`: a file kvd left for its next life, read before it is trusted.
Result<std::vector<std::byte>> ReadOwnFile(const std::string& path, const std::string& what, uint64_t max_bytes);

// A new file of `bytes` at `private_path` (0600, no symlink followed; a
// leftover of a dead process of this pid replaced), mapped shared and
// writable: a journal kvd fills before it renames it into place. On
// failure nothing is left at the path.
Result<void*> CreateMappedFile(const std::string& private_path, uint64_t bytes, const std::string& what);

// "0640"
std::string ModeText(mode_t mode);

// The lock that makes a kvd the only one serving its IPC name from its run
// directory: an flock on <run dir>/<ipc>.lock, held for kvd's whole life and
// released by the kernel when it dies. The file holds the holder's pid.
class RunDirLock {
 public:
  // Creates (0600) or opens the lock file (no symlink, ours) and takes the
  // lock without waiting. kFailedPrecondition naming the holder's pid when
  // another process holds it. REQUIRES: CheckRunDirectory(dir) passed.
  static Result<std::unique_ptr<RunDirLock>> Acquire(const std::string& path);
  // Takes the lock of an existing file (`kvctl cleanup`: no kvd may start or
  // run while it removes that kvd's files). kNotFound when there is no file,
  // kFailedPrecondition when it is held (a kvd runs), kPermissionDenied when
  // we may not open it.
  static Result<std::unique_ptr<RunDirLock>> TryExisting(const std::string& path);

  // Unlinks the file now, while the lock is held (so nobody can take the
  // old file after us). Idempotent.
  Status Unlink();
  // Releases the lock; a lock of Acquire unlinks its file first (if it still
  // names ours), one of TryExisting leaves it unless Unlink was called.
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  RunDirLock(int fd, std::string path, bool owned)
      : fd_(fd), path_(std::move(path)), owned_(owned) {}
  int fd_;
  std::string path_;
  bool owned_;  // made by Acquire: unlinked on release
};

}  // namespace nanokv

#endif  // NANOKV_BASE_RUN_DIR_H_
