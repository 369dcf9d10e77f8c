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

// nanokv::StateEpochWord and the like, for device code (constexpr host
// functions are not callable from kernels without nvcc's relaxed constexpr).
__device__ inline std::uint64_t DeviceStateEpochWord(ObjectState state, std::uint32_t epoch) {
  return (static_cast<std::uint64_t>(epoch) << 32) | static_cast<std::uint32_t>(state);
}
__device__ inline std::uint32_t DeviceEpochOfWord(std::uint64_t word) { return static_cast<std::uint32_t>(word >> 32); }
__device__ inline std::uint32_t DeviceStateOfWord(std::uint64_t word) { return static_cast<std::uint32_t>(word); }
__device__ inline bool DeviceEpochIsNewer(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) > 0;
}

// {state, epoch} of the header, as one word (StateEpochWord's layout).
__device__ inline std::uint64_t* StateEpochOf(ObjectHeader* h) {
  return reinterpret_cast<std::uint64_t*>(&h->state);
}

// Acquire of {state, epoch}: READY at the reader's epoch is its object;
// READY at another epoch is the slot's previous or next one.
__device__ inline std::uint64_t LoadStateEpochAcquire(const ObjectHeader* h) {
  return gpu_compat::LoadAcquireSystem(reinterpret_cast<const std::uint64_t*>(&h->state));
}

// The producer's header write, before its payload (nanokv/object_header.h):
// {any state, an older epoch} -> {WRITING, writing.epoch} in one CAS, then
// the other fields. A slot already at {WRITING, writing.epoch} (begun by a
// copy of libkv's) is fine. A newer epoch (or READY at ours) means this
// plan's object is gone (reclaimed past write_timeout, the slot given on):
// nothing is written, kWrongEpoch. Call from ONE thread. *epoch_seen: the
// slot's epoch.
__device__ inline std::uint32_t BeginWriteDevice(ObjectHeader* h, const ObjectHeader& writing,
                                                 std::uint32_t* epoch_seen) {
  const std::uint64_t mine = DeviceStateEpochWord(ObjectState::kWriting, writing.epoch);
  std::uint64_t seen = LoadStateEpochAcquire(h);
  while (seen != mine) {
    if (!DeviceEpochIsNewer(writing.epoch, DeviceEpochOfWord(seen))) {
      *epoch_seen = DeviceEpochOfWord(seen);
      return static_cast<std::uint32_t>(CommitCode::kWrongEpoch);
    }
    if (gpu_compat::CasReleaseSystem(StateEpochOf(h), &seen, mine)) break;
  }
  *epoch_seen = writing.epoch;
  h->key_hash = writing.key_hash;
  h->n_pages = writing.n_pages;
  h->page_bytes = writing.page_bytes;
  h->payload_base = writing.payload_base;
  h->bytes_total = writing.bytes_total;
  h->last_access = writing.last_access;
  h->flags = writing.flags;
  h->store_blocks = static_cast<std::uint64_t>(writing.epoch) << 32;  // kv_put_object's count, restarted
  return static_cast<std::uint32_t>(CommitCode::kCommitted);
}

// Publishes READY for a slot still in WRITING at `epoch`: {WRITING, epoch}
// -> {READY, epoch} in one CAS, so a slot the epoch no longer names is never
// touched. Call from ONE thread, after every payload store of the object is
// done: in a later launch on the same stream, or after a grid-wide barrier.
// Returns a CommitCode; *state_seen gets the state found (READY on success).
__device__ inline std::uint32_t CommitReadyDevice(ObjectHeader* h, std::uint32_t epoch,
                                                  std::uint32_t* state_seen) {
  // Make the earlier stores (this grid's and, through stream order, earlier
  // grids') visible at system scope before the flag; the release below
  // orders them again for the reader's acquire.
  __threadfence_system();
  std::uint64_t expected = DeviceStateEpochWord(ObjectState::kWriting, epoch);
  if (gpu_compat::CasReleaseSystem(StateEpochOf(h), &expected, DeviceStateEpochWord(ObjectState::kReady, epoch))) {
    *state_seen = static_cast<std::uint32_t>(ObjectState::kReady);
    return static_cast<std::uint32_t>(CommitCode::kCommitted);
  }
  *state_seen = DeviceStateOfWord(expected);
  return static_cast<std::uint32_t>(DeviceEpochOfWord(expected) != epoch ? CommitCode::kWrongEpoch
                                                                   : CommitCode::kWrongState);
}

// One block of kv_put_object's store is done: counts it in the header's
// store_blocks, which the begin (an earlier launch on the stream) set to
// {epoch, 0}. True for the block that completes `total`, the grid's last,
// which may publish READY (CommitReadyDevice's system-scope fence and
// release then carry every block's stores, by causality, to a reader in
// another process or on the host). One atomic add at device scope, no CAS loop: hundreds of blocks
// retrying a CAS on one word at system scope cost 250 µs a 1 MiB put on an
// H200 (BENCHMARKS.md, 2026-11-26). A block that finds another epoch's count
// (the slot was given on) adds nothing. Call from ONE thread of the block,
// after a __syncthreads and a fence that follow the block's stores.
__device__ inline bool CountStoreBlockDevice(ObjectHeader* h, std::uint32_t epoch, std::uint32_t total) {
  if (DeviceEpochOfWord(gpu_compat::LoadAcquireSystem(&h->store_blocks)) != epoch) return false;
  const std::uint64_t before = gpu_compat::AddAcqRelDevice(&h->store_blocks, std::uint64_t{1});
  return DeviceEpochOfWord(before) == epoch && static_cast<std::uint32_t>(before) + 1 == total;
}

}  // namespace nanokv::kernels

#endif  // NANOKV_KERNELS_OBJECT_STATE_CUH_
