#include "libkv/client/read_cache.h"

#include <iterator>

namespace nanokv::client {

std::shared_ptr<const CachedRead> ReadCache::Find(std::string_view key, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(key));
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  Entry& entry = *it->second;
  if (!entry.read) {
    entry.read = true;
    if (reads_++ == 0) first_read_ns_ = now_ns;
  }
  return entry.location;
}

void ReadCache::Put(std::string_view key, CachedRead read, uint64_t read_ns) {
  if (capacity_ == 0) return;
  auto location = std::make_shared<const CachedRead>(std::move(read));
  std::lock_guard lock(mu_);
  std::string name(key);
  if (auto it = index_.find(name); it != index_.end()) {
    it->second->location = std::move(location);
    entries_.splice(entries_.begin(), entries_, it->second);
  } else {
    entries_.push_front({name, std::move(location)});
    index_.emplace(std::move(name), entries_.begin());
  }
  Entry& entry = entries_.front();
  if (read_ns != 0 && !entry.read) {
    entry.read = true;
    if (reads_++ == 0) first_read_ns_ = read_ns;
  }
  if (entries_.size() > capacity_) DropLocked(std::prev(entries_.end()));
}

void ReadCache::Erase(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(key));
  if (it != index_.end()) DropLocked(it->second);
}

void ReadCache::DropLocked(Entries::iterator entry) {
  if (entry->read) --reads_;
  index_.erase(entry->key);
  entries_.erase(entry);
}

size_t ReadCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::vector<std::string> ReadCache::TakeReadsIfDue(uint64_t now_ns, uint64_t interval_ns) {
  std::lock_guard lock(mu_);
  if (reads_ == 0 || now_ns - first_read_ns_ < interval_ns) return {};
  std::vector<std::string> out;
  out.reserve(reads_);
  for (Entry& entry : entries_) {
    if (!entry.read) continue;
    entry.read = false;
    out.push_back(entry.key);
  }
  reads_ = 0;
  return out;
}

}  // namespace nanokv::client
