// The host tier's placement (payload_placement.h): host memory kvd creates
// for the objects that fall out of one device's store. Shared memory as
// the GPU store's pages are: one sealed memfd per page (numbered 0.. in
// range order, the tier's own page ids), so an fd of a page can go to an
// engine the way store pages do, mapped back to back in kvd. Where a GPU
// backend runs the range is page-locked with the driver (Backend::PinHost),
// so copies to and from it run at pinned speed. Its memory is committed at
// start (fallocate): a tier the machine cannot hold fails there, not with a
// SIGBUS when an object first lands in it.
#ifndef NANOKV_DAEMON_OBJECTS_HOST_RANGE_H_
#define NANOKV_DAEMON_OBJECTS_HOST_RANGE_H_

#include <memory>
#include <vector>

#include "daemon/objects/payload_placement.h"
#include "gpu/backend.h"

namespace nanokv::kvd {

class HostRange final : public PayloadPlacement {
 public:
  // `pages` pages of `page_bytes` for device `device`'s store. `backend`
  // (it pins the range) must outlive the range. kResourceExhausted when the
  // memory cannot be had, naming object_store.host_tier.
  static Result<std::unique_ptr<HostRange>> Create(gpu::Backend& backend, int device, uint32_t pages,
                                                   size_t page_bytes);
  // The host tier a dead kvd left (its page keeper held the memfds):
  // `fds[i]` is page i, taken whatever happens. kInvalidArgument naming the
  // page when one is not a sealed memfd of `page_bytes`; the bytes in them
  // are kept as they are.
  static Result<std::unique_ptr<HostRange>> Adopt(gpu::Backend& backend, int device, std::vector<int> fds,
                                                  size_t page_bytes);
  // Unpins and unmaps the range and closes the pages.
  ~HostRange() override;

  Tier tier() const override { return Tier::kHost; }
  int device() const override { return device_; }
  size_t page_bytes() const override { return page_bytes_; }
  const std::vector<PageId>& pages() const override { return ids_; }
  uintptr_t base() const override { return reinterpret_cast<uintptr_t>(base_); }
  Status Read(uint64_t offset, void* host, size_t bytes, gpu::StreamHandle stream = {}) const override;
  Status Write(uint64_t offset, const void* host, size_t bytes, gpu::StreamHandle stream = {}) override;
  Status Fill(uint64_t offset, uint8_t value, size_t bytes) override;
  // The fd of page `id` (not a copy: the range keeps it); -1 if none.
  int PageFd(PageId id) const { return id < fds_.size() ? fds_[id] : -1; }

 private:
  HostRange(gpu::Backend& backend, int device, size_t page_bytes)
      : backend_(backend), device_(device), page_bytes_(page_bytes) {}
  Status CheckSpan(uint64_t offset, size_t bytes) const;
  // Reserves the range's addresses; MapPage maps page i (fds_[i]) there;
  // Pin page-locks it where a GPU backend runs.
  Status Reserve(uint32_t pages);
  Status MapPage(uint32_t i);
  Status Pin();

  gpu::Backend& backend_;
  const int device_;
  const size_t page_bytes_;
  std::vector<PageId> ids_;
  std::vector<int> fds_;
  void* base_ = nullptr;
  size_t reserved_ = 0;
  bool pinned_ = false;
};

}  // namespace nanokv::kvd

#endif  // NANOKV_DAEMON_OBJECTS_HOST_RANGE_H_
