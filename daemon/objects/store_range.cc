#include "daemon/objects/store_range.h"

#include <span>
#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::kvd {

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kGpu:
      return "gpu";
    case Tier::kHost:
      return "host";
  }
  return "unknown";
}

Result<std::unique_ptr<StoreRange>> StoreRange::Map(gpu::Backend& backend, NodeState& node, int device,
                                                    std::vector<PageId> pages) {
  const size_t page_bytes = node.page_bytes();
  std::unique_ptr<StoreRange> range(new StoreRange(backend, device, std::move(pages), page_bytes));
  const size_t bytes = range->pages_.size() * page_bytes;
  NANOKV_ASSIGN_OR_RETURN(range->base_, backend.ReserveRange(bytes, 0));
  for (size_t i = 0; i < range->pages_.size(); ++i) {
    // ImportPage takes the fd (PageFd's is ours to use up).
    NANOKV_ASSIGN_OR_RETURN(int fd, node.PageFd(device, range->pages_[i]));
    NANOKV_ASSIGN_OR_RETURN(gpu::PageHandle handle, backend.ImportPage(fd, device, page_bytes));
    Status mapped = backend.Map(range->base_ + i * page_bytes, page_bytes, handle);
    // The mapping keeps the memory alive (backend.h rule 3): drop the handle.
    Status released = backend.ReleasePage(handle);
    NANOKV_RETURN_IF_ERROR(mapped);
    NANOKV_RETURN_IF_ERROR(released);
    range->mapped_ = i + 1;
  }
  NANOKV_RETURN_IF_ERROR(backend.SetAccess(range->base_, bytes, std::span<const int>(&device, 1)));
  return range;
}

StoreRange::~StoreRange() {
  if (base_ == 0) return;
  for (size_t i = 0; i < mapped_; ++i) {
    Status s = backend_.Unmap(base_ + i * page_bytes_, page_bytes_);
    if (!s.ok()) spdlog::warn("object store: unmap failed: {}", s.ToString());
  }
  Status s = backend_.FreeRange(base_, pages_.size() * page_bytes_);
  if (!s.ok()) spdlog::warn("object store: free range failed: {}", s.ToString());
}

Status StoreRange::CheckSpan(uint64_t offset, size_t bytes) const {
  if (offset > this->bytes() || bytes > this->bytes() - offset) {
    return Status::InvalidArgument("object store: bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                   ") outside device " + std::to_string(device_) + "'s store range of " +
                                   std::to_string(this->bytes()));
  }
  return Status::OK();
}

Status StoreRange::Read(uint64_t offset, void* host, size_t bytes, gpu::StreamHandle stream) const {
  NANOKV_RETURN_IF_ERROR(CheckSpan(offset, bytes));
  const auto* device = reinterpret_cast<const void*>(base_ + offset);
  if (stream.valid()) return backend_.CopyAsync(host, device, bytes, gpu::CopyKind::kDeviceToHost, stream);
  return backend_.Copy(host, device, bytes, gpu::CopyKind::kDeviceToHost);
}

Status StoreRange::Write(uint64_t offset, const void* host, size_t bytes, gpu::StreamHandle stream) {
  NANOKV_RETURN_IF_ERROR(CheckSpan(offset, bytes));
  auto* device = reinterpret_cast<void*>(base_ + offset);
  if (stream.valid()) return backend_.CopyAsync(device, host, bytes, gpu::CopyKind::kHostToDevice, stream);
  return backend_.Copy(device, host, bytes, gpu::CopyKind::kHostToDevice);
}

Status StoreRange::Fill(uint64_t offset, uint8_t value, size_t bytes) {
  NANOKV_RETURN_IF_ERROR(CheckSpan(offset, bytes));
  return backend_.Fill(reinterpret_cast<void*>(base_ + offset), value, bytes);
}

}  // namespace nanokv::kvd
