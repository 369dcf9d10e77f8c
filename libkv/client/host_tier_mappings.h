// The object store client's view of kvd's host tiers (ARCHITECTURE.md,
// "The host tier"): per device of kvd, one range the size of its host tier,
// read-only, where each host-tier page a get touched is mapped at its
// offset from the sealed memfd kvd gives readers. An object in the host
// tier is contiguous there, and its bytes are copied out by the reader
// itself (a memcpy to host memory, the backend's host-to-device copy to a
// device buffer). Pages stay mapped (a cache, as store pages are): the
// host tier's pages are fixed for kvd's life.
//
// Where a GPU backend runs each page's mapping is registered with the
// driver once (Backend::PinHostReadOnly, cuMemHostRegister), so the copy to
// a device runs at pinned speed; a refusal is logged once and the copy
// runs pageable.
//
// Threads: none of its own; the caller serializes every call (the store's
// call_mu_). The backend must outlive it.
#ifndef NANOKV_LIBKV_CLIENT_HOST_TIER_MAPPINGS_H_
#define NANOKV_LIBKV_CLIENT_HOST_TIER_MAPPINGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "gpu/backend.h"
#include "nanokv/object_types.h"
#include "nanokv/status.h"

namespace nanokv::client {

class HostTierMappings {
 public:
  // Asks kvd for one read-only fd per host-tier page number of kvd's device
  // `device`. The caller owns them.
  using FetchFds = std::function<Result<std::vector<int>>(int device, const std::vector<uint32_t>& pages)>;

  explicit HostTierMappings(gpu::Backend& backend) : backend_(backend) {}
  // Unpins and unmaps every page and frees the ranges.
  ~HostTierMappings();
  HostTierMappings(const HostTierMappings&) = delete;
  HostTierMappings& operator=(const HostTierMappings&) = delete;

  // Maps the pages of `plan` (a host-tier plan, checked by the codec) not
  // mapped yet and returns the range's base: the payload is at
  // base + plan.payload_offset. kInvalidArgument for a plan not of the host
  // tier; a host tier of another size than before (kvd restarted with
  // another object_store.host_tier) is mapped afresh.
  Result<uintptr_t> Map(const ObjectPlan& plan, const FetchFds& fetch);
  size_t mapped_pages() const;

 private:
  struct DeviceMap {
    uintptr_t base = 0;
    uint64_t bytes = 0;
    uint64_t page_bytes = 0;
    std::vector<bool> mapped;  // by page number
    std::vector<bool> pinned;  // registered with the driver
  };
  void Release(DeviceMap& map);
  // Maps `pages` from `fds` (kvd's reply, one each; not closed here).
  Status MapPages(DeviceMap& map, const std::vector<uint32_t>& pages, const std::vector<int>& fds);

  gpu::Backend& backend_;             // must remain live while this exists
  std::map<int, DeviceMap> devices_;  // by kvd's ordinal
  bool warned_unpinned_ = false;
};

}  // namespace nanokv::client

#endif  // NANOKV_LIBKV_CLIENT_HOST_TIER_MAPPINGS_H_
