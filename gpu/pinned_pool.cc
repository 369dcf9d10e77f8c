// gpu/pinned_pool.h's buffers: few (a transfer's depth), so a linear look.
#include "gpu/pinned_pool.h"

#include <algorithm>
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

PinnedPool::Buffer* PinnedPool::Free(size_t bytes) {
  Buffer* best = nullptr;
  for (Buffer& buffer : buffers_) {
    if (!buffer.out && buffer.bytes >= bytes && (best == nullptr || buffer.bytes < best->bytes)) best = &buffer;
  }
  return best;
}

bool PinnedPool::CanTake() const {
  // A free buffer that is too small is made again larger (Take).
  return buffers_.size() < max_buffers_ ||
         std::any_of(buffers_.begin(), buffers_.end(), [](const Buffer& buffer) { return !buffer.out; });
}

bool PinnedPool::Make(Buffer& buffer, size_t bytes) {
  if (buffer.pinned) backend_.UnpinHost(buffer.memory.get());
  buffer.pinned = false;
  buffer.memory.reset(new (std::nothrow) std::byte[bytes]);
  buffer.bytes = buffer.memory == nullptr ? 0 : bytes;
  if (buffer.memory == nullptr) return false;
  Status pinned = backend_.PinHost(buffer.memory.get(), bytes);
  buffer.pinned = pinned.ok();
  if (!pinned.ok() && !warned_) {
    warned_ = true;
    spdlog::warn("{}: staging buffers stay pageable (slower copies): {}", owner_, pinned.ToString());
  }
  return true;
}

std::byte* PinnedPool::Take(size_t bytes) {
  Buffer* buffer = Free(bytes);
  if (buffer == nullptr && buffers_.size() < max_buffers_) {
    buffers_.emplace_back();
    buffer = &buffers_.back();
    if (!Make(*buffer, bytes)) {
      buffers_.pop_back();
      return nullptr;
    }
  } else if (buffer == nullptr) {
    // Every buffer made and none free is large enough (a peer with a larger
    // chunk than the others): a free one is made again at this size, else
    // a caller waiting for `bytes` would wait for ever.
    auto free = std::find_if(buffers_.begin(), buffers_.end(), [](const Buffer& b) { return !b.out; });
    if (free == buffers_.end() || !Make(*free, bytes)) return nullptr;
    buffer = &*free;
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
