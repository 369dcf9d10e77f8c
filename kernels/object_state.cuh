// Device-side access to ObjectHeader::state, for kernels/ and for producers'
// own kernels that write an object's payload and publish it themselves.
// Every access is a 32-bit atomic at system scope (nanokv/object_header.h, invariant 3).
#ifndef NANOKV_KERNELS_OBJECT_STATE_CUH_
#define NANOKV_KERNELS_OBJECT_STATE_CUH_

#include <cstdint>

#include "kernels/gpu_compat.h"
#include "nanokv/object_header.h"

namespace nanokv::kernels {

// Acquire: payload reads after it (by this thread, or by its block after a
// __syncthreads) see every byte written before the READY release.
__device__ inline std::uint32_t LoadStateAcquire(const ObjectHeader* h) {
  return gpu_compat::LoadAcquireSystem(&h->state);
}

// Publishes READY for a slot still in WRITING at `epoch`. Call from ONE
// thread, after every payload store of the object is done: in a later launch
// on the same stream, or after a grid-wide barrier. Returns a CommitCode;
// *state_seen gets the state found (READY on success).
__device__ inline std::uint32_t CommitReadyDevice(ObjectHeader* h, std::uint32_t epoch,
                                                  std::uint32_t* state_seen) {
  // Make the earlier stores (this grid's and, through stream order, earlier
  // grids') visible at system scope before the flag; the release below
  // orders them again for the reader's acquire.
  __threadfence_system();
  std::uint32_t seen_epoch = *static_cast<volatile const std::uint32_t*>(&h->epoch);
  if (seen_epoch != epoch) {
    *state_seen = LoadStateAcquire(h);
    return static_cast<std::uint32_t>(CommitCode::kWrongEpoch);
  }
  std::uint32_t expected = static_cast<std::uint32_t>(ObjectState::kWriting);
  if (gpu_compat::CasReleaseSystem(&h->state, &expected,
                                   static_cast<std::uint32_t>(ObjectState::kReady))) {
    *state_seen = static_cast<std::uint32_t>(ObjectState::kReady);
    return static_cast<std::uint32_t>(CommitCode::kCommitted);
  }
  *state_seen = expected;
  return static_cast<std::uint32_t>(CommitCode::kWrongState);
}

}  // namespace nanokv::kernels

#endif  // NANOKV_KERNELS_OBJECT_STATE_CUH_
