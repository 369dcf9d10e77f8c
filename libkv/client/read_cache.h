// The locations of objects this store read, kept to read them again with
// no request to kvd (ARCHITECTURE.md, "Reads without a lease"): a copy
// from a kept location stands only if kvd's read table still names its
// epoch after the copy, else the get asks kvd again. Least recently used
// entries go first past `capacity`.
//
// Threads: any; one mutex.
#ifndef NANOKV_LIBKV_CLIENT_READ_CACHE_H_
#define NANOKV_LIBKV_CLIENT_READ_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "libkv/client/object_transfer.h"

namespace nanokv::client {

// What a read checks its copy against: kvd's device and the plan's read
// entry and epoch (ReadTableView::Holds).
struct ReadCheck {
  int kvd_device = 0;
  uint32_t read_entry = 0;
  uint32_t epoch = 0;
};

struct CachedRead {
  ObjectPieces pieces;
  ReadCheck check;
};

class ReadCache {
 public:
  explicit ReadCache(size_t capacity) : capacity_(capacity) {}

  // The entry for `key` (now the most recently used), or null. Entries are
  // immutable and shared: a hit copies no vector.
  std::shared_ptr<const CachedRead> Find(std::string_view key);
  void Put(std::string_view key, CachedRead read);
  void Erase(std::string_view key);
  size_t size() const;

 private:
  using Entries = std::list<std::pair<std::string, std::shared_ptr<const CachedRead>>>;

  const size_t capacity_;
  mutable std::mutex mu_;
  Entries entries_;  // most recent first
  std::unordered_map<std::string, Entries::iterator> index_;
};

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_READ_CACHE_H_
