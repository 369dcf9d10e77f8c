#include "libkv/client/page_cache.h"

#include <unistd.h>

#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::client {

void CloseFds(std::vector<int>* fds) {
  for (int fd : *fds) {
    if (fd >= 0) close(fd);
  }
  fds->clear();
}

PageCache::PageCache(gpu::Backend& backend, size_t page_bytes)
    : backend_(backend), page_bytes_(page_bytes) {}

PageCache::~PageCache() { ReleaseAll(); }

void PageCache::ReleaseLocked(const Key& key, const Entry& entry) {
  Status released = backend_.ReleasePage(entry.handle);
  if (!released.ok()) {
    // Nothing to undo: the handle is gone from the cache either way, and a
    // mapping of the page, if any, still keeps its memory.
    spdlog::warn("nanokv: releasing the handle of page {} of device {} (generation {}): {}",
                 key.second, key.first, entry.generation, released.ToString());
  }
  ++stats_.pages_released;
}

Status PageCache::Apply(int device, int local_device, std::span<const IncomingPage> pages,
                        std::vector<int>* fds, std::vector<ImportedPage>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  // Check everything before changing anything, so a malformed reply leaves
  // the cache as it was.
  size_t attached = 0;
  for (const IncomingPage& page : pages) attached += page.fd_attached ? 1 : 0;
  if (attached != fds->size()) {
    size_t got = fds->size();
    CloseFds(fds);
    return Status::ProtocolError("grant reply for device " + std::to_string(device) + " carries " +
                                 std::to_string(got) + " fds for " + std::to_string(attached) +
                                 " pages marked fd_attached");
  }
  for (const IncomingPage& page : pages) {
    if (page.fd_attached) continue;
    auto it = entries_.find(Key{device, page.id});
    if (it == entries_.end() || it->second.generation != page.generation) {
      CloseFds(fds);
      return Status::ProtocolError(
          "kvd granted page " + std::to_string(page.id) + " of device " + std::to_string(device) +
          " (generation " + std::to_string(page.generation) +
          ") without an fd, but this process has not imported it" +
          (it == entries_.end()
               ? std::string()
               : " (it holds generation " + std::to_string(it->second.generation) + ")"));
    }
  }

  size_t next_fd = 0;
  for (const IncomingPage& page : pages) {
    Key key{device, page.id};
    if (!page.fd_attached) {
      // The hot path: a page this process imported before. No driver call.
      out->push_back({page.id, page.generation, entries_[key].handle});
      ++stats_.pages_reused;
      continue;
    }
    int fd = (*fds)[next_fd];
    (*fds)[next_fd++] = -1;  // ImportPage owns it from here, success or not
    auto handle = backend_.ImportPage(fd, local_device, page_bytes_);
    if (!handle.ok()) {
      CloseFds(fds);  // the ones not reached yet (consumed ones are -1)
      return Status(handle.status().code(),
                    "importing page " + std::to_string(page.id) + " of device " +
                        std::to_string(device) + ": " + std::string(handle.status().message()),
                    handle.status().call(), handle.status().error_name());
    }
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      // kvd recycled the id (a new generation) or re-sent the fd: the new
      // handle replaces the old one; a mapping of the old page keeps its memory.
      ReleaseLocked(key, it->second);
      it->second = Entry{page.generation, *handle};
    } else {
      entries_.emplace(key, Entry{page.generation, *handle});
    }
    ++stats_.pages_imported;
    out->push_back({page.id, page.generation, *handle});
  }
  fds->clear();
  return Status::OK();
}

void PageCache::Forget(int device, std::span<const uint32_t> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t id : ids) {
    auto it = entries_.find(Key{device, id});
    if (it == entries_.end()) continue;
    ReleaseLocked(it->first, it->second);
    entries_.erase(it);
  }
}

void PageCache::RetainOnly(const std::set<std::pair<int, uint32_t>>& keep) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (keep.count(it->first) != 0) {
      ++it;
      continue;
    }
    ReleaseLocked(it->first, it->second);
    it = entries_.erase(it);
  }
}

Result<ImportedPage> PageCache::Find(int device, uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(Key{device, id});
  if (it == entries_.end()) {
    return Status::NotFound("no imported handle for page " + std::to_string(id) + " of device " +
                            std::to_string(device));
  }
  return ImportedPage{id, it->second.generation, it->second.handle};
}

void PageCache::ReleaseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, entry] : entries_) ReleaseLocked(key, entry);
  entries_.clear();
}

ClientStats PageCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ClientStats out = stats_;
  out.cached_handles = entries_.size();
  return out;
}

}  // namespace nanokv::client
