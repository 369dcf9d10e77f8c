// Built when no HIP headers were found: the hip backend is absent.
#include "gpu/backend.h"

namespace nanokv::gpu {

Result<std::unique_ptr<Backend>> MakeHipBackend() {
  return Status::Unavailable("hip backend not built: no HIP headers at build time");
}

}  // namespace nanokv::gpu
