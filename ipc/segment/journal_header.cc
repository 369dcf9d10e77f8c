#include "ipc/segment/journal_header.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace nanokv::ipc {

Result<JournalStamp> ReadJournalStamp(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP) return Status::PermissionDenied("journal " + path + " is a symbolic link");
    return Status::FromErrno("open", errno, "journal " + path);
  }
  JournalHeader header{};
  struct stat st{};
  const bool read_whole = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                          pread(fd, &header, sizeof(header), 0) == static_cast<ssize_t>(sizeof(header));
  close(fd);
  if (!read_whole || header.magic != kJournalMagic ||
      (header.version != kJournalVersion && header.version != kJournalVersion - 1)) {  // 2's header is 3's
    return Status::InvalidArgument(path + " is not a page journal of version " +
                                   std::to_string(kJournalVersion));
  }
  JournalStamp stamp;
  stamp.recovery_window_ms = header.recovery_window_ms;
  stamp.stopped_unix_ns = header.stopped_unix_ns;
  stamp.modified_unix_ns =
      static_cast<uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(st.st_mtim.tv_nsec);
  return stamp;
}

}  // namespace nanokv::ipc
