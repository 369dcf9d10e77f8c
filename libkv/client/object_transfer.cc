// ObjectStore's device transfers: the kernels where they serve, else the
// backend's copy (object_transfer.h).
#include "libkv/client/object_transfer.h"

#include <algorithm>
#include <string_view>

#include <spdlog/spdlog.h>

namespace nanokv::client {

bool TransfersUseKernels(const gpu::Backend& backend) {
  // The kernels are CUDA's: they run where the backend's pages are CUDA memory.
  return KernelsBuilt() && std::string_view(backend.name()) == "cuda";
}

bool TransfersUseKernelsOn(const gpu::Backend& backend, int device) {
  return TransfersUseKernels(backend) && KernelsFitDevice(device);
}

Result<bool> StoreObject(gpu::Backend& backend, const void* src, const ObjectPieces& object, void* stream,
                         bool wait) {
  if (src == nullptr) return Status::InvalidArgument("put from device: null source");
  if (TransfersUseKernelsOn(backend, object.device)) {
    NANOKV_RETURN_IF_ERROR(StoreWithKernels(src, object, stream, wait));
    return true;  // kv_commit_ready ran after the stores
  }
  NANOKV_RETURN_IF_ERROR(BeginByCopy(backend, object.header, object.writing));
  NANOKV_RETURN_IF_ERROR(backend.Copy(object.payload, src, object.bytes, gpu::CopyKind::kDeviceToDevice));
  NANOKV_RETURN_IF_ERROR(PublishByCopy(backend, object.header));
  return true;
}

Status BeginByCopy(gpu::Backend& backend, ObjectHeader* at, const ObjectHeader& writing) {
  return backend.Copy(at, &writing, sizeof(writing), gpu::CopyKind::kHostToDevice);
}

Status PublishByCopy(gpu::Backend& backend, ObjectHeader* at) {
  // One aligned 4-byte copy after the payload's, which have completed: a
  // reader that sees READY sees the bytes (the seed's host-side publish).
  const auto ready = static_cast<uint32_t>(ObjectState::kReady);
  return backend.Copy(&at->state, &ready, sizeof(ready), gpu::CopyKind::kHostToDevice);
}

Status LoadFromHostTier(gpu::Backend& backend, void* dst, const ObjectPieces& object) {
  // Synchronous copies: the pages are host memory (pinned where a GPU
  // backend runs), the lease ends once this returns.
  auto* out = static_cast<std::byte*>(dst);
  for (const kernels::Segment& segment : object.segments) {
    NANOKV_RETURN_IF_ERROR(backend.Copy(out, segment.ptr, segment.bytes, gpu::CopyKind::kHostToDevice));
    out += segment.bytes;
  }
  return Status::OK();
}

Status LoadObject(gpu::Backend& backend, void* dst, const ObjectPieces& object, void* stream, bool wait) {
  if (dst == nullptr) return Status::InvalidArgument("get to device: null destination");
  if (object.host_tier) return LoadFromHostTier(backend, dst, object);
  if (TransfersUseKernelsOn(backend, object.device)) return LoadWithKernels(dst, object, stream, wait);
  return backend.Copy(dst, object.payload, object.bytes, gpu::CopyKind::kDeviceToDevice);
}

std::vector<Status> LoadObjects(gpu::Backend& backend, std::span<const LoadItem> items, void* stream, bool wait) {
  bool kernels = TransfersUseKernels(backend);
  for (const LoadItem& item : items) {
    kernels = kernels && item.object != nullptr && !item.object->host_tier && KernelsFitDevice(item.object->device);
  }
  if (kernels && items.size() > 1) return LoadManyWithKernels(items, stream, wait);
  std::vector<Status> out;
  out.reserve(items.size());
  for (const LoadItem& item : items) {
    out.push_back(item.object == nullptr ? Status::InvalidArgument("load: no object")
                                         : LoadObject(backend, item.dst, *item.object, stream, wait));
  }
  return out;
}

Status CopyMany(gpu::Backend& backend, std::span<const kernels::Copy> copies, void* stream, bool wait) {
  if (TransfersUseKernels(backend)) return CopyManyWithKernels(copies, stream, wait);
  for (const kernels::Copy& c : copies) {
    NANOKV_RETURN_IF_ERROR(backend.Copy(c.dst, c.src, c.bytes, gpu::CopyKind::kDeviceToDevice));
  }
  return Status::OK();
}

int BufferDevice(const gpu::Backend& backend, const void* buffer, int fallback) {
  if (!TransfersUseKernels(backend)) return fallback;
  Result<int> device = KernelPointerDevice(buffer);
  return device.ok() && *device >= 0 ? *device : fallback;
}

Status FinishTransfers(const gpu::Backend& backend, void* stream) {
  return TransfersUseKernels(backend) && stream != nullptr ? SynchronizeKernels(stream) : Status::OK();
}

StreamFan StreamFan::Fork(const gpu::Backend& backend, void* stream, size_t items) {
  StreamFan fan(stream);
  if (!TransfersUseKernels(backend) || stream == nullptr || items < 2) return fan;
  const int ways = static_cast<int>(std::min<size_t>(items, kernels::kMaxFanStreams));
  Status forked = ForkKernelStreams(stream, ways, fan.forked_);
  if (!forked.ok()) {
    // Only slower: the batch runs on the caller's stream.
    spdlog::warn("nanokv objects: a batch's stores stay on one stream: {}", forked.ToString());
    return fan;
  }
  fan.ways_ = ways;
  return fan;
}

Status StreamFan::Join() {
  if (ways_ == 0) return Status::OK();
  const int ways = ways_;
  ways_ = 0;
  return JoinKernelStreams(stream_, forked_, ways);
}

StreamFan::~StreamFan() {
  Status joined = Join();
  if (!joined.ok()) spdlog::error("nanokv objects: joining a batch's streams: {}", joined.ToString());
}

Result<StreamEvent> StreamEvent::Record(const gpu::Backend& backend, void* stream) {
  StreamEvent point;
  if (TransfersUseKernels(backend) && stream != nullptr) {
    NANOKV_ASSIGN_OR_RETURN(point.event_, RecordKernelEvent(stream));
  }
  return point;
}

StreamEvent& StreamEvent::operator=(StreamEvent&& other) noexcept {
  if (this != &other) {
    DestroyKernelEvent(event_);
    event_ = other.event_;
    other.event_ = nullptr;
  }
  return *this;
}

StreamEvent::~StreamEvent() { DestroyKernelEvent(event_); }

Status StreamEvent::Wait() const { return event_ == nullptr ? Status::OK() : WaitKernelEvent(event_); }

}  // namespace nanokv::client
