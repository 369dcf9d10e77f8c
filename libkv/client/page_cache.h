// The page-handle import cache: the engine-side reason a hot grant costs no
// driver call. kvd exports each page once and sends its fd with the first
// grant of each (page id, generation) to this process; the cache imports it
// once and keeps the handle, so a later grant of the same page arrives with no
// fd and is served from here.
//
// Invariants (kvd's per-tenant `imported` map mirrors this cache):
//   1. At most one handle per (device, page id), tagged with the generation it
//      was imported for. A grant of a new generation replaces it.
//   2. A handle is released only when kvd says the id was recycled (Forget),
//      when a newer generation replaces it, or at teardown: never on Return,
//      because kvd assumes the handle is still here when it grants the page
//      again without an fd.
//   3. Every fd handed to Apply is consumed: imported (ImportPage owns it) or
//      closed, on every path.
//   4. No fd is kept: the fd a page came in is closed once imported (the
//      backend's handle keeps the memory), so an engine's fds do not grow
//      with its pages. A restarted kvd takes a page back
//      by (device, page id, generation) alone (client_reconnect.cc).
#ifndef NANOKV_LIBKV_CLIENT_PAGE_CACHE_H_
#define NANOKV_LIBKV_CLIENT_PAGE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <utility>
#include <vector>

#include "gpu/backend.h"
#include "nanokv/client.h"
#include "nanokv/status.h"

namespace nanokv::client {

// One page of a grant reply as the wire describes it.
struct IncomingPage {
  uint32_t id = 0;
  uint32_t generation = 0;
  bool fd_attached = false;
};

// A granted page with the handle to map it by.
struct ImportedPage {
  uint32_t id = 0;
  uint32_t generation = 0;
  gpu::PageHandle handle;
};

class PageCache {
 public:
  // `backend` must remain live while the cache exists.
  PageCache(gpu::Backend& backend, size_t page_bytes);
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;
  ~PageCache();  // releases every handle

  // Applies the pages of one grant reply datagram and its fds: the i-th fd
  // belongs to the i-th page with fd_attached. Takes ownership of every fd in
  // `fds` (clears it). Appends the pages, with handles, to *out in order.
  // kProtocolError when the fd count does not match the fd_attached count, or
  // a page without an fd is not cached with that generation; then nothing is
  // changed. An import failure returns the backend's error; the pages before
  // it stay imported (kvd counts them as imported either way).
  // `device` is kvd's ordinal (the cache's key), `local_device` this
  // process's ordinal of the same device (the backend's).
  Status Apply(int device, int local_device, std::span<const IncomingPage> pages,
               std::vector<int>* fds, std::vector<ImportedPage>* out);

  // kvd recycled these ids: releases their handles. Mappings of the old pages
  // keep their memory until unmapped (backend rule 3). Unknown ids are ignored.
  void Forget(int device, std::span<const uint32_t> ids);

  // Releases every handle but those of `keep` (a reconnect to a restarted
  // kvd: the handles of pages not handed back name nothing there).
  void RetainOnly(const std::set<std::pair<int, uint32_t>>& keep);

  // The cached handle of a page, kNotFound when there is none.
  Result<ImportedPage> Find(int device, uint32_t id) const;

  // Releases every handle (teardown).
  void ReleaseAll();

  ClientStats stats() const;

 private:
  struct Entry {
    uint32_t generation = 0;
    gpu::PageHandle handle;
  };
  using Key = std::pair<int, uint32_t>;  // (device, page id)

  // REQUIRES: mu_ held.
  void ReleaseLocked(const Key& key, const Entry& entry);

  gpu::Backend& backend_;  // must remain live while the cache exists
  const size_t page_bytes_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
  ClientStats stats_;
};

// Closes every fd in *fds and clears it.
void CloseFds(std::vector<int>* fds);

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_PAGE_CACHE_H_
