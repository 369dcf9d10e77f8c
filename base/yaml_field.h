// One value of a YAML config as it is read, and the name its errors give it.
// Every key of kvd's file (daemon/config/), of the master's (master/config/)
// and every command-line flag over one is read through it, so an error has
// one shape wherever the value came from:
//   "<file>:<line>: <key>: <what>"   kvd.yaml:7: instances[1].device: '16' is outside [0, 15]
//   "<flag>: <what>"                 --page-size: '3MiB' is not a power of two
#ifndef NANOKV_BASE_YAML_FIELD_H_
#define NANOKV_BASE_YAML_FIELD_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/human_size.h"
#include "nanokv/status.h"

namespace nanokv {

class YamlField {
 public:
  // `node` of the YAML text `origin` (a file name), read as `key`.
  YamlField(std::string origin, YAML::Node node, std::string key);
  // A value given on the command line as `flag` ("--page-size"): a scalar
  // node, or a sequence of the items of a list flag.
  static YamlField Flag(YAML::Node node, std::string flag);

  const YAML::Node& node() const { return node_; }
  const std::string& key() const { return key_; }
  // Another node from the same place, read as `key`: a list's item, a
  // mapping's entry (key "instances[1].command").
  YamlField At(YAML::Node node, std::string key) const;
  // "<origin>:<line>" of the node, or the flag: where a value was given.
  std::string Where() const;

  // kInvalidArgument "<Where()>: <key>: <what>" ("<flag>: <what>" for a flag).
  Status Bad(const std::string& what) const;

  // The value as text; a list or a mapping is an error.
  Result<std::string> Scalar() const;
  // An integer (decimal, 0x hex, 0 octal) in [lo, hi].
  Result<int64_t> Integer(int64_t lo, int64_t hi) const;
  // true or false.
  Result<bool> Bool() const;
  // One of `words` (the error lists them).
  Result<std::string> OneOf(std::initializer_list<const char*> words) const;
  // Bytes as people write them: "2MiB", "512M", "2097152".
  Result<uint64_t> Bytes() const;
  // Bytes ("40GiB") or a share ("95%"), or a bare fraction ("0.95",
  // kvcached's gpu_utilization); 0 bytes only with `allow_zero`.
  Result<SizeOrShare> SizeOrFraction(bool allow_zero) const;
  // "500ms", "2s", "1.5s", "1m", or a bare 0; within [lo, hi], which `range`
  // says in words ("[10ms, 10m]").
  Result<std::chrono::milliseconds> Duration(std::chrono::milliseconds lo,
                                             std::chrono::milliseconds hi,
                                             const char* range) const;
  // A list, each item read by `read(item)` (item key "<key>[i]") into *out,
  // which it replaces; `example` shows a list in the error for anything else.
  template <typename T, typename Read>
  Status List(std::vector<T>* out, Read read, const char* example = "[0, 1]") const {
    if (!node_.IsSequence()) return Bad(std::string("expected a list like ") + example);
    std::vector<T> items;
    for (size_t i = 0; i < node_.size(); ++i) {
      NANOKV_ASSIGN_OR_RETURN(T item, read(At(node_[i], key_ + "[" + std::to_string(i) + "]")));
      items.push_back(std::move(item));
    }
    *out = std::move(items);
    return Status::OK();
  }

 private:
  YamlField(std::string origin, YAML::Node node, std::string key, bool from_flag);

  std::string origin_;  // the file; for a flag, the flag
  YAML::Node node_;
  std::string key_;
  bool from_flag_;
};

}  // namespace nanokv

#endif  // NANOKV_BASE_YAML_FIELD_H_
