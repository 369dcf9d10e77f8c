#include "libkv/client/host_tier_mappings.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "ipc/wire/object_codec.h"

namespace nanokv::client {

HostTierMappings::~HostTierMappings() {
  for (auto& [device, map] : devices_) Release(map);
}

void HostTierMappings::Release(DeviceMap& map) {
  for (size_t i = 0; i < map.pinned.size(); ++i) {
    if (map.pinned[i]) backend_.UnpinHost(reinterpret_cast<void*>(map.base + i * map.page_bytes));
  }
  if (map.base != 0) munmap(reinterpret_cast<void*>(map.base), map.bytes);
  map = {};
}

size_t HostTierMappings::mapped_pages() const {
  size_t n = 0;
  for (const auto& [device, map] : devices_) {
    for (bool mapped : map.mapped) n += mapped ? 1 : 0;
  }
  return n;
}

Status HostTierMappings::MapPages(DeviceMap& map, const std::vector<uint32_t>& pages, const std::vector<int>& fds) {
  if (fds.size() != pages.size()) {
    return Status::ProtocolError("nanokv objects: kvd sent " + std::to_string(fds.size()) + " host tier fds for " +
                                 std::to_string(pages.size()) + " pages");
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    void* at = reinterpret_cast<void*>(map.base + uint64_t{pages[i]} * map.page_bytes);
    if (mmap(at, map.page_bytes, PROT_READ, MAP_SHARED | MAP_FIXED, fds[i], 0) == MAP_FAILED) {
      return Status::Internal("mapping host tier page " + std::to_string(pages[i]) + ": " + std::strerror(errno));
    }
    map.mapped[pages[i]] = true;
    Status pinned = backend_.PinHostReadOnly(at, map.page_bytes);
    map.pinned[pages[i]] = pinned.ok();
    if (!pinned.ok() && !warned_unpinned_) {
      warned_unpinned_ = true;
      spdlog::warn("nanokv objects: host tier pages copy unpinned: {}", pinned.ToString());
    }
  }
  return Status::OK();
}

Result<uintptr_t> HostTierMappings::Map(const ObjectPlan& plan, const FetchFds& fetch) {
  if (plan.tier != ObjectTier::kHost) return Status::InvalidArgument("host tier mapping of a store plan");
  if (plan.page_bytes == 0 || plan.store_bytes % plan.page_bytes != 0) {
    return Status::ProtocolError("host tier plan of " + plan.key + ": size " + std::to_string(plan.store_bytes) +
                                 " is not whole pages of " + std::to_string(plan.page_bytes));
  }
  DeviceMap& map = devices_[plan.device];
  if (map.base != 0 && (map.bytes != plan.store_bytes || map.page_bytes != plan.page_bytes)) Release(map);
  if (map.base == 0) {
    // Address space only; pages come in at their offsets, read-only.
    void* base = mmap(nullptr, plan.store_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      return Status::ResourceExhausted("reserving " + std::to_string(plan.store_bytes) +
                                       " bytes for a host tier: " + std::strerror(errno));
    }
    map.base = reinterpret_cast<uintptr_t>(base);
    map.bytes = plan.store_bytes;
    map.page_bytes = plan.page_bytes;
    map.mapped.assign(plan.store_bytes / plan.page_bytes, false);
    map.pinned.assign(map.mapped.size(), false);
  }
  std::vector<uint32_t> missing;
  for (const ObjectSpan& span : plan.spans) {
    // The codec checked each page is inside the tier; checked again, since
    // a plan may come from anywhere in this process.
    if (span.page_id >= map.mapped.size()) {
      return Status::ProtocolError("host tier plan of " + plan.key + ": page " + std::to_string(span.page_id) +
                                   " out of range (" + std::to_string(map.mapped.size()) + " pages)");
    }
    if (!map.mapped[span.page_id]) missing.push_back(span.page_id);
  }
  // At most kMaxObjectPageFds fds a reply: the pages in chunks.
  for (size_t first = 0; first < missing.size(); first += wire::kMaxObjectPageFds) {
    const size_t count = std::min<size_t>(missing.size() - first, wire::kMaxObjectPageFds);
    std::vector<uint32_t> pages(missing.begin() + static_cast<std::ptrdiff_t>(first),
                                missing.begin() + static_cast<std::ptrdiff_t>(first + count));
    NANOKV_ASSIGN_OR_RETURN(std::vector<int> fds, fetch(plan.device, pages));
    Status status = MapPages(map, pages, fds);
    for (int fd : fds) close(fd);  // the mappings keep the pages
    NANOKV_RETURN_IF_ERROR(status);
  }
  return map.base;
}

}  // namespace nanokv::client
