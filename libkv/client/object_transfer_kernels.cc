// ObjectStore's device transfers through kernels/ (built with nvcc only).
#include "libkv/client/object_transfer.h"

#include <algorithm>
#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::client {
namespace {

// Where the kernels run, for the length of one transfer: a device that
// reaches the object's pages (this process mapped them with access for it)
// and the caller's buffer. A stream names its device, which must reach the
// pages; a nullptr stream takes the current device if it reaches them, else
// the buffer's, else the object's own. That device is made current for the
// call (CUDA refuses a launch into another device's stream) and restored
// after; a buffer on another device is reached peer-to-peer (found on two
// H200s: a kernel on the object's GPU read a buffer of the other GPU without
// peer access and faulted the context).
class OnDevice {
 public:
  OnDevice() = default;
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
  ~OnDevice() {
    if (previous_ < 0) return;
    Status restored = kernels::SetCurrentDevice(previous_);
    if (!restored.ok()) spdlog::warn("nanokv objects: restoring device {}: {}", previous_, restored.ToString());
  }

  Status Enter(void* stream, const void* buffer, const ObjectPieces& object) {
    NANOKV_ASSIGN_OR_RETURN(int current, kernels::CurrentDevice());
    NANOKV_ASSIGN_OR_RETURN(int buffer_device, kernels::PointerDevice(buffer));
    // -1: the runtime cannot tell (HIP), so the caller's choice stands.
    auto reaches = [&](int device) {
      return device < 0 ||
             std::find(object.access.begin(), object.access.end(), device) != object.access.end();
    };
    int run = object.device;
    if (stream != nullptr) {
      NANOKV_ASSIGN_OR_RETURN(run, kernels::StreamDevice(stream));
      if (!reaches(run)) {
        return Status::InvalidArgument(
            "object on device " + std::to_string(object.device) + ": the stream's device " +
            std::to_string(run) + " has no access to its pages here (ObjectStoreOptions::access_devices)");
      }
    } else if (reaches(current)) {
      run = current;
    } else if (buffer_device >= 0 && reaches(buffer_device)) {
      run = buffer_device;
    }
    if (run >= 0 && current >= 0 && run != current) {
      NANOKV_RETURN_IF_ERROR(kernels::SetCurrentDevice(run));
      previous_ = current;
    }
    if (run >= 0 && buffer_device >= 0 && buffer_device != run) {
      Status peer = kernels::EnablePeerAccess(buffer_device);
      if (!peer.ok()) {
        return Status(peer.code(), "object on device " + std::to_string(object.device) +
                                       ": the kernels run on device " + std::to_string(run) +
                                       ", which cannot reach the buffer on device " +
                                       std::to_string(buffer_device) + ": " + peer.ToString());
      }
    }
    return Status::OK();
  }

 private:
  int previous_ = -1;
};

}  // namespace

bool KernelsBuilt() { return true; }

Status StoreWithKernels(const void* src, const ObjectPieces& object, void* stream) {
  OnDevice on;
  NANOKV_RETURN_IF_ERROR(on.Enter(stream, src, object));
  // READY is stored on the device right after the last byte, in stream
  // order: a device reader spinning on the header sees the object before
  // kvd hears of the commit. result nullptr: kvd's Commit is the verdict.
  NANOKV_RETURN_IF_ERROR(kernels::StorePagesAndCommit(src, object.segments.data(), object.segments.size(),
                                                      object.header, object.epoch, nullptr, stream));
  return kernels::Synchronize(stream);
}

Status LoadWithKernels(void* dst, const ObjectPieces& object, void* stream) {
  OnDevice on;
  NANOKV_RETURN_IF_ERROR(on.Enter(stream, dst, object));
  NANOKV_RETURN_IF_ERROR(kernels::LoadPages(dst, object.segments.data(), object.segments.size(), stream));
  return kernels::Synchronize(stream);
}

}  // namespace nanokv::client
