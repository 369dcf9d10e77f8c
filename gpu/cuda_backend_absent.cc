// Built when no CUDA toolkit headers were found: the cuda backend is absent.
#include "gpu/backend.h"

namespace nanokv::gpu {

Result<std::unique_ptr<Backend>> MakeCudaBackend() {
  return Status::Unavailable("cuda backend not built: no CUDA toolkit headers at build time");
}

}  // namespace nanokv::gpu
