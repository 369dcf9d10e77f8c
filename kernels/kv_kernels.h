// Host-side launchers for the device code in kernels/: plain C++, no CUDA
// headers, so libkv, kvd and the C ABI call them without nvcc. Streams are
// passed as void* (a cudaStream_t, or nullptr for the legacy default stream);
// every pointer argument is a device pointer (or memory the device can reach:
// a peer GPU's mapped pages, host-mapped memory) unless said otherwise.
//
// Each launcher checks its arguments (kInvalidArgument, nothing launched),
// then enqueues and returns without waiting; a launch error comes back as
// kInternal naming the runtime's error (e.g. "cudaErrorInvalidDevicePointer").
// Faults while the kernel runs surface at the next synchronisation, as usual.
// Built only where the CUDA toolkit is (CMake option NANOKV_CUDA_KERNELS, the
// library nanokv_kernels); code that must build without it lives elsewhere.
#ifndef NANOKV_KERNELS_KV_KERNELS_H_
#define NANOKV_KERNELS_KV_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "nanokv/object_header.h"
#include "nanokv/status.h"

namespace nanokv::kernels {

// ---------------------------------------------------------------------------
// Paged K/V append (vLLM's reshape_and_cache), for one layer.

enum class KvDType : std::uint32_t { kFloat16 = 0, kBFloat16 = 1 };

// Where a layer's K (or V) cache lives: element (block, head, slot_in_block, d)
// is at base[block * block_stride + head * head_stride + slot_in_block *
// head_dim + d] (strides in elements). Both layouts of the KV cache fit:
//   block-major [num_blocks, num_heads, block_size, head_dim] and
//   head-major  [num_heads, num_blocks, block_size, head_dim].
struct PagedLayout {
  std::int64_t num_blocks = 0;
  std::int64_t num_heads = 0;
  std::int64_t block_size = 0;  // tokens per block
  std::int64_t head_dim = 0;
  std::int64_t block_stride = 0;  // elements
  std::int64_t head_stride = 0;   // elements

  static PagedLayout BlockMajor(std::int64_t blocks, std::int64_t heads, std::int64_t block_size,
                                std::int64_t head_dim) {
    return {blocks, heads, block_size, head_dim, heads * block_size * head_dim,
            block_size * head_dim};
  }
  static PagedLayout HeadMajor(std::int64_t blocks, std::int64_t heads, std::int64_t block_size,
                               std::int64_t head_dim) {
    return {blocks, heads, block_size, head_dim, block_size * head_dim,
            blocks * block_size * head_dim};
  }
};

// The new tokens: key and value are [num_tokens, num_heads, head_dim] with
// heads and head_dim contiguous in a token row; rows may be strided (a view
// of a fused QKV tensor). slot_mapping[t] = block * block_size + offset; a
// negative slot skips the token (padding).
struct AppendInput {
  const void* key = nullptr;
  const void* value = nullptr;
  std::int64_t key_token_stride = 0;    // elements between token rows
  std::int64_t value_token_stride = 0;  // elements between token rows
  const std::int64_t* slot_mapping = nullptr;
  std::int64_t num_tokens = 0;
  KvDType dtype = KvDType::kFloat16;
};

// Optional: counts tokens whose slot is >= num_blocks * block_size (they are
// skipped, never written). A device int; nullptr to not count.
struct AppendDiagnostics {
  int* bad_slots = nullptr;
};

// fp16/bf16 in, the same dtype in the cache: a byte-exact copy, 16-byte
// accesses when head_dim * 2, the strides and every base pointer allow it.
Status PagedAppend(const AppendInput& in, const PagedLayout& layout, void* key_cache,
                   void* value_cache, void* stream, AppendDiagnostics diag = {});

// fp16/bf16 in, FP8 E4M3 in the cache with one float scale per (token, head)
// entry: scale = max|x| / 448 over the entry's head_dim values (1 when they
// are all 0), q = E4M3(x / scale) rounded to nearest even and saturated
// (kernels/fp8_e4m3.h). The scale arrays are laid out like the cache without
// head_dim: entry (block, head, slot) at scale[block * block_stride/head_dim +
// head * head_stride/head_dim + slot] (both strides must divide by head_dim).
// Error bound, per element x of an entry with maximum a:
//   |x - DecodeE4M3(q) * scale| <= max(|x| / 16, a / 458752) (+ float rounding)
// (458752 = 448 * 1024: half the subnormal step, scaled). Non-finite inputs:
// infinities saturate to +-448 * scale and do not enter the maximum; NaN stays NaN.
Status PagedAppendFp8(const AppendInput& in, const PagedLayout& layout, std::uint8_t* key_cache,
                      std::uint8_t* value_cache, float* key_scale, float* value_scale,
                      void* stream, AppendDiagnostics diag = {});

// ---------------------------------------------------------------------------
// Object pages (the object store): a contiguous buffer <-> a list of segments.

// One destination (store) or source (load) piece: `bytes` at `ptr`, which may
// be in another GPU's memory mapped here. Pieces are taken in order: piece i
// holds bytes [sum of sizes before i, + bytes) of the object.
struct Segment {
  void* ptr = nullptr;
  std::uint64_t bytes = 0;
};

// src (contiguous, sum of segment sizes) -> segments. 16-byte accesses where
// source and destination share their alignment mod 16 (bytes at the ends and
// mutually misaligned pieces go a byte at a time); source loads are streaming
// (evict-first). `segments` is a host array; it is passed by value in the
// kernel's parameters (128 per launch, more means more launches).
Status StorePages(const void* src, const Segment* segments, std::size_t n_segments, void* stream);

// segments -> dst (contiguous); the same rules, source loads streaming.
Status LoadPages(void* dst, const Segment* segments, std::size_t n_segments, void* stream);

// Several separate copies, src[i] -> dst[i] of bytes[i] each, in as few
// launches as fit (128 a launch): a batch of objects' loads, where a launch
// per object costs more host time than a small object's copy takes the GPU.
struct Copy {
  void* dst = nullptr;
  const void* src = nullptr;
  std::uint64_t bytes = 0;
};
Status CopyMany(const Copy* copies, std::size_t n, void* stream);

// One thread: the producer's header write before its payload (nanokv/
// object_header.h): {any state, an older epoch (EpochIsNewer)} -> {WRITING,
// writing.epoch} in one 64-bit CAS at system scope, then writing's other
// fields. A header already at {WRITING, writing.epoch} is left as it is.
// result (device or mapped memory, 2 x uint32, may be nullptr) gets
// {CommitCode, the slot's epoch}: kWrongEpoch when the slot holds a newer
// epoch (the plan's object was reclaimed and the slot given on) or this one
// READY, and then nothing is written.
Status BeginWrite(ObjectHeader* header, const ObjectHeader& writing, std::uint32_t* result, void* stream);

// One thread: {WRITING, epoch} -> {READY, epoch} in one 64-bit CAS with
// release at system scope. Enqueued on `stream`, it runs after all earlier
// work there (the payload stores), so a reader that loads READY with acquire
// sees every byte. result (as above) gets {CommitCode, the state found}. One
// CAS of state and epoch together: a writer stalled past write_timeout whose
// slot has been begun by the next plan finds another epoch and stores nothing.
Status CommitReady(ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result, void* stream);

// StorePages then CommitReady on the same stream.
Status StorePagesAndCommit(const void* src, const Segment* segments, std::size_t n_segments,
                           ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result,
                           void* stream);

// BeginWrite, StorePages and CommitReady in one launch (kv_put_object):
// each block makes sure the slot is this write's ({WRITING, epoch}, begun by
// the first block there) before it stores, and the last block to finish
// publishes READY; the header WRITING before any payload byte, READY after
// the last, result as CommitReady's. A block stores nothing once the slot
// names another write. Objects of more than 128 non-empty segments take the
// three launches instead.
Status PutObject(const void* src, const Segment* segments, std::size_t n_segments, ObjectHeader* header,
                 const ObjectHeader& writing, std::uint32_t* result, void* stream);

// PutObject for a v2 slab's put: after READY, the thread that published it
// stores stamp_value at `stamp` (the announce record's stamp, in host memory
// mapped for the device) with a release at system scope, so kvd learns of
// the object with no request. Nothing is stamped when READY was not
// published (the slot was given on). One launch: at most 128 segments.
Status PutObjectAnnounced(const void* src, const Segment* segments, std::size_t n_segments, ObjectHeader* header,
                          const ObjectHeader& writing, std::uint64_t* stamp, std::uint64_t stamp_value, void* stream);

// Many v2 slab puts (PutObjectAnnounced each) in as few launches as fit,
// 32 a launch: each item's header begun, its bytes stored, READY published
// and its record stamped, on `stream`. Every item is one contiguous
// destination, in pages of `page_bytes`.
struct AnnouncedPut {
  const void* src = nullptr;
  void* dst = nullptr;
  std::uint64_t bytes = 0;
  ObjectHeader* header = nullptr;
  ObjectHeader writing{};
  std::uint64_t* stamp = nullptr;
  std::uint64_t stamp_value = 0;
};
Status PutObjectsAnnounced(const AnnouncedPut* items, std::size_t n, void* stream);

// Host memory `bytes` at `host` page-locked and mapped for every device
// (cudaHostRegister, mapped and portable): the address kernels use for it
// (a v2 slab's announce ring, which kvd polls). UnregisterHost undoes it.
Result<void*> RegisterHostMapped(void* host, std::size_t bytes);
void UnregisterHost(void* host);

// One thread loads header->state with acquire at system scope and writes it
// to *state_out (device or mapped memory). Work enqueued after it on the same
// stream (a LoadPages) is ordered after that acquire.
Status ReadState(const ObjectHeader* header, std::uint32_t* state_out, void* stream);

// Waits for everything enqueued on `stream`; a fault of a kernel that ran
// there comes back as kInternal naming the runtime's error.
Status Synchronize(void* stream);

// A point in `stream`'s work: an event recorded there now (on the stream's
// device), for another thread to wait on with WaitEvent, then DestroyEvent.
Result<void*> RecordEvent(void* stream);
Status WaitEvent(void* event);
void DestroyEvent(void* event);

// A batch's launches spread over several streams of `stream`'s device (a
// pool the process keeps): each of the `ways` streams (1-8) put in
// forked[] runs after everything enqueued on `stream` so far, and
// JoinStreams makes `stream` wait for everything then enqueued on them, so
// the caller's stream order holds around the batch. Puts to a peer GPU
// overlap their header atomics this way (stream_fan.cu says how much).
constexpr int kMaxFanStreams = 8;
Status ForkStreams(void* stream, int ways, void** forked);
Status JoinStreams(void* stream, void* const* forked, int ways);

// The calling thread's current device (the runtime's), which a nullptr
// stream belongs to, and setting it.
Result<int> CurrentDevice();
Status SetCurrentDevice(int device);
// The device a stream's work runs on (nullptr: the current device); -1
// where the runtime cannot tell (HIP).
Result<int> StreamDevice(void* stream);
// The device whose memory `pointer` is: -1 for host or managed memory, or
// where the runtime cannot tell (HIP).
Result<int> PointerDevice(const void* pointer);
// What `device` may do to the memory at `pointer` when it is a VMM mapping
// (cuMemSetAccess decides there, cudaDeviceEnablePeerAccess does not reach
// it): kNotVmm for other memory and where the runtime cannot tell (HIP).
enum class MappedAccess { kNotVmm, kNone, kRead, kReadWrite };
MappedAccess MappedAccessOf(const void* pointer, int device);
// Lets kernels on the current device read and write device `peer`'s memory
// (peer-to-peer over NVLink or PCIe). OK when already enabled; the
// runtime's error (e.g. cudaErrorPeerAccessUnsupported) otherwise.
Status EnablePeerAccess(int peer);
// Whether this build carries an image of the kernels that `device` runs
// (SASS for its architecture, or PTX its driver compiles). Leaves the
// current device as it found it.
Result<bool> KernelsFit(int device);

}  // namespace nanokv::kernels

#endif  // NANOKV_KERNELS_KV_KERNELS_H_
