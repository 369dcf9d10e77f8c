#include "daemon/config/group_config.h"

#include <grp.h>
#include <pwd.h>

#include <cctype>

namespace nanokv::kvd {
namespace {

bool ValidGroupName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("_.:@-").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<gid_t> ReadGroupId(const YamlField& field) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, field.Scalar());
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    NANOKV_ASSIGN_OR_RETURN(int64_t gid, field.Integer(0, INT32_MAX));
    return static_cast<gid_t>(gid);
  }
  if (const group* g = getgrnam(text.c_str())) return g->gr_gid;
  return field.Bad("no group named '" + text + "'");
}

Result<uid_t> ReadUserId(const YamlField& field) {
  NANOKV_ASSIGN_OR_RETURN(std::string text, field.Scalar());
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
    NANOKV_ASSIGN_OR_RETURN(int64_t uid, field.Integer(0, INT32_MAX));
    return static_cast<uid_t>(uid);
  }
  if (const passwd* p = getpwnam(text.c_str())) return p->pw_uid;
  return field.Bad("no user named '" + text + "'");
}

Status ParseGroupAccess(const YamlField& field, GroupAccessMap* out) {
  const YAML::Node& node = field.node();
  if (node.IsNull()) return Status::OK();
  if (!node.IsMap()) return field.Bad("expected a mapping like {shared: {uids: [alice], gids: [llm]}}");
  GroupAccessMap groups;
  for (const auto& entry : node) {
    const std::string name = entry.first.as<std::string>();
    const YamlField group = field.At(entry.second, field.key() + "." + name);
    if (!ValidGroupName(name)) return group.Bad("a group name is 1-63 of [A-Za-z0-9_.:@-]");
    if (name.rfind(kUidGroupPrefix, 0) == 0) {
      return group.Bad("'uid:' names are the per-uid groups kvd makes itself; choose another name");
    }
    if (!entry.second.IsMap()) return group.Bad("expected a mapping like {uids: [alice], gids: [llm]}");
    GroupAccess access;
    for (const auto& item : entry.second) {
      const std::string key = item.first.as<std::string>();
      const YamlField value = group.At(item.second, group.key() + "." + key);
      if (key == "uids") {
        NANOKV_RETURN_IF_ERROR(value.List(&access.uids, ReadUserId, "[alice, 1001]"));
      } else if (key == "gids") {
        NANOKV_RETURN_IF_ERROR(value.List(&access.gids, ReadGroupId, "[llm, 1001]"));
      } else {
        return value.Bad("unknown key (uids, gids)");
      }
    }
    groups[name] = std::move(access);
  }
  *out = std::move(groups);
  return Status::OK();
}

}  // namespace nanokv::kvd
