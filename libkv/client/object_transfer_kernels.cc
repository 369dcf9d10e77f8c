// ObjectStore's device transfers through kernels/ (built with nvcc only).
#include "libkv/client/object_transfer.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::client {
namespace {

// Where the kernels run: the stream's device, which must reach the pages. A
// nullptr stream belongs to the current device; when that one cannot reach
// them, the object's device is made current for the call (and restored), so
// a caller elsewhere cannot fault the context with a stray access.
class OnDevice {
 public:
  OnDevice(void* stream, const ObjectPieces& object) {
    auto device = kernels::StreamDevice(stream);
    if (!device.ok()) {
      status_ = device.status();
      return;
    }
    bool reaches = *device < 0 || std::find(object.access.begin(), object.access.end(), *device) !=
                                      object.access.end();
    if (reaches) return;
    if (stream != nullptr) {
      status_ = Status::InvalidArgument(
          "object on device " + std::to_string(object.device) + ": the stream's device " +
          std::to_string(*device) + " has no access to its pages here (ObjectStoreOptions::access_devices)");
      return;
    }
    status_ = kernels::SetCurrentDevice(object.device);
    if (status_.ok()) previous_ = *device;
  }
  ~OnDevice() {
    if (previous_ < 0) return;
    Status restored = kernels::SetCurrentDevice(previous_);
    if (!restored.ok()) spdlog::warn("nanokv objects: restoring device {}: {}", previous_, restored.ToString());
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
  const Status& status() const { return status_; }

 private:
  Status status_;
  int previous_ = -1;
};

}  // namespace

bool KernelsBuilt() { return true; }

Status StoreWithKernels(const void* src, const ObjectPieces& object, void* stream) {
  OnDevice on(stream, object);
  NANOKV_RETURN_IF_ERROR(on.status());
  // READY is stored on the device right after the last byte, in stream
  // order: a device reader spinning on the header sees the object before
  // kvd hears of the commit. result nullptr: kvd's Commit is the verdict.
  NANOKV_RETURN_IF_ERROR(kernels::StorePagesAndCommit(src, object.segments.data(), object.segments.size(),
                                                      object.header, object.epoch, nullptr, stream));
  return kernels::Synchronize(stream);
}

Status LoadWithKernels(void* dst, const ObjectPieces& object, void* stream) {
  OnDevice on(stream, object);
  NANOKV_RETURN_IF_ERROR(on.status());
  NANOKV_RETURN_IF_ERROR(kernels::LoadPages(dst, object.segments.data(), object.segments.size(), stream));
  return kernels::Synchronize(stream);
}

}  // namespace nanokv::client
