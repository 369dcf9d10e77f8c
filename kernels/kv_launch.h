// Internal: what kv_kernels.cc (host C++) hands the .cu files. Plain structs
// passed by value as kernel parameters, functions that return the runtime's
// error code (0 = success) so the host side builds its Status without CUDA
// headers. Arguments are checked by kv_kernels.cc before they get here.
#ifndef NANOKV_KERNELS_KV_LAUNCH_H_
#define NANOKV_KERNELS_KV_LAUNCH_H_

#include <cstddef>
#include <cstdint>

#include "nanokv/object_header.h"

namespace nanokv::kernels::detail {

struct AppendArgs {
  const void* key;
  const void* value;
  std::int64_t key_token_stride;    // elements
  std::int64_t value_token_stride;  // elements
  const std::int64_t* slot_mapping;
  std::int64_t num_tokens;
  std::int64_t num_blocks;
  std::int64_t num_heads;
  std::int64_t block_size;
  std::int64_t head_dim;
  std::int64_t block_stride;  // elements of the cache
  std::int64_t head_stride;   // elements of the cache
  void* key_cache;
  void* value_cache;
  float* key_scale;    // fp8 only
  float* value_scale;  // fp8 only
  int* bad_slots;      // may be null
  std::uint32_t bf16;  // fp8 only: the input is bf16 (else fp16)
  std::uint32_t vec16; // 16-bit copy only: 16-byte accesses are allowed
};

int LaunchAppend16(const AppendArgs& args, void* stream);
int LaunchAppendFp8(const AppendArgs& args, void* stream);

// One launch's worth of segments, by value in the kernel parameters (3 KiB:
// under the 4 KiB parameter limit of every CUDA and HIP target).
inline constexpr int kSegmentsPerLaunch = 128;
struct SegmentBatch {
  void* ptr[kSegmentsPerLaunch];
  std::uint64_t bytes[kSegmentsPerLaunch];
  std::uint64_t offset[kSegmentsPerLaunch];  // in the contiguous buffer
  std::uint64_t max_bytes;                   // largest segment, sizes the grid
  std::uint64_t total_bytes;                 // of the whole object, picks work per thread
  int n;
};

// Copies of separate buffers, one per row of the grid (several objects'
// loads in one launch): 3 KiB of parameters, under every target's 4 KiB.
inline constexpr int kPairsPerLaunch = 128;
struct PairBatch {
  void* dst[kPairsPerLaunch];
  const void* src[kPairsPerLaunch];
  std::uint64_t bytes[kPairsPerLaunch];
  std::uint64_t max_bytes;
  int n;
};
int LaunchCopyPairs(const PairBatch& batch, void* stream);

// store: contiguous -> segments; else segments -> contiguous.
int LaunchCopySegments(void* contiguous, const SegmentBatch& batch, bool store, void* stream);
// Begin, store and READY in one launch (batch: the whole object); then,
// where stamp is not nullptr, *stamp = stamp_value with a release at system
// scope after READY (a v2 slab's announce record).
int LaunchPutObject(const void* contiguous, const SegmentBatch& batch, ObjectHeader* header,
                    const ObjectHeader& writing, std::uint32_t* result, std::uint64_t* stamp, std::uint64_t stamp_value,
                    void* stream);
// kv_put_objects_announced's items (slab_puts.cu): each a put as
// kv_put_object's, its header's fields compact, then its announce stamp.
struct AnnouncedPutArgs {
  const char* src;
  char* dst;
  std::uint64_t bytes;
  ObjectHeader* header;
  std::uint64_t key_hash;
  std::uint64_t payload_base;
  std::uint32_t epoch;
  std::uint32_t n_pages;
  std::uint64_t* stamp;
  std::uint64_t stamp_value;
};
// 32 items, 2.3 KiB of parameters: under HIP's and older CUDA's 4 KiB.
constexpr int kAnnouncedPutsPerLaunch = 32;
struct AnnouncedPutBatch {
  AnnouncedPutArgs items[kAnnouncedPutsPerLaunch];
  std::uint32_t page_bytes;
  int n;
};
int LaunchPutObjectsAnnounced(const AnnouncedPutBatch& batch, std::uint64_t max_bytes, void* stream);

// cudaHostRegister(mapped, portable) and the device's address of it.
int RegisterHostMapped(void* host, std::size_t bytes, void** device);
int UnregisterHost(void* host);
int LaunchBeginWrite(ObjectHeader* header, const ObjectHeader& writing, std::uint32_t* result, void* stream);
int LaunchCommitReady(ObjectHeader* header, std::uint32_t epoch, std::uint32_t* result,
                      void* stream);
int LaunchReadState(const ObjectHeader* header, std::uint32_t* state_out, void* stream);

int StreamSynchronize(void* stream);
// kv_kernels.h's ForkStreams and JoinStreams (stream_fan.cu).
constexpr int kMaxFanStreams = 8;
int ForkStreams(void* stream, int ways, void** forked);
int JoinStreams(void* stream, void* const* forked, int ways);
// An event (blocking sync, no timing) recorded on `stream`; waited on,
// then destroyed.
int RecordEvent(void* stream, void** event);
int EventSynchronize(void* event);
int DestroyEvent(void* event);
int GetDevice(int* device);
int SetDevice(int device);
// The device `stream` belongs to; *device = -1 where the runtime cannot say (HIP).
int StreamDevice(void* stream, int* device);
// The device whose memory `pointer` is; *device = -1 for host or managed
// memory, or where the runtime cannot say (HIP).
int PointerDevice(const void* pointer, int* device);
// What `device` may do to the VMM mapping at `pointer` (cuMemGetAccess):
// 3 read and write, 1 read, 0 nothing; -1 where `pointer` is not a VMM
// mapping (cudaMalloc memory, where peer access decides) or on HIP.
int MappedAccess(const void* pointer, int device, int* access);
// Lets kernels of the current device access device `peer`'s memory;
// already enabled is success.
int EnablePeerAccess(int peer);
// *fits: 1 when this build has an image of the kernels for the current
// device (SASS of its architecture, or PTX the driver can compile), else 0.
int KernelImageFits(int* fits);

// "cudaErrorInvalidValue" (or HIP's name) for a code the launchers returned.
const char* ErrorName(int code);

}  // namespace nanokv::kernels::detail

#endif  // NANOKV_KERNELS_KV_LAUNCH_H_
