// The write half of a v2 slab put (issue 34), for a producer's own kernel:
// the header an allocation gets, begun before the payload and published
// READY after it, as a v1 put's (nanokv/object_header.h), then the
// announce (nanokv/device/slab.h). One thread per object calls these:
//
//   SlabAllocation at;                                   // slab.h
//   if (AllocateInSlab(cursor, ring, n, &at) != SlabCode::kOk) ...;
//   ObjectHeader h = SlabHeader(geometry, at, n, key_hash);
//   if (!BeginInSlab(geometry.headers + at.header_slot, h)) ...;  // the slot is gone
//   ... n bytes at geometry.payload + at.payload_offset (this thread, or its
//       block before a __syncthreads) ...
//   PublishInSlab(geometry.headers + at.header_slot, h.epoch);
//   Announce(ring, *cursor, at, n, key_hash, h.epoch, key, key_bytes);
//
// or, where the bytes are already in device memory, PutInSlabBlock (every
// thread of a block calls it) does all of it.
//
// The {state, epoch} word moves as v1's does: {an older epoch} -> {WRITING,
// epoch} before any payload byte, {WRITING, epoch} -> {READY, epoch} with a
// release at system scope after the last, so a producer stalled past its
// slab's end finds the slot given on and writes nothing more, and a reader
// that acquires READY sees every byte. Host code (the host backend's
// producers are threads: the compiler's __atomic builtins, the same orders)
// and, under nvcc or hipcc, device code.
#ifndef NANOKV_DEVICE_SLAB_PUBLISH_H_
#define NANOKV_DEVICE_SLAB_PUBLISH_H_

#include <cstdint>

#include "nanokv/device/slab.h"
#include "nanokv/object_header.h"

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>  // threadIdx, __syncthreads, uint4 (nvcc has them built in)
#endif
#if defined(__CUDACC__) || defined(__HIPCC__)
#define NANOKV_SLAB_PUBLISH_FN __host__ __device__ inline
#else
#define NANOKV_SLAB_PUBLISH_FN inline
#endif

namespace nanokv::device {

// Where a slab lies, as its producer maps it (ObjectSlab::geometry()):
// plain values a kernel takes by value.
struct SlabGeometry {
  char* payload;               // the slab's first payload byte
  ObjectHeader* headers;       // its header slots, consecutive
  std::uint64_t store_offset;  // the payload's offset in the owner's store range
  std::uint32_t page_bytes;    // the store's pages
  std::uint32_t first_epoch;   // slot i's epoch is first_epoch + i
};

// The header of `bytes` at `at` with key hash `key_hash`, WRITING at its
// slot's epoch: what BeginInSlab stores.
NANOKV_SLAB_PUBLISH_FN ObjectHeader SlabHeader(const SlabGeometry& slab, const SlabAllocation& at, std::uint64_t bytes,
                                               std::uint64_t key_hash) {
  const std::uint64_t base = slab.store_offset + at.payload_offset;
  ObjectHeader h{};
  h.key_hash = key_hash;
  h.page_bytes = slab.page_bytes;
  h.payload_base = base;
  h.bytes_total = bytes;
  h.n_pages =
      bytes == 0 ? 0 : static_cast<std::uint32_t>((base + bytes - 1) / slab.page_bytes - base / slab.page_bytes + 1);
  h.state = static_cast<std::uint32_t>(ObjectState::kWriting);
  h.epoch = slab.first_epoch + at.header_slot;
  return h;
}

namespace detail {

// The {state, epoch} word of a header (little-endian, state low).
NANOKV_SLAB_PUBLISH_FN std::uint64_t* WordOf(ObjectHeader* h) { return reinterpret_cast<std::uint64_t*>(&h->state); }

NANOKV_SLAB_PUBLISH_FN std::uint64_t Word(std::uint32_t state, std::uint32_t epoch) {
  return (static_cast<std::uint64_t>(epoch) << 32) | state;
}

// 64-bit CAS at system scope (the header may be read from the host or
// another GPU): relaxed, or with release on success.
NANOKV_SLAB_PUBLISH_FN bool CasWord(std::uint64_t* p, std::uint64_t* expected, std::uint64_t desired, bool release) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> a(*p);
  return a.compare_exchange_strong(*expected, desired,
                                   release ? cuda::std::memory_order_release : cuda::std::memory_order_relaxed,
                                   cuda::std::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return release ? __hip_atomic_compare_exchange_strong(p, expected, desired, __ATOMIC_RELEASE, __ATOMIC_RELAXED,
                                                        __HIP_MEMORY_SCOPE_SYSTEM)
                 : __hip_atomic_compare_exchange_strong(p, expected, desired, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                                        __HIP_MEMORY_SCOPE_SYSTEM);
#else
  return __atomic_compare_exchange_n(p, expected, desired, false, release ? __ATOMIC_RELEASE : __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED);
#endif
}

NANOKV_SLAB_PUBLISH_FN std::uint64_t LoadWord(std::uint64_t* p) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> a(*p);
  return a.load(cuda::std::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

}  // namespace detail

// Takes the slot for `writing` ({an older epoch, any state} -> {WRITING,
// writing.epoch}) and stores its other fields. false: the slot holds this
// epoch READY or a newer one (the slab ended and the slot was given on),
// and nothing was stored: write no payload, announce nothing.
NANOKV_SLAB_PUBLISH_FN bool BeginInSlab(ObjectHeader* slot, const ObjectHeader& writing) {
  const std::uint64_t mine = detail::Word(static_cast<std::uint32_t>(ObjectState::kWriting), writing.epoch);
  std::uint64_t seen = detail::LoadWord(detail::WordOf(slot));
  while (seen != mine) {
    const auto epoch = static_cast<std::uint32_t>(seen >> 32);
    if (static_cast<std::int32_t>(writing.epoch - epoch) <= 0) return false;
    if (detail::CasWord(detail::WordOf(slot), &seen, mine, /*release=*/false)) break;
  }
  slot->key_hash = writing.key_hash;
  slot->n_pages = writing.n_pages;
  slot->page_bytes = writing.page_bytes;
  slot->payload_base = writing.payload_base;
  slot->bytes_total = writing.bytes_total;
  slot->last_access = 0;
  slot->flags = writing.flags;
  slot->store_blocks = 0;
  return true;
}

// {WRITING, epoch} -> {READY, epoch} with a release at system scope: every
// payload store that happens-before this call (the caller's own, or its
// block's before a __syncthreads) is seen by a reader that acquires READY.
// false: the slot is no longer this write's; announce nothing.
NANOKV_SLAB_PUBLISH_FN bool PublishInSlab(ObjectHeader* slot, std::uint32_t epoch) {
  std::uint64_t expected = detail::Word(static_cast<std::uint32_t>(ObjectState::kWriting), epoch);
  return detail::CasWord(detail::WordOf(slot), &expected,
                         detail::Word(static_cast<std::uint32_t>(ObjectState::kReady), epoch), /*release=*/true);
}

#if defined(__CUDACC__) || defined(__HIPCC__)
// A whole put by one thread block, from `src` (device memory the block
// reads): every thread of the block calls it with the same arguments, and
// each gets the same answer. Thread 0 allocates and begins the header, the
// block copies (16-byte vectors where src and the slab agree mod 16), thread
// 0 publishes READY and announces. kRingFull: nothing taken (kvd has not
// read a ring's length back yet; try again). kSlabFull: the slab is spent.
// kBadSize: zero bytes or a bad key. The slot found given on (the slab
// ended): kSlabFull, nothing written.
__device__ inline SlabCode PutInSlabBlock(SlabCursor* cursor, const AnnounceRing& ring, const SlabGeometry& slab,
                                          const void* src, std::uint64_t bytes, std::uint64_t key_hash, const char* key,
                                          std::uint32_t key_bytes) {
  __shared__ SlabAllocation at;
  __shared__ SlabCode code;
  __shared__ std::uint32_t epoch;
  if (threadIdx.x == 0) {
    code = key_bytes == 0 || key_bytes > kMaxAnnouncedKeyBytes ? SlabCode::kBadSize
                                                               : AllocateInSlab(cursor, ring, bytes, &at);
    if (code == SlabCode::kOk) {
      const ObjectHeader writing = SlabHeader(slab, at, bytes, key_hash);
      epoch = writing.epoch;
      if (!BeginInSlab(slab.headers + at.header_slot, writing)) {
        detail::AnnounceVoid(ring, *cursor, at.ring_index);
        code = SlabCode::kSlabFull;
      }
    }
  }
  __syncthreads();
  const SlabCode answer = code;
  if (answer != SlabCode::kOk) {
    __syncthreads();  // every thread has read `code` before a next call rewrites it
    return answer;
  }
  char* dst = slab.payload + at.payload_offset;
  const char* from = static_cast<const char*>(src);
  if (((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(from)) & 15u) == 0) {
    // Four independent 16-byte loads in flight per thread, then the rest.
    const std::uint64_t n16 = bytes / 16, step = blockDim.x;
    const auto* s4 = reinterpret_cast<const uint4*>(from);
    auto* d4 = reinterpret_cast<uint4*>(dst);
    std::uint64_t i = threadIdx.x;
    for (; i + 3 * step < n16; i += 4 * step) {
      const uint4 a = s4[i], b = s4[i + step], c = s4[i + 2 * step], d = s4[i + 3 * step];
      d4[i] = a;
      d4[i + step] = b;
      d4[i + 2 * step] = c;
      d4[i + 3 * step] = d;
    }
    for (; i < n16; i += step) d4[i] = s4[i];
    for (std::uint64_t j = n16 * 16 + threadIdx.x; j < bytes; j += step) dst[j] = from[j];
  } else {
    for (std::uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = from[i];
  }
  __syncthreads();  // the block's stores, seen by thread 0: its release carries them
  if (threadIdx.x == 0) {
    if (PublishInSlab(slab.headers + at.header_slot, epoch)) {
      code = Announce(ring, *cursor, at, bytes, key_hash, epoch, key, key_bytes);
    } else {
      detail::AnnounceVoid(ring, *cursor, at.ring_index);
      code = SlabCode::kSlabFull;
    }
  }
  __syncthreads();
  const SlabCode done = code;
  __syncthreads();
  return done;
}
#endif

}  // namespace nanokv::device

#undef NANOKV_SLAB_PUBLISH_FN

#endif  // NANOKV_DEVICE_SLAB_PUBLISH_H_
