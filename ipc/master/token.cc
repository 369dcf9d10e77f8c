#include "ipc/master/token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "ipc/master/master_protocol.h"

namespace nanokv::master {

Result<std::string> ReadTokenFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::FromErrno("open", errno, "token file " + path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::FromErrno("fstat", err, "token file " + path);
  }
  auto refuse = [&](const std::string& why) {
    close(fd);
    return Status::PermissionDenied("token file " + path + ": " + why);
  };
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file");
  if ((st.st_mode & 0007) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return refuse(std::string("mode ") + mode + " lets other users read or write it (chmod o-rwx)");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxTokenBytes + 64) {
    return refuse("over " + std::to_string(kMaxTokenBytes) + " bytes");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  ssize_t got = read(fd, text.data(), text.size());
  close(fd);
  if (got < 0) return Status::FromErrno("read", errno, "token file " + path);
  text.resize(static_cast<size_t>(got));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.pop_back();
  }
  if (text.empty()) return Status::InvalidArgument("token file " + path + " is empty");
  if (text.size() > kMaxTokenBytes) {
    return Status::InvalidArgument("token file " + path + ": the token is over " +
                                   std::to_string(kMaxTokenBytes) + " bytes");
  }
  for (char c : text) {
    if (c < 0x21 || c > 0x7e) {
      return Status::InvalidArgument("token file " + path +
                                     ": the token is not printable ASCII without spaces");
    }
  }
  return text;
}

bool TokensEqual(std::string_view given, std::string_view expected) {
  // Every byte of the longer is looked at, whatever matched before.
  size_t n = given.size() > expected.size() ? given.size() : expected.size();
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff |= static_cast<unsigned char>(a ^ b);
  }
  // Keep the compiler from ending the loop early on the first difference.
  volatile unsigned char result = diff;
  return result == 0;
}

}  // namespace nanokv::master
