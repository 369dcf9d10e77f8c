#include "libkv/client/read_cache.h"

namespace nanokv::client {

std::shared_ptr<const CachedRead> ReadCache::Find(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(std::string(key));
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second;
}

void ReadCache::Put(std::string_view key, CachedRead read) {
  if (capacity_ == 0) return;
  auto entry = std::make_shared<const CachedRead>(std::move(read));
  std::lock_guard lock(mu_);
  std::string name(key);
  if (auto it = index_.find(name); it != index_.end()) {
    it->second->second = std::move(entry);
    entries_.splice(entries_.begin(), entries_, it->second);
    return;
  }
  entries_.emplace_front(name, std::move(entry));
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

void ReadCache::NoteRead(std::string_view key, uint64_t now_ns) {
  std::lock_guard lock(mu_);
  if (reads_.empty()) first_read_ns_ = now_ns;
  if (reads_.size() < capacity_) reads_.emplace(key);
}

std::vector<std::string> ReadCache::TakeReadsIfDue(uint64_t now_ns, uint64_t interval_ns) {
  std::lock_guard lock(mu_);
  if (reads_.empty() || now_ns - first_read_ns_ < interval_ns) return {};
  std::vector<std::string> out(reads_.begin(), reads_.end());
  reads_.clear();
  return out;
}

}  // namespace nanokv::client
