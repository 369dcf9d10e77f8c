#include "ipc/master/token.h"

#include <cstdio>

#include "base/small_file.h"

#include "ipc/master/master_protocol.h"

namespace nanokv::master {

Result<std::string> ReadTokenFile(const std::string& path) {
  // A few bytes of slack for the trailing newline and spaces stripped below.
  NANOKV_ASSIGN_OR_RETURN(SmallFile file, ReadSmallFile(path, kMaxTokenBytes + 64, "token file", /*no_follow=*/true));
  if ((file.st.st_mode & 0007) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(file.st.st_mode & 07777));
    return Status::PermissionDenied("token file " + path + ": mode " + mode +
                                    " lets other users read or write it (chmod o-rwx)");
  }
  std::string& text = file.text;
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
