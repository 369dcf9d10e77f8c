// The prefix cache's device scratch: a chunk is one object holding every
// plane of it (each layer's K and V) end to end, while the engine keeps each
// plane in memory of its own. A store gathers the planes' pieces of a chunk
// into scratch and puts that; a load gets chunks into scratch and scatters
// them. The scratch is memory of the planes' device (the backend's VMM
// calls), kept between calls and grown up to a bound; the copies are the
// kernels' kv_copy_many (the backend's copies on host).
#ifndef NANOKV_LIBKV_PREFIX_PREFIX_STAGING_H_
#define NANOKV_LIBKV_PREFIX_PREFIX_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "gpu/backend.h"
#include "gpu/device_buffer.h"
#include "kernels/kv_kernels.h"
#include "nanokv/status.h"

namespace nanokv::prefix {

class Staging {
 public:
  // backend: the store's ("cuda", "hip", "host"); opened on first use.
  explicit Staging(std::string backend) : backend_name_(std::move(backend)) {}

  // Scratch of at least `bytes` on the device `near` is on (a plane's
  // base); valid until the next Reserve. The caller holds lock() meanwhile.
  Result<std::byte*> Reserve(const void* near, uint64_t bytes);
  // src[i] -> dst[i] on `stream`; wait: returns once they ran.
  Status Copy(std::span<const kernels::Copy> copies, void* stream, bool wait);

  std::mutex& lock() { return mu_; }

 private:
  Status Open();

  std::string backend_name_;
  std::mutex mu_;
  std::unique_ptr<gpu::Backend> backend_;
  std::unique_ptr<gpu::DeviceBuffer> scratch_;  // made with backend_: goes first
  int scratch_device_ = -1;
};

}  // namespace nanokv::prefix

#endif  // NANOKV_LIBKV_PREFIX_PREFIX_STAGING_H_
