// The GPU tier's placement (payload_placement.h): one device's store pages,
// held from NodeState by the store's tenant, mapped back to back in kvd's
// address space with access for that device. Copies go through the
// backend, so on the host backend this is host memory with the same rules.
#ifndef NANOKV_DAEMON_OBJECTS_STORE_RANGE_H_
#define NANOKV_DAEMON_OBJECTS_STORE_RANGE_H_

#include <memory>
#include <vector>

#include "daemon/node/node_state.h"
#include "daemon/objects/payload_placement.h"
#include "gpu/backend.h"

namespace nanokv::kvd {

class StoreRange final : public PayloadPlacement {
 public:
  // Maps `pages` of `device` (NodeState's, held already) in range order.
  // kvd maps its own exported pages by importing them: NodeState hands out
  // fds, not handles, and an import is a handle of the same memory.
  // `backend` and `node` must outlive the range.
  static Result<std::unique_ptr<StoreRange>> Map(gpu::Backend& backend, NodeState& node, int device,
                                                 std::vector<PageId> pages);
  // Unmaps what was mapped and frees the address range.
  ~StoreRange() override;

  Tier tier() const override { return Tier::kGpu; }
  int device() const override { return device_; }
  size_t page_bytes() const override { return page_bytes_; }
  const std::vector<PageId>& pages() const override { return pages_; }
  uintptr_t base() const override { return base_; }
  Status Read(uint64_t offset, void* host, size_t bytes, gpu::StreamHandle stream = {}) const override;
  Status Write(uint64_t offset, const void* host, size_t bytes, gpu::StreamHandle stream = {}) override;
  Status Fill(uint64_t offset, uint8_t value, size_t bytes) override;

 private:
  StoreRange(gpu::Backend& backend, int device, std::vector<PageId> pages, size_t page_bytes)
      : backend_(backend), device_(device), pages_(std::move(pages)), page_bytes_(page_bytes) {}
  Status CheckSpan(uint64_t offset, size_t bytes) const;

  gpu::Backend& backend_;
  const int device_;
  const std::vector<PageId> pages_;
  const size_t page_bytes_;
  uintptr_t base_ = 0;
  size_t mapped_ = 0;  // pages mapped at base_ so far
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_STORE_RANGE_H_
