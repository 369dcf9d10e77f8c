#include "libkv/prefix/prefix_staging.h"

#include "libkv/client/object_transfer.h"

namespace nanokv::prefix {

Status Staging::Open() {
  if (backend_ != nullptr) return Status::OK();
  auto opened = gpu::OpenBackend(backend_name_);
  if (!opened.ok()) {
    return Status(opened.status().code(), "prefix cache: the " + backend_name_ +
                                              " backend for its scratch: " + std::string(opened.status().message()));
  }
  backend_ = std::move(*opened);
  return Status::OK();
}

Result<std::byte*> Staging::Reserve(const void* near, uint64_t bytes) {
  NANOKV_RETURN_IF_ERROR(Open());
  const int device = client::BufferDevice(*backend_, near, 0);
  if (scratch_ == nullptr || scratch_->size() < bytes || scratch_device_ != device) {
    scratch_.reset();  // before the new one: both at once may not fit
    auto made = gpu::DeviceBuffer::Create(*backend_, device, bytes);
    if (!made.ok()) {
      return Status(made.status().code(), "prefix cache: " + std::to_string(bytes) + " bytes of scratch on device " +
                                              std::to_string(device) + ": " + std::string(made.status().message()));
    }
    scratch_ = std::move(*made);
    scratch_device_ = device;
  }
  return static_cast<std::byte*>(scratch_->get());
}

Status Staging::Copy(std::span<const kernels::Copy> copies, void* stream, bool wait) {
  NANOKV_RETURN_IF_ERROR(Open());
  return client::CopyMany(*backend_, copies, stream, wait);
}

}  // namespace nanokv::prefix
