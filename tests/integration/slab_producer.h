// A v2 slab producer on the host, for the integration tests (kvd_slabs_test,
// object_peer's slab-abandon): what a kernel does per put (nanokv/device/
// slab.h), here with the backend's copies: allocate in the slab, the bytes,
// the READY header, then (unless told not to) the announce. No request to kvd.
#ifndef NANOKV_TESTS_INTEGRATION_SLAB_PRODUCER_H_
#define NANOKV_TESTS_INTEGRATION_SLAB_PRODUCER_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "gpu/backend.h"
#include "nanokv/device/slab.h"
#include "nanokv/object_store.h"

namespace nanokv::testing {

inline Status SlabPut(ObjectSlab& slab, gpu::Backend& backend, std::string_view key, std::span<const std::byte> bytes,
                      bool announce = true) {
  device::SlabAllocation at{};
  const device::SlabCode code = device::AllocateInSlab(slab.cursor(), slab.ring(), bytes.size(), &at);
  if (code != device::SlabCode::kOk) {
    return Status::ResourceExhausted("slab allocation: code " + std::to_string(static_cast<int>(code)));
  }
  void* payload = static_cast<std::byte*>(slab.payload()) + at.payload_offset;
  NANOKV_RETURN_IF_ERROR(backend.Copy(payload, bytes.data(), bytes.size(), gpu::CopyKind::kHostToDevice));
  const ObjectHeader header = slab.ReadyHeader(at, bytes.size(), key);
  NANOKV_RETURN_IF_ERROR(
      backend.Copy(slab.header(at.header_slot), &header, sizeof(header), gpu::CopyKind::kHostToDevice));
  if (!announce) return Status::OK();
  const device::SlabCode told = device::Announce(slab.ring(), *slab.cursor(), at, bytes.size(), header.key_hash,
                                                 header.epoch, key.data(), static_cast<uint32_t>(key.size()));
  return told == device::SlabCode::kOk ? Status::OK() : Status::InvalidArgument("announce refused its key");
}

}  // namespace nanokv::testing

#endif  // NANOKV_TESTS_INTEGRATION_SLAB_PRODUCER_H_
