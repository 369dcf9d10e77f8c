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
#include <vector>

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

  // The location kept for `key` (now the most recently used), or null;
  // immutable and shared: a hit copies no vector. A hit is noted as a read
  // (below) at `now_ns`.
  std::shared_ptr<const CachedRead> Find(std::string_view key, uint64_t now_ns);
  // read_ns: not 0 for a read kvd was not told of (a location from its
  // directory), noted as a read at that time.
  void Put(std::string_view key, CachedRead read, uint64_t read_ns = 0);
  void Erase(std::string_view key);
  size_t size() const;
  bool enabled() const { return capacity_ > 0; }

  // Reads served from kept locations tell kvd nothing, so its eviction
  // order would take a hot object for a cold one. The keys found since the
  // last take are handed out `interval_ns` after the first of them, for the
  // store to tell kvd in one request: a read reaches kvd's order that much
  // late, and gets within it ask kvd nothing.
  std::vector<std::string> TakeReadsIfDue(uint64_t now_ns, uint64_t interval_ns);

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CachedRead> location;
    bool read = false;  // found since the last TakeReadsIfDue
  };
  using Entries = std::list<Entry>;
  void DropLocked(Entries::iterator entry);

  const size_t capacity_;
  mutable std::mutex mu_;
  Entries entries_;  // most recent first
  std::unordered_map<std::string, Entries::iterator> index_;
  size_t reads_ = 0;            // entries read
  uint64_t first_read_ns_ = 0;  // when the first of them was
};

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_READ_CACHE_H_
