// A buffer of its own on a device, through the backend's VMM calls (so the
// same code runs on host, cuda and hip): a reserved range, one page created
// and mapped in it, access for `device`. For tests and benchmarks; engines
// bring their own memory.
#ifndef NANOKV_GPU_DEVICE_BUFFER_H_
#define NANOKV_GPU_DEVICE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gpu/backend.h"
#include "nanokv/status.h"

namespace nanokv::gpu {

class DeviceBuffer {
 public:
  // `bytes` rounded up to whole granules of the device (at least one).
  static Result<std::unique_ptr<DeviceBuffer>> Create(Backend& backend, int device, size_t bytes) {
    NANOKV_ASSIGN_OR_RETURN(DeviceInfo info, backend.GetDeviceInfo(device));
    const size_t granule = info.granularity;
    size_t size = (bytes + granule - 1) / granule * granule;
    if (size == 0) size = granule;
    auto buffer = std::unique_ptr<DeviceBuffer>(new DeviceBuffer(backend, size));
    NANOKV_ASSIGN_OR_RETURN(buffer->base_, backend.ReserveRange(size, 0));
    NANOKV_ASSIGN_OR_RETURN(PageHandle page, backend.CreatePage(device, size));
    Status mapped = backend.Map(buffer->base_, size, page);
    Status released = backend.ReleasePage(page);  // the mapping keeps it
    NANOKV_RETURN_IF_ERROR(mapped);
    buffer->mapped_ = true;
    NANOKV_RETURN_IF_ERROR(released);
    int devices[] = {device};
    NANOKV_RETURN_IF_ERROR(backend.SetAccess(buffer->base_, size, devices));
    return buffer;
  }

  ~DeviceBuffer() {
    if (mapped_) (void)backend_.Unmap(base_, size_);
    if (base_ != 0) (void)backend_.FreeRange(base_, size_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return reinterpret_cast<void*>(base_); }
  size_t size() const { return size_; }

 private:
  DeviceBuffer(Backend& backend, size_t size) : backend_(backend), size_(size) {}

  Backend& backend_;
  size_t size_;
  uintptr_t base_ = 0;
  bool mapped_ = false;
};

}  // namespace nanokv::gpu

#endif  // NANOKV_GPU_DEVICE_BUFFER_H_
