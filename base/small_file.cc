#include "base/small_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace nanokv {

Result<SmallFile> ReadSmallFile(const std::string& path, size_t max_bytes, const std::string& what, bool no_follow) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of
  // waiting for a writer; on a regular file it changes nothing.
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (no_follow) flags |= O_NOFOLLOW;
  int fd = open(path.c_str(), flags);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(what + " " + path + " does not exist");
    if (err == ELOOP && no_follow) return Status::PermissionDenied(what + " " + path + " is a symbolic link");
    return Status::FromErrno("open", err, what + " " + path);
  }
  SmallFile file;
  auto fail = [&](Status status) {
    close(fd);
    return status;
  };
  if (fstat(fd, &file.st) != 0) return fail(Status::FromErrno("fstat", errno, what + " " + path));
  if (!S_ISREG(file.st.st_mode)) return fail(Status::PermissionDenied(what + " " + path + ": not a regular file"));
  if (static_cast<uint64_t>(file.st.st_size) > max_bytes) {
    return fail(Status::InvalidArgument(what + " " + path + ": over " + std::to_string(max_bytes) + " bytes"));
  }
  // Read to the end, one byte past the limit at most: the file may grow
  // between fstat and here.
  file.text.resize(static_cast<size_t>(file.st.st_size) + 1);
  size_t got = 0;
  while (got <= max_bytes) {
    if (got == file.text.size()) file.text.resize(std::min(max_bytes + 1, 2 * file.text.size()));
    ssize_t n = read(fd, file.text.data() + got, file.text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Status::FromErrno("read", errno, what + " " + path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got > max_bytes) {
    return Status::InvalidArgument(what + " " + path + ": over " + std::to_string(max_bytes) + " bytes");
  }
  file.text.resize(got);
  return file;
}

Result<std::string> ReadPemFile(const std::string& path, const std::string& what) {
  NANOKV_ASSIGN_OR_RETURN(SmallFile file, ReadSmallFile(path, 1 << 20, what));
  if (file.text.find("-----BEGIN") == std::string::npos) {
    return Status::InvalidArgument(what + ": " + path + " is not a PEM file (no -----BEGIN line)");
  }
  return std::move(file.text);
}

}  // namespace nanokv
