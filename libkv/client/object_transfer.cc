// ObjectStore's device transfers: the kernels where they serve, else the
// backend's copy (object_transfer.h).
#include "libkv/client/object_transfer.h"

#include <string_view>

namespace nanokv::client {

bool TransfersUseKernels(const gpu::Backend& backend) {
  // The kernels are CUDA's: they run where the backend's pages are CUDA memory.
  return KernelsBuilt() && std::string_view(backend.name()) == "cuda";
}

Result<bool> StoreObject(gpu::Backend& backend, const void* src, const ObjectPieces& object, void* stream) {
  if (src == nullptr) return Status::InvalidArgument("put from device: null source");
  if (TransfersUseKernels(backend)) {
    NANOKV_RETURN_IF_ERROR(StoreWithKernels(src, object, stream));
    return true;  // kv_commit_ready ran after the stores
  }
  NANOKV_RETURN_IF_ERROR(backend.Copy(object.payload, src, object.bytes, gpu::CopyKind::kDeviceToDevice));
  return false;
}

Status LoadObject(gpu::Backend& backend, void* dst, const ObjectPieces& object, void* stream) {
  if (dst == nullptr) return Status::InvalidArgument("get to device: null destination");
  if (TransfersUseKernels(backend)) return LoadWithKernels(dst, object, stream);
  return backend.Copy(dst, object.payload, object.bytes, gpu::CopyKind::kDeviceToDevice);
}

}  // namespace nanokv::client
