// Device memory for tests that need a buffer of their own on a device,
// through the backend (so the same code runs on host and cuda): a reserved
// range, one page created and mapped in it, access for `device`.
#ifndef NANOKV_TESTS_INTEGRATION_BACKEND_BUFFER_H_
#define NANOKV_TESTS_INTEGRATION_BACKEND_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::testing {

class BackendBuffer {
 public:
  // `bytes` rounded up to whole granules of the device (at least one).
  static Result<std::unique_ptr<BackendBuffer>> Create(gpu::Backend& backend, int device, size_t bytes) {
    NANOKV_ASSIGN_OR_RETURN(gpu::DeviceInfo info, backend.GetDeviceInfo(device));
    const size_t granule = info.granularity;
    size_t size = (bytes + granule - 1) / granule * granule;
    if (size == 0) size = granule;
    auto buffer = std::unique_ptr<BackendBuffer>(new BackendBuffer(backend, size));
    NANOKV_ASSIGN_OR_RETURN(buffer->base_, backend.ReserveRange(size, 0));
    NANOKV_ASSIGN_OR_RETURN(gpu::PageHandle page, backend.CreatePage(device, size));
    Status mapped = backend.Map(buffer->base_, size, page);
    Status released = backend.ReleasePage(page);  // the mapping keeps it
    NANOKV_RETURN_IF_ERROR(mapped);
    buffer->mapped_ = true;
    NANOKV_RETURN_IF_ERROR(released);
    int devices[] = {device};
    NANOKV_RETURN_IF_ERROR(backend.SetAccess(buffer->base_, size, devices));
    return buffer;
  }

  ~BackendBuffer() {
    if (mapped_) (void)backend_.Unmap(base_, size_);
    if (base_ != 0) (void)backend_.FreeRange(base_, size_);
  }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(base_); }
  size_t size() const { return size_; }

 private:
  BackendBuffer(gpu::Backend& backend, size_t size) : backend_(backend), size_(size) {}

  gpu::Backend& backend_;
  size_t size_;
  uintptr_t base_ = 0;
  bool mapped_ = false;
};

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_BACKEND_BUFFER_H_
