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

// {any state, an older epoch} -> {WRITING, epoch} in one CAS; a slot
// already at {WRITING, epoch} is fine (another block of the same launch, or
// a copy of libkv's, began it). A newer epoch (or READY at ours) means this
// plan's object is gone (reclaimed past write_timeout, the slot given on):
// kWrongEpoch, and the caller writes nothing. *epoch_seen: the slot's epoch.
// Every block of kv_put_object's one launch calls it: the first CAS wins,
// the others fail once and find the word done (no retry loop on a word
// every block writes: BENCHMARKS.md, 2026-11-26, 250 µs). Relaxed, load and
// CAS: WRITING publishes nothing (readers act on READY only), and an
// acquire or release here put a fence in every block (0.5-0.8 µs a 1 MiB
// put on an H200, BENCHMARKS.md 2026-11-26 fourth session).
__device__ inline std::uint32_t JoinWriteDevice(ObjectHeader* h, std::uint32_t epoch, std::uint32_t* epoch_seen) {
  const std::uint64_t mine = DeviceStateEpochWord(ObjectState::kWriting, epoch);
  std::uint64_t seen = gpu_compat::LoadRelaxedSystem(StateEpochOf(h));
  while (seen != mine) {
    if (!DeviceEpochIsNewer(epoch, DeviceEpochOfWord(seen))) {
      *epoch_seen = DeviceEpochOfWord(seen);
      return static_cast<std::uint32_t>(CommitCode::kWrongEpoch);
    }
    if (gpu_compat::CasRelaxedSystem(StateEpochOf(h), &seen, mine)) break;
  }
  *epoch_seen = epoch;
  return static_cast<std::uint32_t>(CommitCode::kCommitted);
}

// The header's other fields, once the slot is this write's (JoinWriteDevice).
__device__ inline void WriteHeaderFieldsDevice(ObjectHeader* h, const ObjectHeader& writing) {
  h->key_hash = writing.key_hash;
  h->n_pages = writing.n_pages;
  h->page_bytes = writing.page_bytes;
  h->payload_base = writing.payload_base;
  h->bytes_total = writing.bytes_total;
  h->last_access = writing.last_access;
  h->flags = writing.flags;
}

// The producer's header write, before its payload (nanokv/object_header.h):
// JoinWriteDevice, then the other fields, in a launch of its own. Call from
// ONE thread.
__device__ inline std::uint32_t BeginWriteDevice(ObjectHeader* h, const ObjectHeader& writing,
                                                 std::uint32_t* epoch_seen) {
  const std::uint32_t code = JoinWriteDevice(h, writing.epoch, epoch_seen);
  if (code != static_cast<std::uint32_t>(CommitCode::kCommitted)) return code;
  WriteHeaderFieldsDevice(h, writing);
  h->store_blocks = static_cast<std::uint64_t>(writing.epoch) << 32;  // kv_put_object's count, restarted
  return code;
}

// Publishes READY for a slot still in WRITING at `epoch`: {WRITING, epoch}
// -> {READY, epoch} in one CAS with release at system scope, so a slot the
// epoch no longer names is never touched. Call from ONE thread, after every
// payload store of the object happens-before it: kv_put_object's last block,
// which acquired every other block's count. Returns a CommitCode;
// *state_seen gets the state found (READY on success).
__device__ inline std::uint32_t PublishReadyDevice(ObjectHeader* h, std::uint32_t epoch,
                                                   std::uint32_t* state_seen) {
  std::uint64_t expected = DeviceStateEpochWord(ObjectState::kWriting, epoch);
  if (gpu_compat::CasReleaseSystem(StateEpochOf(h), &expected, DeviceStateEpochWord(ObjectState::kReady, epoch))) {
    *state_seen = static_cast<std::uint32_t>(ObjectState::kReady);
    return static_cast<std::uint32_t>(CommitCode::kCommitted);
  }
  *state_seen = DeviceStateOfWord(expected);
  return static_cast<std::uint32_t>(DeviceEpochOfWord(expected) != epoch ? CommitCode::kWrongEpoch
                                                                   : CommitCode::kWrongState);
}

// PublishReadyDevice for stores that reach it only through stream order (a
// later launch, kv_commit_ready): a system-scope fence first makes them
// visible at system scope before the flag.
__device__ inline std::uint32_t CommitReadyDevice(ObjectHeader* h, std::uint32_t epoch,
                                                  std::uint32_t* state_seen) {
  __threadfence_system();
  return PublishReadyDevice(h, epoch, state_seen);
}

// One block of kv_put_object's store is done: counts it in the header's
// store_blocks, {epoch, blocks done}. True for the block that completes
// `total`, the grid's last, which may publish READY (PublishReadyDevice's
// release at system scope then carries every block's stores, by causality:
// each block's release here, this block's acquire, to a reader in another
// process, on another GPU or on the host). The first
// block of this write to count finds an older epoch's count (the slot's
// previous object, or nothing) and restarts it at {epoch, 1} with a CAS; the
// others add to it, one atomic at device scope each, no CAS loop: hundreds
// of blocks retrying a CAS on one word at system scope cost 250 µs a 1 MiB
// put on an H200 (BENCHMARKS.md, 2026-11-26). A block that finds a newer
// epoch's count (the slot was given on) adds nothing. Call from ONE thread
// of the block, after a __syncthreads that follows the block's stores: the
// count's release carries them (the barrier showed them to this thread),
// so no fence of its own is needed, and the last block's acquire sees them.
__device__ inline bool CountStoreBlockDevice(ObjectHeader* h, std::uint32_t epoch, std::uint32_t total) {
  std::uint64_t seen = gpu_compat::LoadRelaxedDevice(&h->store_blocks);
  while (DeviceEpochOfWord(seen) != epoch) {
    if (DeviceEpochIsNewer(DeviceEpochOfWord(seen), epoch)) return false;
    if (gpu_compat::CasAcqRelDevice(&h->store_blocks, &seen, (static_cast<std::uint64_t>(epoch) << 32) | 1u)) {
      return total == 1;
    }
  }
  const std::uint64_t before = gpu_compat::AddAcqRelDevice(&h->store_blocks, std::uint64_t{1});
  return DeviceEpochOfWord(before) == epoch && static_cast<std::uint32_t>(before) + 1 == total;
}

}  // namespace nanokv::kernels

#endif  // NANOKV_KERNELS_OBJECT_STATE_CUH_
