// ObjectStore's batch forms of the device put and get (nanokv/object_store.h):
// the single calls in order, since kvd's protocol has no batch message.
#include <vector>

#include "nanokv/object_store.h"

namespace nanokv {

std::vector<Status> ObjectStore::BatchPutFromDevice(std::span<const DevicePut> items, int preferred_device,
                                                    void* stream) {
  std::vector<Status> out;
  out.reserve(items.size());
  for (const DevicePut& item : items) {
    out.push_back(PutFromDevice(item.key, item.src, item.bytes, preferred_device, stream));
  }
  return out;
}

std::vector<Result<uint64_t>> ObjectStore::BatchGetToDevice(std::span<const DeviceGet> items, void* stream) {
  std::vector<Result<uint64_t>> out;
  out.reserve(items.size());
  for (const DeviceGet& item : items) out.push_back(GetToDevice(item.key, item.dst, item.capacity, stream));
  return out;
}

}  // namespace nanokv
