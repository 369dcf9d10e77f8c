// Where the object store's bytes lie: one range of one tier's memory that
// kvd maps, made of whole pages, addressed by offset. The store above it
// (object_index.h) hands out offsets (OwnedSpace) and slots; a placement
// only holds the memory, names its pages (what engines map, by fd) and
// moves bytes in and out of it for kvd itself. Shaped like gpu::Backend (an
// abstract class of Status-returning calls over opaque memory), so a tier
// is one more implementation, not an `if` in the store: a device's store
// range today (store_range.h), host memory, a file later.
//
// kvd's own copies through a placement are rare by design: start-up
// (zeroing the header arena), a restart (reading header pages back), a
// payload page made a header page, the tier worker's moves (on a stream of
// its own), and tests. Engines move the payload.
#ifndef NANOKV_DAEMON_OBJECTS_PAYLOAD_PLACEMENT_H_
#define NANOKV_DAEMON_OBJECTS_PAYLOAD_PLACEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "daemon/node/page_types.h"
#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::kvd {

// The level of memory a placement is: the GPU store (each device's store
// range) first; tiers below it hold what falls out of it.
enum class Tier : uint8_t { kGpu = 0, kHost = 1 };

// "gpu", "host": how logs, kvctl and /metrics name a tier.
std::string_view TierName(Tier tier);

class PayloadPlacement {
 public:
  PayloadPlacement() = default;
  PayloadPlacement(const PayloadPlacement&) = delete;
  PayloadPlacement& operator=(const PayloadPlacement&) = delete;
  virtual ~PayloadPlacement() = default;

  virtual Tier tier() const = 0;
  // The device ordinal (kvd's) whose store this range is.
  virtual int device() const = 0;
  virtual size_t page_bytes() const = 0;
  // The range's pages in range order: offset o lies in pages()[o / page_bytes()].
  virtual const std::vector<PageId>& pages() const = 0;
  // kvd's mapping of the range (offset 0).
  virtual uintptr_t base() const = 0;
  size_t bytes() const { return pages().size() * page_bytes(); }

  // Copies between the range at `offset` and host memory, and a fill of the
  // range. kInvalidArgument for bytes outside the range. Synchronous without
  // `stream`; with one (the caller's, gpu::Backend::CreateStream) a copy is
  // queued there, in order with the stream's other copies, and done only
  // once the caller's SyncStream returns: `host` must stay live (and, for a
  // Write, unchanged) until then.
  virtual Status Read(uint64_t offset, void* host, size_t bytes, gpu::StreamHandle stream = {}) const = 0;
  virtual Status Write(uint64_t offset, const void* host, size_t bytes, gpu::StreamHandle stream = {}) = 0;
  virtual Status Fill(uint64_t offset, uint8_t value, size_t bytes) = 0;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_PAYLOAD_PLACEMENT_H_
