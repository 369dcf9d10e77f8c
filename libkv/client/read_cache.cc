#include "libkv/client/read_cache.h"

namespace nanokv::client {

std::optional<CachedRead> ReadCache::Find(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(key));
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second;
}

void ReadCache::Put(std::string_view key, CachedRead read) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  std::string name(key);
  if (auto it = index_.find(name); it != index_.end()) {
    it->second->second = std::move(read);
    entries_.splice(entries_.begin(), entries_, it->second);
    return;
  }
  entries_.emplace_front(name, std::move(read));
  index_.emplace(std::move(name), entries_.begin());
  if (entries_.size() > capacity_) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

void ReadCache::Erase(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(key));
  if (it == index_.end()) return;
  entries_.erase(it->second);
  index_.erase(it);
}

size_t ReadCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace nanokv::client
