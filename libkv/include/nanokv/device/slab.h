// Version 2 of the seed (issue 34): objects a producer's own kernel
// allocates, writes and announces in a *slab* kvd granted it, with no
// request to kvd per object (docs/ARCHITECTURE.md, "Device allocation").
//
// A slab is a range of an owner's store (payload bytes and header slots) and
// an announce ring, granted to one producer with a budget and an expiry:
//   SlabCursor      where the slab's next payload byte, header slot and ring
//                   record are: in the producer's own memory, touched by its
//                   threads only (device-scope atomics, no cross-GPU or
//                   host atomics on the hot path). kvd never reads it.
//   AnnounceRing    kvd's memory (a sealed memfd, mapped into the producer
//                   and registered with its GPU): a header kvd writes
//                   (`consumed`) and records the producer writes, each
//                   stamped last with a release at system scope.
// A put is: AllocateInSlab (a ring record, a header slot and payload, or
// nothing), the header begun, the payload, READY (kernels/object_state.cuh,
// as v1), then Announce. kvd polls the ring (ipc/ring/announce_ring.h),
// range-checks every record against the slab it granted and indexes the
// object by the key written in the record. Anything in a record is the
// producer's word: a forged or torn one costs only its own slab.
//
// Plain C++ with fixed-width fields; the functions compile as host code
// (the compiler's __atomic builtins: the host backend's producers are
// threads, with the same orders) and, under nvcc or hipcc, as device code.
#ifndef NANOKV_DEVICE_SLAB_H_
#define NANOKV_DEVICE_SLAB_H_

#include <cstddef>
#include <cstdint>

#include "nanokv/slab_layout.h"

#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <cuda/atomic>
#endif
#if defined(__CUDACC__) || defined(__HIPCC__)
#define NANOKV_SLAB_FN __host__ __device__ inline
#else
#define NANOKV_SLAB_FN inline
#endif

namespace nanokv::device {

// The ring as the producer maps it: its header, then `records` records.
struct AnnounceRing {
  AnnounceRingHeader* header;
  AnnounceRecord* records;
};

// Where an allocation landed in the slab.
struct SlabAllocation {
  std::uint64_t ring_index;  // the record Announce fills
  std::uint32_t header_slot;
  std::uint64_t payload_offset;
};

enum class SlabCode : std::uint32_t {
  kOk = 0,
  kRingFull = 1,  // kvd has not read the ring that far yet: nothing was taken, try later
  kSlabFull = 2,  // no header slot or payload left: the slab is spent (the record says void)
  kBadSize = 3,   // zero bytes, or a key of no or too many bytes
};

namespace detail {

// Device-scope atomics on the cursor (the producer's threads, one GPU);
// system scope on the ring (kvd reads it from the host).
template <typename T>
NANOKV_SLAB_FN T AddCursor(T* p, T v) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<T, cuda::thread_scope_device> a(*p);
  return a.fetch_add(v, cuda::std::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

template <typename T>
NANOKV_SLAB_FN bool CasCursor(T* p, T* expected, T desired) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<T, cuda::thread_scope_device> a(*p);
  return a.compare_exchange_strong(*expected, desired, cuda::std::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_compare_exchange_strong(p, expected, desired, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                              __HIP_MEMORY_SCOPE_AGENT);
#else
  return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
#endif
}

template <typename T>
NANOKV_SLAB_FN T LoadCursor(const T* p) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<T, cuda::thread_scope_device> a(*const_cast<T*>(p));
  return a.load(cuda::std::memory_order_relaxed);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

// consumed_seen, as kvd's `consumed` itself: the store releases what the
// reader of `consumed` acquired (every record kvd read before), so a
// producer that finds room by it writes the record after kvd's read.
NANOKV_SLAB_FN std::uint64_t LoadSeen(const std::uint64_t* p) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> a(*const_cast<std::uint64_t*>(p));
  return a.load(cuda::std::memory_order_acquire);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

NANOKV_SLAB_FN void StoreSeen(std::uint64_t* p, std::uint64_t v) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> a(*p);
  a.store(v, cuda::std::memory_order_release);
#elif defined(__HIP_DEVICE_COMPILE__)
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

NANOKV_SLAB_FN void Pause() {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  __nanosleep(256);
#elif defined(__HIP_DEVICE_COMPILE__)
  __builtin_amdgcn_s_sleep(2);
#endif
}

NANOKV_SLAB_FN std::uint64_t LoadConsumed(const std::uint64_t* p) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> a(*const_cast<std::uint64_t*>(p));
  return a.load(cuda::std::memory_order_acquire);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

NANOKV_SLAB_FN void StoreStamp(std::uint64_t* p, std::uint64_t v) {
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system> a(*p);
  a.store(v, cuda::std::memory_order_release);
#elif defined(__HIP_DEVICE_COMPILE__)
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// The record at ring position `index` (the ring wraps).
NANOKV_SLAB_FN AnnounceRecord* RecordAt(const AnnounceRing& ring, const SlabCursor& cursor, std::uint64_t index) {
  return &ring.records[index & (cursor.ring_records - 1)];
}

// kvd's `consumed`, read over the bus, kept as the cursor's consumed_seen.
NANOKV_SLAB_FN std::uint64_t RefreshConsumed(SlabCursor* cursor, const AnnounceRing& ring) {
  const std::uint64_t consumed = LoadConsumed(&ring.header->consumed);
  StoreSeen(&cursor->consumed_seen, consumed);  // racing stores of older reads only make it conservative
  return consumed;
}

// A reserved record whose allocation failed: kvd reads past it.
NANOKV_SLAB_FN void AnnounceVoid(const AnnounceRing& ring, const SlabCursor& cursor, std::uint64_t index) {
  AnnounceRecord* r = RecordAt(ring, cursor, index);
  r->kind = static_cast<std::uint32_t>(AnnounceKind::kVoid);
  StoreStamp(&r->stamp, index + 1);
}

}  // namespace detail

// Takes a ring record, a header slot and `bytes` of payload (aligned) from
// the slab, lock-free, from any thread of the producer. kRingFull takes
// nothing; kSlabFull leaves a void record (kvd reads past it).
//
// One atomic add per field, no CAS loop: hundreds of blocks allocating at
// once each retried a CAS (and reread kvd's `consumed` over the bus) and a
// GPU put 1000 objects of 64 KiB in 227 ms (BENCHMARKS.md, 2026-11-29).
// Room in the ring is judged by consumed_seen, the producer's own copy of
// what kvd has read, and kvd's word is read only when the ring looks full.
// Producers that passed that check together may take records up to a lap
// ahead of kvd; each then waits for kvd's read before it returns, so no
// record is written over one kvd has not read.
NANOKV_SLAB_FN SlabCode AllocateInSlab(SlabCursor* cursor, const AnnounceRing& ring, std::uint64_t bytes,
                                       SlabAllocation* out) {
  if (bytes == 0 || bytes > cursor->payload_bytes) return SlabCode::kBadSize;
  const std::uint64_t records = cursor->ring_records;
  const std::uint64_t next = detail::LoadCursor(&cursor->announce_next);
  if (next - detail::LoadSeen(&cursor->consumed_seen) >= records &&
      next - detail::RefreshConsumed(cursor, ring) >= records) {
    return SlabCode::kRingFull;
  }
  const std::uint64_t index = detail::AddCursor(&cursor->announce_next, std::uint64_t{1});
  while (index - detail::LoadSeen(&cursor->consumed_seen) >= records &&
         index - detail::RefreshConsumed(cursor, ring) >= records) {
    detail::Pause();
  }
  // Looked at first so a spent slab's count stops short of wrapping.
  const std::uint32_t slot = detail::LoadCursor(&cursor->headers_next) >= cursor->header_slots
                                 ? cursor->header_slots
                                 : detail::AddCursor(&cursor->headers_next, std::uint32_t{1});
  if (slot >= cursor->header_slots) {
    detail::AnnounceVoid(ring, *cursor, index);
    return SlabCode::kSlabFull;
  }
  const std::uint64_t mask = std::uint64_t{cursor->payload_align} - 1;
  const std::uint64_t rounded = (bytes + mask) & ~mask;
  const std::uint64_t offset = detail::AddCursor(&cursor->payload_next, rounded);
  if (offset > cursor->payload_bytes || rounded > cursor->payload_bytes - offset) {
    // Given back where no allocation came after it, so a smaller object
    // may still fit; the slot too.
    std::uint64_t taken = offset + rounded;
    (void)detail::CasCursor(&cursor->payload_next, &taken, offset);
    std::uint32_t slot_taken = slot + 1;
    (void)detail::CasCursor(&cursor->headers_next, &slot_taken, slot);
    detail::AnnounceVoid(ring, *cursor, index);
    return SlabCode::kSlabFull;
  }
  *out = {index, slot, offset};
  return SlabCode::kOk;
}

// The record of an object at `where` filled, all but its stamp, which kvd
// waits for: the half of Announce a host may do before the launch whose
// last act is the stamp (ObjectStore's slab puts; kernels::
// PutObjectAnnounced). kBadSize for a key of no or too many bytes (nothing
// filled).
NANOKV_SLAB_FN SlabCode FillAnnounce(const AnnounceRing& ring, const SlabCursor& cursor, const SlabAllocation& where,
                                     std::uint64_t bytes, std::uint64_t key_hash, std::uint32_t epoch, const char* key,
                                     std::uint32_t key_bytes) {
  if (key_bytes == 0 || key_bytes > kMaxAnnouncedKeyBytes) return SlabCode::kBadSize;
  AnnounceRecord* r = detail::RecordAt(ring, cursor, where.ring_index);
  r->kind = static_cast<std::uint32_t>(AnnounceKind::kObject);
  r->header_slot = where.header_slot;
  r->payload_offset = where.payload_offset;
  r->bytes = bytes;
  r->key_hash = key_hash;
  r->epoch = epoch;
  r->key_bytes = key_bytes;
  for (std::uint32_t i = 0; i < key_bytes; ++i) r->key[i] = key[i];
  return SlabCode::kOk;
}

// Tells kvd of an object READY at `where` (its header's READY released
// first): the record's fields, then its stamp with release at system scope.
// A key kBadSize leaves the record void, so kvd reads past it.
NANOKV_SLAB_FN SlabCode Announce(const AnnounceRing& ring, const SlabCursor& cursor, const SlabAllocation& where,
                                 std::uint64_t bytes, std::uint64_t key_hash, std::uint32_t epoch, const char* key,
                                 std::uint32_t key_bytes) {
  const SlabCode filled = FillAnnounce(ring, cursor, where, bytes, key_hash, epoch, key, key_bytes);
  if (filled != SlabCode::kOk) {
    detail::AnnounceVoid(ring, cursor, where.ring_index);
    return filled;
  }
  detail::StoreStamp(&detail::RecordAt(ring, cursor, where.ring_index)->stamp, where.ring_index + 1);
  return SlabCode::kOk;
}

}  // namespace nanokv::device

#undef NANOKV_SLAB_FN

#endif  // NANOKV_DEVICE_SLAB_H_
