// ObjectStore's device transfers through kernels/ (built with nvcc only).
#include "libkv/client/object_transfer.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <cstdint>
#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

namespace nanokv::client {
namespace {

// Where the kernels run, for the length of one transfer: a device that
// reaches the object's pages (this process mapped them with access for it)
// and the caller's buffer. A stream names its device, which must reach both;
// a nullptr stream takes the first of the current device, the buffer's and
// the object's own that does. That device is made current for the call
// (CUDA refuses a launch into another device's stream) and restored after.
// A buffer on another device is reached peer-to-peer: cudaMalloc memory
// after cudaDeviceEnablePeerAccess (found on two H200s: without it a kernel
// on the object's GPU faulted the context), a VMM mapping (cuMemMap: a
// PyTorch expandable segment, another store's page) only where its owner
// gave that device access, which peer access does not change (found on two
// H100s: the load wrote a VMM buffer of GPU 0 from GPU 1 and faulted).
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

  // `writes_buffer`: the kernels write the buffer (a load), else read it.
  Status Enter(void* stream, const void* buffer, const ObjectPieces& object, bool writes_buffer) {
    NANOKV_ASSIGN_OR_RETURN(int current, kernels::CurrentDevice());
    NANOKV_ASSIGN_OR_RETURN(int buffer_device, kernels::PointerDevice(buffer));
    // -1: the runtime cannot tell (HIP), so the caller's choice stands.
    auto reaches_pages = [&](int device) {
      return device < 0 ||
             std::find(object.access.begin(), object.access.end(), device) != object.access.end();
    };
    auto reaches_buffer = [&](int device) {
      if (device < 0 || buffer_device < 0 || device == buffer_device) return true;
      switch (kernels::MappedAccessOf(buffer, device)) {
        case kernels::MappedAccess::kNotVmm: return true;  // peer access, below
        case kernels::MappedAccess::kReadWrite: return true;
        case kernels::MappedAccess::kRead: return !writes_buffer;
        case kernels::MappedAccess::kNone: return false;
      }
      return false;
    };
    // Built for a refusal only: the answered path builds no string.
    auto buffer_side = [&] {
      return " the buffer on device " + std::to_string(buffer_device) +
             " (a VMM mapping: its owner's cuMemSetAccess decides who reaches it)";
    };
    int run = -1;
    if (stream != nullptr) {
      NANOKV_ASSIGN_OR_RETURN(run, kernels::StreamDevice(stream));
      if (!reaches_pages(run)) {
        return Status::InvalidArgument(
            "object on device " + std::to_string(object.device) + ": the stream's device " +
            std::to_string(run) + " has no access to its pages here (ObjectStoreOptions::access_devices)");
      }
      if (!reaches_buffer(run)) {
        return Status::InvalidArgument("object on device " + std::to_string(object.device) +
                                       ": the stream's device " + std::to_string(run) + " cannot reach" +
                                       buffer_side());
      }
    } else {
      for (int candidate : {current, buffer_device, object.device}) {
        if (candidate >= 0 && reaches_pages(candidate) && reaches_buffer(candidate)) {
          run = candidate;
          break;
        }
      }
      if (run < 0 && buffer_device >= 0) {
        return Status::FailedPrecondition(
            "object on device " + std::to_string(object.device) + ": no device reaches both its pages and" +
            buffer_side() + "; list device " + std::to_string(buffer_device) +
            " in ObjectStoreOptions::access_devices, or give device " + std::to_string(object.device) +
            " access to the buffer");
      }
      if (run < 0) run = object.device;
    }
    if (run >= 0 && current >= 0 && run != current) {
      NANOKV_RETURN_IF_ERROR(kernels::SetCurrentDevice(run));
      previous_ = current;
    }
    if (run >= 0 && buffer_device >= 0 && buffer_device != run &&
        kernels::MappedAccessOf(buffer, run) == kernels::MappedAccess::kNotVmm) {
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

bool KernelsFitDevice(int device) {
  // Asked once per device: an answer never changes within a process.
  constexpr int kDevices = 64;
  static std::atomic<int8_t> known[kDevices] = {};  // 0 unknown, 1 fits, -1 does not
  if (device < 0 || device >= kDevices) return true;  // the launch then says
  int8_t answer = known[device].load(std::memory_order_acquire);
  if (answer != 0) return answer > 0;
  Result<bool> fits = kernels::KernelsFit(device);
  answer = !fits.ok() || *fits ? 1 : -1;  // an error: the launch will name it
  if (known[device].exchange(answer, std::memory_order_acq_rel) == 0 && answer < 0) {
    static std::once_flag warned;
    std::call_once(warned, [device] {
      spdlog::warn("nanokv objects: this build has no kernel image for device {} (it was built for other GPU "
                   "architectures: CMAKE_CUDA_ARCHITECTURES); device puts and gets copy with the driver instead, "
                   "which is slower",
                   device);
    });
  }
  return answer > 0;
}

Status StoreWithKernels(const void* src, const ObjectPieces& object, void* stream, bool wait) {
  OnDevice on;
  NANOKV_RETURN_IF_ERROR(on.Enter(stream, src, object, /*writes_buffer=*/false));
  // The header first, then READY right after the last byte, all in stream
  // order and in this process's context (kvd does no GPU work while it
  // serves: it would cost the engines a context switch): a
  // device reader spinning on the header sees the object before kvd hears
  // of the commit. result nullptr: kvd's Commit is the verdict.
  if (object.announce_stamp != nullptr) {
    NANOKV_RETURN_IF_ERROR(kernels::PutObjectAnnounced(src, object.segments.data(), object.segments.size(),
                                                       object.header, object.writing, object.announce_stamp,
                                                       object.announce_value, stream));
  } else {
    NANOKV_RETURN_IF_ERROR(kernels::PutObject(src, object.segments.data(), object.segments.size(), object.header,
                                              object.writing, nullptr, stream));
  }
  return wait || stream == nullptr ? kernels::Synchronize(stream) : Status::OK();
}

Status LoadWithKernels(void* dst, const ObjectPieces& object, void* stream, bool wait) {
  OnDevice on;
  NANOKV_RETURN_IF_ERROR(on.Enter(stream, dst, object, /*writes_buffer=*/true));
  NANOKV_RETURN_IF_ERROR(kernels::LoadPages(dst, object.segments.data(), object.segments.size(), stream));
  return wait || stream == nullptr ? kernels::Synchronize(stream) : Status::OK();
}

std::vector<Status> LoadManyWithKernels(std::span<const LoadItem> items, void* stream, bool wait) {
  std::vector<Status> out(items.size());
  // Items whose object and destination are on the same devices go in one
  // launch: the first one's checks (OnDevice) hold for all of them.
  std::map<std::pair<int, int>, std::vector<size_t>> groups;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].dst == nullptr) {
      out[i] = Status::InvalidArgument("get to device: null destination");
      continue;
    }
    Result<int> dst_device = kernels::PointerDevice(items[i].dst);
    if (!dst_device.ok()) {
      out[i] = dst_device.status();
      continue;
    }
    groups[{items[i].object->device, *dst_device}].push_back(i);
  }
  for (const auto& [devices, which] : groups) {
    OnDevice on;
    Status entered = on.Enter(stream, items[which[0]].dst, *items[which[0]].object, /*writes_buffer=*/true);
    std::vector<kernels::Copy> copies;
    for (size_t i : which) {
      copies.push_back({items[i].dst, items[i].object->payload, items[i].object->bytes});
    }
    Status loaded = entered.ok() ? kernels::CopyMany(copies.data(), copies.size(), stream) : entered;
    if (loaded.ok() && (wait || stream == nullptr)) loaded = kernels::Synchronize(stream);
    for (size_t i : which) out[i] = loaded;
  }
  return out;
}

std::vector<Status> StoreAnnouncedWithKernels(std::span<const StoreItem> items, void* stream) {
  std::vector<Status> out(items.size());
  // As LoadManyWithKernels: items on the same pair of devices in one launch.
  std::map<std::pair<int, int>, std::vector<size_t>> groups;
  for (size_t i = 0; i < items.size(); ++i) {
    Result<int> src_device = items[i].src == nullptr
                                 ? Result<int>(Status::InvalidArgument("put from device: null source"))
                                 : kernels::PointerDevice(items[i].src);
    if (!src_device.ok()) {
      out[i] = src_device.status();
      continue;
    }
    groups[{items[i].object->device, *src_device}].push_back(i);
  }
  for (const auto& [devices, which] : groups) {
    OnDevice on;
    Status stored = on.Enter(stream, items[which[0]].src, *items[which[0]].object, /*writes_buffer=*/false);
    std::vector<kernels::AnnouncedPut> puts;
    for (size_t i : which) {
      const ObjectPieces& o = *items[i].object;
      puts.push_back({items[i].src, o.payload, o.bytes, o.header, o.writing, o.announce_stamp, o.announce_value});
    }
    if (stored.ok()) stored = kernels::PutObjectsAnnounced(puts.data(), puts.size(), stream);
    if (stored.ok()) stored = kernels::Synchronize(stream);
    for (size_t i : which) out[i] = stored;
  }
  return out;
}

Status CopyManyWithKernels(std::span<const kernels::Copy> copies, void* stream, bool wait) {
  if (copies.empty()) return wait && stream != nullptr ? kernels::Synchronize(stream) : Status::OK();
  // A null stream is the current device's: the one the first buffer is on
  // for the call (a stream names its device, which the caller chose).
  int previous = -1;
  if (stream == nullptr) {
    NANOKV_ASSIGN_OR_RETURN(int current, kernels::CurrentDevice());
    Result<int> device = kernels::PointerDevice(copies[0].dst);
    if (device.ok() && *device >= 0 && *device != current) {
      NANOKV_RETURN_IF_ERROR(kernels::SetCurrentDevice(*device));
      previous = current;
    }
  }
  Status copied = kernels::CopyMany(copies.data(), copies.size(), stream);
  if (copied.ok() && (wait || stream == nullptr)) copied = kernels::Synchronize(stream);
  if (previous >= 0) {
    Status restored = kernels::SetCurrentDevice(previous);
    if (!restored.ok()) spdlog::warn("nanokv objects: restoring device {}: {}", previous, restored.ToString());
  }
  return copied;
}

Result<int> KernelPointerDevice(const void* pointer) { return kernels::PointerDevice(pointer); }
Result<void*> RegisterForKernels(void* host, size_t bytes) { return kernels::RegisterHostMapped(host, bytes); }
void UnregisterForKernels(void* host) { kernels::UnregisterHost(host); }

Status SynchronizeKernels(void* stream) { return kernels::Synchronize(stream); }
Result<void*> RecordKernelEvent(void* stream) { return kernels::RecordEvent(stream); }
Status WaitKernelEvent(void* event) { return kernels::WaitEvent(event); }
void DestroyKernelEvent(void* event) { kernels::DestroyEvent(event); }
Status ForkKernelStreams(void* stream, int ways, void** forked) { return kernels::ForkStreams(stream, ways, forked); }
Status JoinKernelStreams(void* stream, void* const* forked, int ways) {
  return kernels::JoinStreams(stream, forked, ways);
}

}  // namespace nanokv::client
