#include "base/kvd_identity.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string_view>

namespace nanokv {
namespace {

// getpwnam_r/getgrgid_r with a buffer that grows: large directories (LDAP)
// need more than sysconf's hint.
template <typename Entry, typename Lookup>
bool LookUp(Lookup lookup, Entry* entry, std::string* buffer) {
  buffer->resize(1024);
  for (int i = 0; i < 8; ++i) {
    Entry* found = nullptr;
    int error = lookup(entry, buffer->data(), buffer->size(), &found);
    if (error == ERANGE) {
      buffer->resize(buffer->size() * 4);
      continue;
    }
    return error == 0 && found != nullptr;
  }
  return false;
}

Result<uid_t> ParseUid(std::string_view text) {
  uid_t uid = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), uid);
  if (error == std::errc() && end == text.data() + text.size()) return uid;
  passwd entry{};
  std::string buffer;
  const std::string name(text);
  auto lookup = [&](passwd* e, char* b, size_t n, passwd** out) {
    return getpwnam_r(name.c_str(), e, b, n, out);
  };
  if (!text.empty() && LookUp(lookup, &entry, &buffer)) return entry.pw_uid;
  return Status::InvalidArgument(std::string(kKvdUidVariable) + ": '" + name.substr(0, 64) +
                                 "' is neither a uid nor a user of this machine");
}

}  // namespace

Result<std::vector<uid_t>> TrustedKvdUids() {
  std::vector<uid_t> uids = {0};
  if (geteuid() != 0) uids.push_back(geteuid());
  const char* value = std::getenv(kKvdUidVariable);
  std::string_view rest = value != nullptr ? value : "";
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    NANOKV_ASSIGN_OR_RETURN(uid_t uid, ParseUid(item));
    if (std::find(uids.begin(), uids.end(), uid) == uids.end()) uids.push_back(uid);
  }
  return uids;
}

bool IsTrustedKvdUid(uid_t uid) {
  if (uid == 0 || uid == geteuid()) return true;
  auto uids = TrustedKvdUids();
  return uids.ok() && std::find(uids->begin(), uids->end(), uid) != uids->end();
}

std::string TrustedKvdUidsText() {
  auto uids = TrustedKvdUids();
  std::string text = "root";
  if (uids.ok()) {
    for (uid_t uid : *uids) {
      if (uid != 0) text += ", " + DescribeUid(uid);
    }
  }
  const char* value = std::getenv(kKvdUidVariable);
  if (value == nullptr || *value == '\0') text += " or a uid named in " + std::string(kKvdUidVariable);
  return text;
}

std::string DescribeUid(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  passwd entry{};
  std::string buffer;
  auto lookup = [&](passwd* e, char* b, size_t n, passwd** out) { return getpwuid_r(uid, e, b, n, out); };
  if (LookUp(lookup, &entry, &buffer) && entry.pw_name != nullptr) {
    text += " (" + std::string(entry.pw_name) + ")";
  }
  return text;
}

std::string DescribeGid(gid_t gid) {
  std::string text = "gid " + std::to_string(gid);
  group entry{};
  std::string buffer;
  auto lookup = [&](group* e, char* b, size_t n, group** out) { return getgrgid_r(gid, e, b, n, out); };
  if (LookUp(lookup, &entry, &buffer) && entry.gr_name != nullptr) {
    text += " (" + std::string(entry.gr_name) + ")";
  }
  return text;
}

}  // namespace nanokv
