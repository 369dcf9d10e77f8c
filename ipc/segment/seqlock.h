// The seqlock over a Segment in shared memory: one writer, any number of
// readers in other processes, readers never block the writer.
//
// Writer (SeqlockPublish):              Reader (SeqlockTryRead):
//   seq.store(s + 1, relaxed)             s1 = seq.load(acquire)
//   payload: word stores, release         if s1 is odd: fail
//   seq.store(s + 2, release)             payload: word loads, acquire
//                                         s2 = seq.load(relaxed); ok iff s1 == s2
// Why it is right (Boehm, "Can seqlocks get along with programming language
// memory models?", 2012): if any payload load saw a store of a publish that
// the reader's s1 did not cover, that release store synchronizes with the
// acquire load, so the writer's s + 1 (sequenced before it) happens before
// the reader's s2 load (sequenced after it) and s2 != s1: the copy is thrown
// away. If s2 == s1 (even), every word came from the publish that wrote s1.
//
// Boehm's paper puts one release fence after s + 1 and one acquire fence
// before s2, with relaxed payload accesses. Per-word release/acquire says the
// same without fences, which ThreadSanitizer does not model (g++ refuses
// atomic_thread_fence under -fsanitize=thread with -Werror, and TSan would
// not see the ordering). The cost is nil where it matters: on x86-64 a
// release store and an acquire load of an aligned word are plain moves; on
// AArch64 they are stlr/ldar, a few microseconds more over 68 KiB.
//
// Why word-wise atomics rather than memcpy: readers copy while the writer may
// be writing, which is a data race (undefined behaviour) with plain accesses
// even though the result is discarded, and the compiler may tear or re-read a
// plain access. std::atomic_ref (C++20) gives atomics on memory we did not
// declare atomic: the segment's words are plain uint64_t (see layout.h).
//
// Readers in other processes (kvctl, libkv) do not map the segment: its
// owner could truncate it under them, and a load past the end of a mapping is
// SIGBUS. They copy it with pread instead (shm_file.h, SegmentFile): seq, the
// whole segment, seq again, with ReadBarrier between, which stands for the
// acquire side of the argument above (the kernel's copy is plain loads).
//
// Word access to the shared mapping: the segment is only ever accessed as an
// array of uint64_t words through these functions (implicit-lifetime objects in
// mmap'ed memory); the private Segment on either side is read or written
// through memcpy of one word, so nothing is accessed through a wrong type.
#ifndef NANOKV_IPC_SEGMENT_SEQLOCK_H_
#define NANOKV_IPC_SEGMENT_SEQLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ipc/segment/layout.h"

namespace nanokv::ipc {

inline constexpr size_t kSegmentWords = sizeof(Segment) / sizeof(uint64_t);
inline constexpr size_t kSeqWord = offsetof(SegmentHeader, seq) / sizeof(uint64_t);
inline constexpr size_t kMagicWord = offsetof(SegmentHeader, magic) / sizeof(uint64_t);

// One word of the shared mapping as an atomic. The mapping may be read-only
// in a reader: a lock-free relaxed or acquire load of an aligned 64-bit word is
// a plain load (layout.h asserts lock-freedom), never a write, so the
// const_cast that std::atomic_ref's C++20 signature requires is safe.
inline std::atomic_ref<uint64_t> SharedWord(const void* base, size_t index) {
  auto* words = static_cast<uint64_t*>(const_cast<void*>(base));
  return std::atomic_ref<uint64_t>(words[index]);
}

inline uint64_t LoadSeq(const void* shared, std::memory_order order) {
  return SharedWord(shared, kSeqWord).load(order);
}

// Orders the loads before it (a pread's copy) before the loads after it, as
// an acquire fence would. x86-64 never reorders loads with loads, so only the
// compiler must be kept from moving them; AArch64 needs a load barrier.
// (Not std::atomic_thread_fence: g++ refuses it under TSan with -Werror.)
inline void ReadBarrier() {
#if defined(__aarch64__)
  asm volatile("dmb ishld" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

// Copies `staged` into the shared segment under the seqlock. Every word but
// `seq` is written, so `staged.header.seq` is ignored.
// REQUIRES: the caller is the segment's only writer and no other thread of it
// publishes concurrently (SegmentWriter holds its mutex).
inline void SeqlockPublish(void* shared, const Segment& staged) {
  const uint64_t s = LoadSeq(shared, std::memory_order_relaxed);  // only we write it
  SharedWord(shared, kSeqWord).store(s + 1, std::memory_order_relaxed);
  const auto* src = reinterpret_cast<const unsigned char*>(&staged);
  for (size_t i = 0; i < kSegmentWords; ++i) {
    if (i == kSeqWord) continue;
    uint64_t word;
    std::memcpy(&word, src + i * sizeof(uint64_t), sizeof(word));
    SharedWord(shared, i).store(word, std::memory_order_release);
  }
  SharedWord(shared, kSeqWord).store(s + 2, std::memory_order_release);
}

// One attempt at a stable copy of the shared segment into *out. Returns false
// (and *out holds garbage) if a publish was in progress or completed during the
// copy; the caller retries. Never writes the shared segment, never waits.
// REQUIRES: `shared` maps at least sizeof(Segment) bytes.
inline bool SeqlockTryRead(const void* shared, Segment* out) {
  const uint64_t s1 = LoadSeq(shared, std::memory_order_acquire);
  if (s1 & 1) return false;
  auto* dst = reinterpret_cast<unsigned char*>(out);
  for (size_t i = 0; i < kSegmentWords; ++i) {
    const uint64_t word = SharedWord(shared, i).load(std::memory_order_acquire);
    std::memcpy(dst + i * sizeof(uint64_t), &word, sizeof(word));
  }
  const uint64_t s2 = LoadSeq(shared, std::memory_order_relaxed);
  return s1 == s2;
}

}  // namespace nanokv::ipc

#endif  // NANOKV_IPC_SEGMENT_SEQLOCK_H_
