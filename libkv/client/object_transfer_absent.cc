// ObjectStore's device transfers in a build without the kernels (no nvcc):
// object_transfer.cc copies through the backend instead.
#include "libkv/client/object_transfer.h"

namespace nanokv::client {

bool KernelsBuilt() { return false; }
bool KernelsFitDevice(int) { return false; }

Status StoreWithKernels(const void*, const ObjectPieces&, void*, bool) {
  return Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)");
}

Status LoadWithKernels(void*, const ObjectPieces&, void*, bool) {
  return Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)");
}

std::vector<Status> LoadManyWithKernels(std::span<const LoadItem> items, void*, bool) {
  return std::vector<Status>(items.size(),
                             Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)"));
}

std::vector<Status> StoreAnnouncedWithKernels(std::span<const StoreItem> items, void*) {
  return std::vector<Status>(items.size(),
                             Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)"));
}

Status SynchronizeKernels(void*) { return Status::OK(); }
Status CopyManyWithKernels(std::span<const kernels::Copy>, void*, bool) {
  return Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)");
}
Result<int> KernelPointerDevice(const void*) {
  return Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)");
}
Result<void*> RegisterForKernels(void*, size_t) {
  return Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)");
}
void UnregisterForKernels(void*) {}
Result<void*> RecordKernelEvent(void*) { return static_cast<void*>(nullptr); }
Status WaitKernelEvent(void*) { return Status::OK(); }
void DestroyKernelEvent(void*) {}
Status ForkKernelStreams(void*, int, void**) {
  return Status::Unsupported("nanokv was built without the device kernels (kernels/, nvcc)");
}
Status JoinKernelStreams(void*, void* const*, int) { return Status::OK(); }

}  // namespace nanokv::client
