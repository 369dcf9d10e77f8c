// gpu/pinned_pool.h's buffers: few (a transfer's depth), so a linear look.
#include "gpu/pinned_pool.h"

#include <new>

#include <spdlog/spdlog.h>

namespace nanokv::gpu {

PinnedPool::PinnedPool(Backend& backend, size_t max_buffers, std::string owner)
    : backend_(backend), max_buffers_(max_buffers), owner_(std::move(owner)) {
  buffers_.reserve(max_buffers_);  // Buffer addresses stay put: Free answers them
}

PinnedPool::~PinnedPool() {
  for (Buffer& buffer : buffers_) {
    if (buffer.pinned) backend_.UnpinHost(buffer.memory.get());
  }
}

const PinnedPool::Buffer* PinnedPool::Free(size_t bytes) const {
  const Buffer* best = nullptr;  // the smallest that fits
  for (const Buffer& buffer : buffers_) {
    if (!buffer.out && buffer.bytes >= bytes && (best == nullptr || buffer.bytes < best->bytes)) best = &buffer;
  }
  return best;
}

PinnedPool::Buffer* PinnedPool::Free(size_t bytes) {
  return const_cast<Buffer*>(static_cast<const PinnedPool*>(this)->Free(bytes));
}

bool PinnedPool::CanTake(size_t bytes) const { return Free(bytes) != nullptr || buffers_.size() < max_buffers_; }

std::byte* PinnedPool::Take(size_t bytes) {
  Buffer* buffer = Free(bytes);
  if (buffer == nullptr) {
    if (buffers_.size() >= max_buffers_) return nullptr;
    Buffer made;
    made.memory.reset(new (std::nothrow) std::byte[bytes]);
    if (made.memory == nullptr) return nullptr;
    made.bytes = bytes;
    Status pinned = backend_.PinHost(made.memory.get(), bytes);
    made.pinned = pinned.ok();
    if (!pinned.ok() && !warned_) {
      warned_ = true;
      spdlog::warn("{}: staging buffers stay pageable (slower copies): {}", owner_, pinned.ToString());
    }
    buffers_.push_back(std::move(made));
    buffer = &buffers_.back();
  }
  buffer->out = true;
  return buffer->memory.get();
}

void PinnedPool::Give(std::byte* memory) {
  if (memory == nullptr) return;
  for (Buffer& buffer : buffers_) {
    if (buffer.memory.get() == memory) buffer.out = false;
  }
}

}  // namespace nanokv::gpu
